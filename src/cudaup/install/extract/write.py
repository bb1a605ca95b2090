"""Writing checked members: never following a link, never replacing a file."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from cudaup.errors import CudaupError, InsufficientSpaceError
from cudaup.install.extract.policy import (
    CHUNK,
    Checker,
    ExtractLimits,
    Member,
    Reader,
    UnsafeMemberError,
    refusal,
)
from cudaup.install.extract.tar import TarReader
from cudaup.install.extract.zip import RUN_MEMBER, ZipReader, compressed_size
from cudaup.util.faults import DENIED, DISK_FULL, denied, full_disk
from cudaup.util.parallel import check as check_cancelled
from cudaup.util.parallel import map_concurrently, usable_cpus

#: The sha256 of every file written, by its path below the destination (``bin/nvcc``).
Digests = dict[str, str]
_OPEN_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def check_space(archive: Path, destination: Path, needed: int) -> None:
    free = shutil.disk_usage(destination).free
    if needed > free:
        raise InsufficientSpaceError(
            f"{archive.name}: extracting needs {needed} bytes ({needed / 2**30:.2f} GiB) "
            f"in {destination}, but only {free} bytes ({free / 2**30:.2f} GiB) are free"
        )


def require_empty(archive: Path, destination: Path) -> None:
    try:
        with os.scandir(destination) as entries:
            if next(entries, None) is None:
                return
    except (FileNotFoundError, NotADirectoryError):
        raise CudaupError(
            f"cannot extract {archive.name}: {destination} is not an existing directory"
        ) from None
    raise CudaupError(f"cannot extract {archive.name} into {destination}: it is not empty")


def final_mode(member: Member) -> int:
    """0755 for directories and for files with any execute bit, else 0644, as pip and
    uv install wheels: NVIDIA's wheels store ``0744`` for nvcc, which would leave a
    toolkit shared with other users (a ``--prefix`` install by root) unrunnable by them."""
    if member.kind == "dir" or member.mode & 0o111:
        return 0o755
    return 0o644


#: Members at least this big are decompressed in parallel when the format allows it (zip):
#: inflating releases the GIL, and NVIDIA's wheels hold a few 30-80 MB binaries each.
PARALLEL_MEMBER = RUN_MEMBER
#: At least two, even on 2 CPUs: while a wheel downloads, its members' bytes arrive on
#: several connections at once, and a member waiting for its bytes holds no core; one
#: worker left nvvm's second binary (cicc) waiting for the first (libnvvm) to inflate
#: although its bytes were on disk (issue #27: a cold pypi install, 2 CPUs, phases tool).
PARALLEL_WORKERS = max(2, min(4, usable_cpus() - 1))


def worker_count(batches: list[list[Member]], cpus: int) -> int:
    """The threads that write a zip's ``batches`` (:func:`work_batches`) on ``cpus`` CPUs.

    :data:`PARALLEL_WORKERS` where two or more big members may inflate side by side (or
    one wait for its bytes while the other's are in).  Runs of small files alone (NVIDIA's
    CCCL wheel: 1,718 headers) get a worker per CPU but one: creating a file is kernel
    work that holds a core, so on 2 CPUs a second worker only takes the core that the
    download, its hash and the other wheels' inflating use (a cold pypi install of
    nvcc,cudart: 0.96x the wall, 8,800 context switches against 11,600, 16 runs in
    turns); where a core is idle, several help (round 6 of issue #27, docs/performance.md).
    """
    big = sum(1 for batch in batches if len(batch) == 1 and _big(batch[0]))
    return PARALLEL_WORKERS if big >= 2 else max(1, min(4, cpus - 1))


def _big(member: Member) -> bool:
    """A member inflated alone, through a handle of its own (:data:`PARALLEL_MEMBER`)."""
    return max(member.size, compressed_size(member)) >= PARALLEL_MEMBER


def extract_in_one_pass(
    reader: TarReader,
    archive: Path,
    destination: Path,
    limits: ExtractLimits,
    strip_top: bool,
    cancel: threading.Event | None = None,
) -> tuple[list[Member], Digests]:
    """A tar's members, each checked and then written as the stream reaches it; and the
    sha256 of each file, computed as its bytes went by (never read twice).

    A compressed tar can only be read front to back: listing it first and then
    writing it would decompress it twice (twice the time for a .tar.xz).  Each
    member is checked against everything before it; symlinks, the one kind that
    could redirect a later member, are created last, after every member has been
    checked and each link's target resolved.  A refusal partway leaves what was
    written in the destination for :func:`extract_archive` to clear.
    """
    checker = Checker(archive, reader.size, limits, strip_top)
    made: set[tuple[str, ...]] = set()
    planned: list[Member] = []
    links: list[Member] = []
    digests: Digests = {}
    budget = -1  # bytes known to be free; measured again only when a member needs more
    for member in reader.members():
        check_cancelled(cancel)
        checked = checker.add(member)
        if checked is None:
            continue
        planned.append(checked)
        if checked.kind == "symlink":
            links.append(checked)
            continue
        if checked.size > budget:
            budget = shutil.disk_usage(destination).free
            if checked.size > budget:
                raise InsufficientSpaceError(
                    f"{archive.name}: {checked.name} needs {checked.size} bytes in "
                    f"{destination}, but only {budget} bytes ({budget / 2**30:.2f} GiB) are free"
                )
        budget -= checked.size
        with explained(archive, destination, checked, checker.total):
            write_member(reader, checked, destination, made, digests)
    checker.finish()
    for link in links:
        with explained(archive, destination, link, checker.total):
            write_member(reader, link, destination, made, digests)
    return planned, digests


def write_members(
    reader: ZipReader,
    planned: list[Member],
    archive: Path,
    destination: Path,
    cancel: threading.Event | None = None,
    *,
    hashing: bool = True,
) -> Digests:
    """Write a zip's checked members; the sha256 of each file, computed as it was written
    (none without ``hashing``: a wheel's come from its RECORD, :func:`.wheel.check_record`).

    Every directory first, in this thread; then the files, spread over
    :func:`worker_count` threads (:func:`work_batches`): creating a file is kernel
    work done without the GIL, as are inflating, hashing and writing, and a wheel of
    headers is thousands of files (NVIDIA's CCCL wheel: 1,718), which a core otherwise
    idle can share; then the symlinks, once every file is written (no member lies below
    one: policy.Checker).  The first failure in any worker stops the others at their next
    member and is raised once all have stopped.
    """
    made: set[tuple[str, ...]] = set()
    files: list[Member] = []
    links: list[Member] = []
    digests: Digests = {}
    needed = sum(member.size for member in planned)
    for member in planned:
        check_cancelled(cancel)
        with explained(archive, destination, member, needed):
            if member.kind == "dir":
                write_member(reader, member, destination, made, digests)
            else:
                make_dirs(destination, member.parts[:-1], made)
                (files if member.kind == "file" else links).append(member)
    stop = threading.Event()  # this archive's first failure: its other workers stop

    def write_batch(batch: list[Member]) -> None:
        # A run of small members is read through one handle of the worker's own, a block at
        # a time (zip.ZipReader.read_run): no lock shared with the other workers, no reader
        # per member; a member alone (a big one, or a run of one) is read by ZipReader.open.
        with contextlib.ExitStack() as stack:
            run = (
                reader.read_run(batch, stack.enter_context(reader.opener()))
                if len(batch) > 1
                else None
            )
            for member in batch:
                check_cancelled(cancel)
                check_cancelled(stop)
                with explained(archive, destination, member, needed):
                    source = io.BytesIO(next(run)) if run is not None else reader.open(member)
                    with source:
                        path = member_path(destination, member.parts)
                        digest = write_file(source, path, member, hashing=hashing)
                    if hashing:
                        digests["/".join(member.parts)] = digest

    batches = work_batches(files)
    map_concurrently(write_batch, batches, worker_count(batches, usable_cpus()), cancel=stop)
    for link in links:
        check_cancelled(cancel)
        with explained(archive, destination, link, needed):
            write_member(reader, link, destination, made, digests)
    return digests


#: A worker's batch of small files closes, at the next directory, once it holds this many
#: members or compressed bytes: enough that handing out a batch costs nothing beside
#: writing it, few enough that one wheel's batches spread over every worker (CCCL: ~20).
BATCH_MEMBERS = 64
BATCH_BYTES = 1024 * 1024


def work_batches(files: list[Member]) -> list[list[Member]]:
    """The files in archive order, cut into the workers' tasks: each member of at least
    :data:`PARALLEL_MEMBER` alone (it is read through a handle of its own, and while
    downloading may wait for its bytes), runs of smaller ones together.

    A full run is cut only where the directory changes: creating a file holds its
    directory's lock while the inode is allocated, which made two threads creating in one
    directory slower than one (ext4 on the test machine: ~300 µs of kernel CPU per file;
    800 files took 0.26-0.41 s on one thread, 0.43-0.54 s on two in one directory,
    0.20-0.23 s on four in four).  Archive order is also the order a downloading wheel's
    bytes arrive in (after its member list), so the workers take up members about as
    their bytes land; a big member therefore ends the run before it.  A run that went on
    past it (nvcc's wheel: 11 small members from its first byte to its last, around its
    five binaries) held its worker until the wheel's last bytes came, and the binaries
    were inflated one after another by the other worker, the last ones after the
    download had ended (nvvm's cicc, 72 MB, began as its download ended and took 0.4 s).
    """
    batches: list[tuple[int, list[Member]]] = []  # (where each starts in ``files``, members)
    run: list[Member] = []
    run_start = run_bytes = 0
    for index, member in enumerate(files):
        if _big(member):
            if run:
                batches.append((run_start, run))
                run, run_bytes = [], 0
            batches.append((index, [member]))
            continue
        full = len(run) >= BATCH_MEMBERS or run_bytes >= BATCH_BYTES
        if full and run[-1].parts[:-1] != member.parts[:-1]:
            batches.append((run_start, run))
            run, run_bytes = [], 0
        if not run:
            run_start = index
        run.append(member)
        run_bytes += compressed_size(member)
    if run:
        batches.append((run_start, run))
    return [batch for _start, batch in sorted(batches, key=lambda item: item[0])]


def write_member(
    reader: Reader,
    member: Member,
    destination: Path,
    made: set[tuple[str, ...]],
    digests: Digests,
) -> None:
    path = member_path(destination, member.parts)
    make_dirs(destination, member.parts[:-1], made)
    if member.kind == "dir":
        make_dirs(destination, member.parts, made)
        os.chmod(path, final_mode(member))  # noqa: PTH101 - a string: see member_path
    elif member.kind == "symlink":
        os.symlink(member.target, path)  # noqa: PTH211
    else:
        with reader.open(member) as source:
            digests["/".join(member.parts)] = write_file(source, path, member)


@contextlib.contextmanager
def explained(archive: Path, destination: Path, member: Member, needed: int) -> Iterator[None]:
    """Turn what can go wrong while writing one member into cudaup's errors.

    ``needed``: the bytes the archive's files take (as far as they are known yet).
    """
    try:
        yield
    except UnsafeMemberError as exc:
        raise refusal(archive, member.name, str(exc)) from None
    except FileExistsError:
        # Only possible where names collide that the checks saw as distinct
        # (a case-insensitive filesystem): never write through what is there.
        raise refusal(archive, member.name, "already exists in the destination") from None
    except OSError as exc:
        action = f"cannot extract {archive.name} ({member.name})"
        if exc.errno in DISK_FULL:
            raise full_disk(action, destination, needed, exc) from None
        if exc.errno in DENIED:
            raise denied(action, exc, (), destination) from None
        raise


def member_path(destination: Path, parts: tuple[str, ...]) -> str:
    """Where the checked member (or directory level) ``parts`` goes under ``destination``.

    A plain string, not a Path: an archive is thousands of members, and joining a Path
    costs more than creating the file it names.  Each part is a checked plain name
    (policy.Checker), so this is joinpath's result.
    """
    return f"{os.fspath(destination)}/{'/'.join(parts)}"


def make_dirs(destination: Path, parts: tuple[str, ...], made: set[tuple[str, ...]]) -> None:
    """Create each level of ``parts``; an existing level must be a real directory."""
    for depth in range(1, len(parts) + 1):
        prefix = parts[:depth]
        if prefix in made:
            continue
        path = member_path(destination, prefix)
        try:
            os.mkdir(path, 0o755)  # noqa: PTH102
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise
        made.add(prefix)


def write_file(source: IO[bytes], path: str | Path, member: Member, *, hashing: bool = True) -> str:
    """Stream one member into a new file; its size must match the header's.

    Returns the sha256 of what was written (hashing the bytes on their way costs a
    fraction of reading them back later), or "" without ``hashing``.
    """
    digest = hashlib.sha256() if hashing else None
    # The descriptor itself, not a buffered file over it: chunks are large already, and
    # a file object per member costs more than a header's write (thousands per wheel).
    fd = os.open(path, _OPEN_FLAGS, 0o600)
    try:
        written = 0
        while chunk := source.read(CHUNK):
            written += len(chunk)
            if written > member.size:
                raise UnsafeMemberError(f"holds more than the {member.size} bytes its header says")
            _write_all(fd, chunk)
            if digest is not None:
                digest.update(chunk)
        if written != member.size:
            raise UnsafeMemberError(f"truncated: {written} of {member.size} bytes")
        if hasattr(os, "fchmod"):
            os.fchmod(fd, final_mode(member))
    finally:
        os.close(fd)
    if not hasattr(os, "fchmod"):  # pragma: no cover - Windows
        os.chmod(path, final_mode(member))  # noqa: PTH101
    return digest.hexdigest() if digest is not None else ""


def _write_all(fd: int, data: bytes) -> None:
    """``write(2)`` until every byte is out (it may write fewer than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def clear(destination: Path) -> None:
    """Remove what a failed extraction wrote: the destination started empty."""
    for child in list(destination.iterdir()):
        with contextlib.suppress(OSError):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
