"""Downloads where another user may write: a directory another user owns or may write
(the sticky bit aside), or one below such a directory or a link of theirs, is refused
before any byte moves, a part file, resume state or
earlier download another user left under the file's names is neither used nor removed,
and a link of ours under those names is never followed.

The other user is uid 65534, made the owner with ``chown`` (root only); the server is a
real loopback HTTP server.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.download import DownloadRequest, download
from cudaup.errors import EXIT_CODES, UntrustedPathError
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import FaultServer, payload
from tests.helpers import run_cli
from tests.osfaults import NOBODY, ROOT_ONLY

MIB = 1024 * 1024
SIZE = 3 * MIB
BODY = payload(SIZE, seed=33)
SHA = hashlib.sha256(BODY).hexdigest()
NAMES = ("f.run", "f.run.part", "f.run.part.json")


def client(cache: Path) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=cache), backoff=Backoff(base=0.01, cap=0.01))


def fetch(server: FaultServer, out: Path, cache: Path) -> Path:
    request = DownloadRequest(server.url + "/f.run", "f.run", SIZE, SHA)
    return download(request, out, http=client(cache), connections=2).path


def refusal(server: FaultServer, out: Path, cache: Path) -> str:
    """What the download into ``out`` is refused with (exit 22)."""
    with pytest.raises(UntrustedPathError) as caught:
        fetch(server, out, cache)
    return str(caught.value)


def output(tmp_path: Path, mode: int) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(mode)
    return out


def resume_state(server: FaultServer, segments: list[list[int]]) -> str:
    """A resume state for the server's file, as cudaup writes it."""
    return json.dumps({
        "schema": 1, "url": server.url + "/f.run", "size": SIZE, "etag": '"v1"',
        "last_modified": "Mon, 01 Jan 2024 00:00:00 GMT", "segments": segments,
    })  # fmt: skip


@ROOT_ONLY
@pytest.mark.parametrize(
    ("owner", "mode", "why"),
    [
        (NOBODY, 0o755, f"is owned by uid {NOBODY} (nobody), not by you (uid 0 (root)) or root"),
        (0, 0o775, "is writable by its group (mode 775)"),
        (0, 0o777, "is writable by its group and every user (mode 777)"),
    ],
)
@pytest.mark.parametrize("above", [False, True], ids=["itself", "above"])
def test_a_directory_another_user_owns_or_may_write_is_refused(
    fault_server: FaultServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    owner: int,
    mode: int,
    why: str,
    above: bool,
) -> None:
    """The download's directory, or one above it (the download's is root's then, but who
    may rename the entries above may put another in its place, a link to /etc, between
    the check and the writes)."""
    fault_server.add("/f.run", BODY)
    shared = output(tmp_path, 0o755)
    out = shared / "below" if above else shared
    out.mkdir(exist_ok=True)
    shared.chmod(mode)
    os.chown(shared, owner, NOBODY)  # a group of others
    assert refusal(fault_server, out, tmp_path / "cache") == (
        f"cudaup does not download into {out}: {shared} {why}, so another user could replace "
        "the file between its check and its use; choose another -o directory, or fix its "
        "permissions"
    )
    run = run_cli(capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(out))
    assert run.code == EXIT_CODES["untrusted-path"] == 22
    assert f"cudaup does not download into {out}: {shared} {why}" in run.err
    assert fault_server.requests() == []  # refused before any byte moved
    assert list(out.iterdir()) == []


