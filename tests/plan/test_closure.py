"""Reading uv's answer back: the packages, who requires each, where each came from."""

from __future__ import annotations

import pytest

from cudaup.errors import SourceFormatError
from cudaup.plan.closure import parse_compile_output

# What uv 0.13.9 wrote for `vllm==0.33.0` (trimmed), with --annotation-style split
# --emit-index-annotation and a constraints file.
ANSWER = """\
cuda-toolkit==13.0.3.0
    # via
    #   -c /tmp/cudaup-plan-x/constraints.txt
    #   torch
    # from https://pypi.org/simple
humming-kernels==0.1.19
    # via vllm
    # from https://pypi.org/simple
nvidia-cuda-nvrtc==13.0.88
    # via
    #   cuda-toolkit
    #   humming-kernels
    # from https://pypi.org/simple
torch==2.14.0+cu130
    # via
    #   humming-kernels
    #   vllm
    # from file:///tmp/cudaup-plan-x/cu130-1
vllm==0.33.0
    # via -r /tmp/cudaup-plan-x/requirements.in
    # from https://pypi.org/simple
"""


def test_packages_parents_and_origins() -> None:
    closure = parse_compile_output(ANSWER)
    assert len(closure) == 5
    torch = closure.get("torch")
    assert torch is not None and str(torch.version) == "2.14.0+cu130"
    assert torch.index_url == "file:///tmp/cudaup-plan-x/cu130-1"
    assert torch.parents == {"humming-kernels", "vllm"}
    vllm = closure.get("vllm")
    assert vllm is not None and vllm.requested and not torch.requested
    toolkit = closure.get("cuda-toolkit")
    assert toolkit is not None and toolkit.parents == {"torch"}  # the constraint is no parent
    assert [p.name for p in closure.children("vllm")] == ["humming-kernels", "torch"]


def test_chains_are_shortest_paths() -> None:
    closure = parse_compile_output(ANSWER)
    chain = closure.chain("vllm", {"cuda-toolkit"})
    assert chain is not None and [str(p) for p in chain] == [
        "vllm 0.33.0",
        "torch 2.14.0+cu130",
        "cuda-toolkit 13.0.3.0",
    ]
    nvrtc = closure.chain("vllm", {"nvidia-cuda-nvrtc"})
    assert nvrtc is not None and [p.name for p in nvrtc][1] == "humming-kernels"
    assert closure.chain("vllm", {"numpy"}) is None and closure.chain("absent", {"torch"}) is None


@pytest.mark.parametrize(
    "text",
    [
        "torch==2.14.0\n    # via -r x\nrm -rf /\n",
        "torch==not a version!\n",
        "torch==2.14.0\n    # via\n    #   ../etc/passwd\n",
        "torch @ https://example.org/torch.whl\n",
    ],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(SourceFormatError):
        parse_compile_output(text)
