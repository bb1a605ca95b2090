"""What a plan tells people of the lines it did not choose (plan/result.py)."""

from __future__ import annotations

from cudaup.plan.result import Exclusion


def test_a_failed_lines_summary_leads_with_the_project_no_version_of_fits() -> None:
    """uv's explanation of 13.1 for ``vllm flashinfer-python`` (live PyPI, cut): its first
    sentence alone ("Because torch>=2.15.0 depends on …") said neither that torch is what
    fails nor that every version of it does; the summary now says so first."""
    because = (
        "Because torch>=2.15.0 depends on cuda-toolkit[cublas]==13.2.2 and "
        "cuda-toolkit{sys_platform == 'linux'}==13.1.*"
    )
    message = (
        f"{because}, we can conclude that torch>=2.15.0 cannot be used. (1) Because "
        "torch==2.10.0 depends on nvidia-cuda-nvrtc-cu12<0, which does not allow any "
        "versions, we can conclude that all versions of torch cannot be used. And because "
        "flashinfer-python>=0.5.0rc1 depends on torch, we can conclude that all versions of "
        "flashinfer-python cannot be used."
    )
    summary = Exclusion((13, 1), "resolution", message).summary()
    assert summary == (f"13.1: no resolution: no version of torch can be used (b{because[1:]}, …)")
    # One cause, every version of nothing: its first sentence, as before (README's 13.5).
    single = f"{because}, we can conclude that torch>=2.15.0 cannot be used."
    assert Exclusion((13, 1), "resolution", single).summary() == f"13.1: no resolution ({because})"
