"""Every parser of what a user types, fed anything: it returns, or raises a CudaupError;
never another exception (which the CLI would report as an internal error, exit 1).

The document parsers have the same property (tests/nvidia/test_parsers_property.py);
these are the requests, pins and option values: ``13.0.1``, ``cu130``, ``13.0u1``,
``--driver``, ``--cuda``, ``--platform``, ``--components``, a ``.cuda-version``.  The
strategies lean on what broke before: numbers of thousands of digits (``int()``
refuses 4301), many dots, letters where digits go, control characters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaup.core.components import nvidia_name, split_components, unknown_component
from cudaup.core.driver import CudaVersion, DriverVersion
from cudaup.core.platforms import parse_platform
from cudaup.core.versions import MAX_DIGITS, parse_request
from cudaup.errors import EXIT_CODES, CudaupError, ReleaseNotFoundError
from cudaup.plan.lines import parse_line
from tests.helpers import run_cli

pytestmark = pytest.mark.property

#: A run of digits, short or far longer than int() converts.
digits = st.one_of(
    st.integers(min_value=0, max_value=10**12).map(str),
    st.integers(min_value=1, max_value=5000).map(lambda n: "1" * n),
)
#: Text shaped like a version request: a prefix, dotted numbers, an update suffix.
version_like = st.builds(
    lambda prefix, numbers, suffix: prefix + ".".join(numbers) + suffix,
    st.sampled_from(["", "cuda ", "v", "cu", "CUDA Toolkit ", " "]),
    st.lists(digits, min_size=1, max_size=6),
    st.sampled_from(["", " Update 1", "u", "u12", " GA", ".", "-rc1", "\n", "\x00"]),
) | st.builds(lambda number: f"13.0 Update {number}", digits)
anything = st.text(max_size=60) | version_like


def _clean(parse: Callable[[], Any]) -> None:
    with contextlib.suppress(CudaupError):
        parse()


@settings(max_examples=400, deadline=None)
@given(anything)
def test_a_release_request_parses_or_is_refused(text: str) -> None:
    _clean(lambda: parse_request(text))


@pytest.mark.parametrize("request_text", ["13." + "1" * 4400, "1" * 4301, "13.0u" + "9" * 5000,
                                          "13.0." + "1" * (MAX_DIGITS + 1)])  # fmt: skip
def test_a_number_longer_than_any_release_has_is_no_such_release(request_text: str) -> None:
    with pytest.raises(ReleaseNotFoundError, match="at most 9 digits") as caught:
        parse_request(request_text)
    assert len(str(caught.value)) < 200  # the request is named, not repeated


@settings(max_examples=300, deadline=None)
@given(anything)
def test_driver_and_cuda_versions_parse_or_are_refused(text: str) -> None:
    _clean(lambda: DriverVersion.from_text(text))
    _clean(lambda: CudaVersion.from_text(text))
    _clean(lambda: parse_line(text))


@settings(max_examples=300, deadline=None)
@given(anything | st.text(alphabet="-_,. x86aArRmM64lLinuxsbsa", max_size=40))
def test_platforms_and_components_parse_or_are_refused(text: str) -> None:
    _clean(lambda: parse_platform(text))

    def components() -> None:
        for name in split_components(text) or ():
            raise unknown_component(nvidia_name(name), ["cuda_nvcc", "cuda_cudart"], "13.0.1")

    _clean(components)


# -- through the command line: what each option does with the value ---------------------
COMMANDS: list[Callable[[str], tuple[str, ...]]] = [
    lambda v: ("resolve", v, "--offline"),
    lambda v: ("resolve", "13.0.1", "--platform", v, "--offline"),
    lambda v: ("resolve", "13.0.1", "--components", v, "--offline"),
    lambda v: ("compat", "13.0.1", "--driver", v, "--offline"),
    lambda v: ("compat", v, "--driver", "580.82.07", "--offline"),
]


#: run_cli reads capsys empty after each run, so one capsys serves every example.
CAPTURED = [HealthCheck.function_scoped_fixture]


@settings(max_examples=60, deadline=None, suppress_health_check=CAPTURED)
@given(st.sampled_from(range(len(COMMANDS))), version_like | st.text(max_size=30))
def test_the_cli_never_fails_with_an_internal_error_on_a_value(
    capsys: pytest.CaptureFixture[str], which: int, value: str
) -> None:
    if value.startswith("-") or "\x00" in value:
        return  # an option, not a value; argv cannot hold NUL
    result = run_cli(capsys, *COMMANDS[which](value))
    assert result.code != 1, (COMMANDS[which](value)[:4], result.err[-300:])
    assert "internal error" not in result.err


@settings(max_examples=40, deadline=None, suppress_health_check=CAPTURED)
@given(version_like | st.text(max_size=30))
def test_a_pin_file_holding_anything_is_never_an_internal_error(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], pin: str
) -> None:
    project = tmp_path_factory.mktemp("project")
    (project / ".cuda-version").write_text(pin + "\n", errors="surrogateescape")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDAUP_HOME", str(project / "home"))
        patch.chdir(project)
        result = run_cli(capsys, "which", "nvcc")
    assert result.code != 1, (pin[:40], result.err[-300:])
    assert "internal error" not in result.err


def test_the_issues_requests_are_exit_3_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #20: ``resolve 13.<4400 digits> --offline``, ``install``, and a pin that
    ``which nvcc`` reads: exit 3, one sentence naming the request (cut short)."""
    big = "13." + "1" * 4400
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".cuda-version").write_text(big + "\n")
    for argv in (("resolve", big, "--offline"), ("install", big, "--components", "nvcc"),
                 ("which", "nvcc"), ("resolve", big, "--offline", "--json")):  # fmt: skip
        result = run_cli(capsys, *argv)
        assert result.code == EXIT_CODES["release-not-found"], (argv[0], result.err[-300:])
        assert "no CUDA release is '13.1111" in result.err and "(4403 characters)" in result.err
        assert result.err.count("\n") == 1 and len(result.err) < 300
    assert result.json()["error"]["kind"] == "release-not-found"
    assert not (tmp_path / "home" / "toolkits").exists()
    driver = run_cli(capsys, "compat", "13.0.1", "--driver", "580." + "1" * 4400, "--offline")
    assert driver.code == EXIT_CODES["usage"] and "is not an NVIDIA driver version" in driver.err