@ROOT_ONLY
def test_a_link_another_user_owns_on_the_way_is_refused(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """A link on the way says where the directory is: its owner may point it elsewhere."""
    fault_server.add("/f.run", BODY)
    (tmp_path / "real").mkdir()
    (tmp_path / "real/out").mkdir()
    link = tmp_path / "via"
    link.symlink_to(tmp_path / "real")
    os.lchown(link, NOBODY, NOBODY)
    assert refusal(fault_server, link / "out", tmp_path / "cache").startswith(
        f"cudaup does not download into {link / 'out'}: {link} is owned by uid {NOBODY} (nobody)"
    )
    assert fault_server.requests() == []


@ROOT_ONLY
@pytest.mark.parametrize(("mode", "group"), [(0o1777, NOBODY), (0o775, 0), (0o755, NOBODY)])
def test_a_directory_below_a_sticky_or_private_group_one_takes_downloads(
    fault_server: FaultServer, tmp_path: Path, mode: int, group: int
) -> None:
    """Below /tmp (others may add entries, not rename ours), below a directory of the
    user's own private group (umask 002), below one that is ours: the download goes on."""
    fault_server.add("/f.run", BODY)
    above = tmp_path / "above"
    above.mkdir()
    (above / "out").mkdir()
    above.chmod(mode)
    os.chown(above, 0, group)
    assert fetch(fault_server, above / "out", tmp_path / "cache").read_bytes() == BODY


def test_a_sticky_directory_others_may_write_takes_downloads(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """/tmp's case: others may add entries there, but neither rename nor remove ours."""
    fault_server.add("/f.run", BODY)
    out = output(tmp_path, 0o1777)
    assert fetch(fault_server, out, tmp_path / "cache").read_bytes() == BODY


@ROOT_ONLY
def test_a_directory_writable_by_your_own_group_alone_takes_downloads(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """umask 002 (Debian's and Ubuntu's users): every directory a user makes is 775, its
    group the user's own private one (root's here: named root, no other member)."""
    fault_server.add("/f.run", BODY)
    out = output(tmp_path, 0o775)
    os.chown(out, 0, 0)
    assert fetch(fault_server, out, tmp_path / "cache").read_bytes() == BODY


@ROOT_ONLY
@pytest.mark.parametrize("name", NAMES)
def test_a_file_another_user_left_under_the_names_is_neither_used_nor_removed(
    fault_server: FaultServer, tmp_path: Path, name: str
) -> None:
    """The helper's attack: another user's part file and resume state, which a resume
    would have taken (its bytes and its list of what is on disk) and kept writable."""
    fault_server.add("/f.run", BODY)
    out = output(tmp_path, 0o1777)
    planted = out / name
    theirs = resume_state(fault_server, [[0, SIZE, SIZE]]).encode()
    planted.write_bytes(theirs if name.endswith(".json") else b"x" * SIZE)
    os.chown(planted, NOBODY, NOBODY)
    assert refusal(fault_server, out, tmp_path / "cache") == (
        f"{planted} belongs to uid {NOBODY} (nobody): cudaup neither uses nor removes another "
        "user's file; remove it, or choose another -o directory, or fix its permissions"
    )
    assert planted.stat().st_uid == NOBODY and planted.stat().st_size in {SIZE, len(theirs)}
    assert fault_server.requests() == []
    planted.unlink()
    assert fetch(fault_server, out, tmp_path / "cache").read_bytes() == BODY


def test_a_link_of_ours_under_the_part_name_is_never_written_through(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """A resume state of ours beside a part file that is a link: the link is removed and
    the download starts afresh; the file it pointed at keeps its bytes."""
    fault_server.add("/f.run", BODY)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"\0" * SIZE)  # the size the resume state expects
    (out / "f.run.part").symlink_to(victim)
    (out / "f.run.part.json").write_text(resume_state(fault_server, [[0, 0, SIZE]]))
    assert fetch(fault_server, out, tmp_path / "cache").read_bytes() == BODY
    assert victim.read_bytes() == b"\0" * SIZE
    assert sorted(p.name for p in out.iterdir()) == ["f.run"]


def test_an_earlier_download_others_may_write_is_fetched_again(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """Our own earlier download, right bytes and all, that group or others may write is
    not vouched for: another user could change it between the check and the use."""
    fault_server.add("/f.run", BODY)
    out = tmp_path / "out"
    out.mkdir()
    earlier = fetch(fault_server, out, tmp_path / "cache")
    earlier.chmod(0o666)
    before = len(fault_server.requests())
    again = fetch(fault_server, out, tmp_path / "cache")
    assert again.read_bytes() == BODY and again.stat().st_mode & 0o022 == 0
    assert len(fault_server.requests()) > before


def test_a_directory_of_ours_under_the_part_name_is_a_usage_error(
    fault_server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fault_server.add("/f.run", BODY)
    out = output(tmp_path, 0o755)
    (out / "f.run.part").mkdir()
    run = run_cli(capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(out))
    assert run.code == EXIT_CODES["usage"] == 2
    assert f"{out}/f.run.part is a directory; cudaup will not download f.run beside it" in run.err
    assert fault_server.requests() == []
