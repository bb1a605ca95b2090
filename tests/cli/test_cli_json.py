"""The small ``--json`` documents, byte for byte: each key, in its order, as users' scripts
read them (``which``, ``env``, ``default --unset``, ``default --system``, ``cache dir``,
``arch``, ``versions``).  Each is built by a ``to_json()`` beside its data; these pin the
documents to what they were when the handlers put them together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudaup.install.store import Store
from tests.cli.test_cli_switch import cudaup, store  # noqa: F401 - fixture

CUBIN = Path(__file__).parent.parent / "data" / "binaries" / "ptxas-12.9.86-sm_90a.cubin"


def printed(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> str:
    """What ``cudaup ARGV --json`` prints on stdout, after checking its exit code."""
    got, out, err = cudaup(capsys, *argv, "--json")
    assert got == code, err
    return out


def text_of(document: dict[str, Any]) -> str:
    """``document`` as ``--json`` prints it: two-space indent, its keys in this order."""
    return json.dumps({"schema": 1, **document}, indent=2) + "\n"


def chosen(path: Path, source: str, reason: str, request: str) -> dict[str, Any]:
    """The ``toolkit`` object (``Active.to_json``) of a toolkit ``cudaup`` installed."""
    return {
        "source": source,
        "reason": reason,
        "request": request,
        "origin": None,
        "version": path.name,
        "path": str(path),
        "problem": None,
        "warnings": [],
    }


def test_which(
    store: Store,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CUDAUP_TOOLKIT", "13.0")
    toolkit = store.toolkits_dir / "13.0.1"
    assert printed(capsys, "which", "ptxas") == text_of(
        {
            "tool": "ptxas",
            "path": str(toolkit / "bin" / "ptxas"),
            "toolkit": chosen(toolkit, "env", "from CUDAUP_TOOLKIT", "13.0"),
        }
    )


def test_env(store: Store, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    toolkit = store.toolkits_dir / "13.0.1"
    for shell, path, library_path in (
        ("bash", f"{toolkit / 'bin'}:/usr/bin:/bin", f"{toolkit / 'lib64'}"),
        (
            "dockerfile",
            f"{toolkit / 'bin'}:${{PATH}}",
            f"{toolkit / 'lib64'}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}",
        ),
    ):
        assert printed(capsys, "env", "13.0", "--shell", shell) == text_of(
            {
                "shell": shell,
                "toolkit": chosen(toolkit, "run", "from the command line", "13.0"),
                "variables": {
                    "CUDA_HOME": str(toolkit),
                    "CUDA_PATH": str(toolkit),
                    "PATH": path,
                    "LD_LIBRARY_PATH": library_path,
                },
            }
        )


def test_env_github_names_the_files_it_appended_to(
    store: Store,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    files = {
        name: tmp_path / name.lower() for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT")
    }
    for name, path in files.items():
        path.touch()
        monkeypatch.setenv(name, str(path))
    toolkit = store.toolkits_dir / "13.0.1"
    document = json.loads(printed(capsys, "env", "13.0", "--shell", "github", "--output"))
    assert list(document) == ["schema", "shell", "toolkit", "variables", "files"]
    assert document["files"] == {name: str(path) for name, path in files.items()}
    assert document["toolkit"] == chosen(toolkit, "run", "from the command line", "13.0")
    assert "cuda-home" in files["GITHUB_OUTPUT"].read_text()


def test_default_unset_and_the_system_link(
    store: Store,  # noqa: F811 - fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cudaup(capsys, "default", "13.0")[0] == 0
    assert printed(capsys, "default", "--unset") == text_of({"default": None})
    assert store.default() is None
    assert printed(capsys, "default", "--system") == text_of(
        {
            "link": "/usr/local/cuda",
            "state": {
                "kind": "absent",
                "target": None,
                "alternative": None,
                "status": None,
                "value": None,
            },
        }
    )


def test_cache_dir(
    store: Store,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert printed(capsys, "cache", "dir") == text_of({"root": str(tmp_path / "elsewhere")})


def test_arch(capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads(printed(capsys, "arch", str(CUBIN), "--gpu", "sm_90a,sm_80", code=20))
    assert list(document) == ["schema", "packages", "gpus"]
    assert [p["name"] for p in document["packages"]] == [str(CUBIN)]
    assert [(g["gpu"], g["covered"]) for g in document["gpus"]] == [
        ("sm_90a", [str(CUBIN)]),
        ("sm_80", []),
    ]


def test_versions_offline(capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads(printed(capsys, "--offline", "versions"))
    assert list(document) == ["schema", "releases", "snapshot"]
    assert document["releases"] and isinstance(document["snapshot"], str)
