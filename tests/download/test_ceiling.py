"""The size ceiling: a body that never ends stops at ``--max-size`` (exit 23).

A 200 with no Content-Length that never stops, for a file no source gives a size
for, is read up to the ceiling and refused the moment it passes it; a file whose
size a source states is refused before its first byte when that size passes the
ceiling.  Each case runs through :func:`cudaup.download.download` and through
``cudaup download URL --sha256 … --max-size`` in a sandboxed filesystem
(:mod:`tests.sandbox`), snapshotted before and after: nothing is left but the lock.
The free space a growing body leaves is re-checked in ``test_disk.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.config import DEFAULT_MAX_SIZE, Settings, parse_size
from cudaup.download import DownloadRequest, ProgressEvent, download
from cudaup.errors import EXIT_CODES, DownloadTooLargeError, UsageError
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer, payload
from tests.helpers import run_cli
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

MIB = 1024 * 1024
BODY = payload(MIB, seed=31)
SHA = hashlib.sha256(BODY).hexdigest()
#: a 200 with no Content-Length, no ranges, the body sent again and again
ENDLESS = Fault(ignore_range=True, no_length=True, endless=True)


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def client(tmp_path: Path, max_size: int) -> HttpClient:
    settings = Settings.from_env(cache_dir=tmp_path / "cache")
    return HttpClient(dataclasses.replace(settings, max_size=max_size), backoff=backoff.NO_WAIT)


def unsized(server: FaultServer) -> DownloadRequest:
    """A bare URL: no source states the file's size."""
    return DownloadRequest(server.url + "/f.run", "f.run", None, SHA)


def test_the_default_ceiling_is_far_above_cudas_largest_file() -> None:
    assert Settings.from_env({}).max_size == DEFAULT_MAX_SIZE == 16 * 2**30
    assert Settings.from_env({"CUDAUP_MAX_SIZE": "5G"}).max_size == 5 * 2**30


@pytest.mark.parametrize(
    ("text", "size"),
    [("1", 1), ("4096", 4096), ("500M", 500 * MIB), ("500MiB", 500 * MIB), ("1.5g", 3 * 2**29),
     ("16 GB", 16 * 2**30), ("2T", 2 * 2**40), ("10k", 10240)],
)  # fmt: skip
def test_a_size_is_bytes_or_a_number_with_a_binary_unit(text: str, size: int) -> None:
    assert parse_size(text, "--max-size") == size


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | st.from_regex(r"\A\d{1,30}(\.\d{0,8})?\s?[kKmMgGtTpP]?i?[bB]?\Z"))
def test_any_text_is_a_size_or_a_usage_error_naming_the_flag(text: str) -> None:
    try:
        size = parse_size(text, "--max-size")
    except UsageError as exc:
        assert str(exc).startswith(f"--max-size={text!r} is not a size")
    else:
        assert isinstance(size, int) and size >= 1


def test_an_endless_body_stops_as_it_passes_the_ceiling(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, ENDLESS)
    events: list[ProgressEvent] = []
    ceiling = 8 * MIB
    with pytest.raises(DownloadTooLargeError) as caught:
        download(
            unsized(fault_server), tmp_path / "out", http=client(tmp_path, ceiling),
            progress=events.append,
        )  # fmt: skip
    assert str(caught.value) == (
        f"{fault_server.url}/f.run sent more than the download size ceiling of 8388608 bytes "
        "(0.01 GiB) and no source states its size; refusing it (--max-size or "
        "CUDAUP_MAX_SIZE raises it)"
    )
    assert caught.value.exit_code == 23
    # never more than the ceiling on disk, and nothing left of it
    assert max(e.done for e in events if e.kind == "advance") <= ceiling
    assert [e.kind for e in events][-1] == "discarded"
    assert list((tmp_path / "out").iterdir()) == []
    # one request after the probe, not retried: a body that passed the ceiling would again
    assert len(fault_server.requests("/f.run")) == 2


def test_a_body_of_exactly_the_ceiling_is_taken_and_one_byte_more_is_not(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(ignore_range=True, no_length=True))
    result = download(unsized(fault_server), tmp_path / "out", http=client(tmp_path, MIB))
    assert result.path.read_bytes() == BODY and result.size == MIB
    result.path.unlink()
    with pytest.raises(DownloadTooLargeError):
        download(unsized(fault_server), tmp_path / "out", http=client(tmp_path, MIB - 1))
    assert list((tmp_path / "out").iterdir()) == []


def test_a_stated_size_past_the_ceiling_is_refused_before_its_first_byte(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY)
    with pytest.raises(DownloadTooLargeError) as caught:
        download(unsized(fault_server), tmp_path / "out", http=client(tmp_path, MIB // 2))
    assert str(caught.value) == (
        f"{fault_server.url}/f.run is 1048576 bytes (0.00 GiB), more than the download size "
        "ceiling of 524288 bytes (0.00 GiB); refusing it (--max-size or CUDAUP_MAX_SIZE raises it)"
    )
    [probe] = fault_server.requests("/f.run")
    assert probe.range == "bytes=0-0" and probe.status == 206  # the probe alone
    # a size stated by the source (a manifest), with a server that states none, too
    fault_server.add("/f.run", BODY, Fault(ignore_range=True, no_length=True))
    stated = DownloadRequest(fault_server.url + "/f.run", "f.run", MIB, SHA)
    with pytest.raises(DownloadTooLargeError, match="is 1048576 bytes"):
        download(stated, tmp_path / "out", http=client(tmp_path, MIB // 2))
    assert len(fault_server.requests("/f.run")) == 2  # each probe, no body asked for


# ---------------------------------------------------------------------------
# Through the command line, in a sandbox
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("faults", "flags", "env", "says"),
    [
        (
            [ENDLESS],
            ["--max-size", "8M"],
            {},
            "sent more than the download size ceiling of 8388608",
        ),
        ([ENDLESS], [], {"CUDAUP_MAX_SIZE": "4m"}, "ceiling of 4194304 bytes"),
        ([], ["--max-size", "512K"], {}, "is 1048576 bytes (0.00 GiB), more than the download"),
    ],
    ids=["endless-body", "endless-body-env", "stated-size"],
)
def test_cli_the_ceiling_refuses_with_exit_23_and_leaves_nothing(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    faults: list[Fault],
    flags: list[str],
    env: dict[str, str],
    says: str,
) -> None:
    fault_server.add("/f.run", BODY, *faults)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = sandbox.snapshot()
    url = fault_server.url + "/f.run"
    run = run_cli(
        capsys, "download", url, "--sha256", SHA, "-o", str(sandbox.work), "--json", *flags
    )
    assert run.code == EXIT_CODES["too-large"] == 23, run.err
    last = run.err.splitlines()[-1]
    assert last.startswith(f"cudaup: error: {url} ") and says in last, last
    assert last.endswith("; refusing it (--max-size or CUDAUP_MAX_SIZE raises it)")
    assert run.json()["error"]["kind"] == "too-large"
    assert sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache]) == set()


def test_cli_a_max_size_that_is_not_a_size_is_a_usage_error(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = fault_server.url + "/f.run"
    run = run_cli(capsys, "download", url, "--sha256", SHA, "--max-size", "1" * 5000)
    assert run.code == 2 and "--max-size='1111" in run.err and "is not a size" in run.err
    assert fault_server.requests() == []
