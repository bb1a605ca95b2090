"""Who may decide what runs: the one rule for pins, toolkits named by path, and the
directories cudaup downloads and plans in.

Git's answer to CVE-2022-24765 (``safe.directory``), applied to what chooses a
toolkit.  A ``.cuda-version`` file, or a toolkit directory named by a path (in a
pin, ``CUDAUP_TOOLKIT``, ``cudaup default`` or ``cudaup run PATH``), decides which
program runs as the invoking user, so it counts only when no other user could have
chosen it:

* a pin is honoured only when it, and the directory it is in, are owned by the
  invoking user (the effective uid) or root, and no one else may write the pin
  (no group or other write bit).  The file checked is the file read: the checks run
  on the open descriptor, so a swap in between changes nothing;
* a toolkit named by path is used only when the toolkit directory, its ``bin/`` and
  the tool run from it are owned by the invoking user or root and writable by no one
  else, and so is every directory on the way to them (through symbolic links, each
  link owned by the user or root too), except that a directory others may write is
  accepted when it has the sticky bit (``/tmp``), since the entry below it is then
  the user's or root's and no one else may rename it.  The whole chain matters
  because the toolkit is checked first and run later: a directory another user may
  write, anywhere above it, would let them put another toolkit in its place.

The directories cudaup downloads into, the cache's ``plan/`` and an environment's
snapshots follow the same rule (:func:`directories_problem`), every directory above
them included: another user who may write there, or above, could change the bytes
between their check and their use.

``CUDAUP_SAFE_DIRECTORIES`` lists the exceptions a user trusts, as git's
``safe.directory`` does: ``:``-separated absolute paths, each a pin's directory or a
toolkit directory, ``DIR/*`` for DIR and everything below it, ``*`` for everything.
A relative entry matches nothing.

Imported by every shim (:mod:`cudaup.switch.shim`), so it imports only ``os`` and
``stat`` (both already loaded when Python starts).
"""

# os.path, not pathlib: this runs on every compiler call.
# ruff: noqa: PTH100, PTH109, PTH115, PTH116, PTH117, PTH118, PTH120

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

SAFE_DIRECTORIES_ENV = "CUDAUP_SAFE_DIRECTORIES"
#: The write bits that let someone other than the owner change a file or directory.
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
#: As the kernel's limit on symbolic links followed in one lookup.
_MAX_LINKS = 40


# -- the exceptions ---------------------------------------------------------------------------
def safe_directories(env: Mapping[str, str]) -> list[str]:
    """The entries of ``CUDAUP_SAFE_DIRECTORIES`` (blank ones dropped)."""
    return [e.strip() for e in env.get(SAFE_DIRECTORIES_ENV, "").split(os.pathsep) if e.strip()]


def is_safe_directory(directory: str, env: Mapping[str, str]) -> bool:
    """Whether ``CUDAUP_SAFE_DIRECTORIES`` lists ``directory``, by its absolute path or its
    real path: ``*``, the directory itself, or ``DIR/*`` for DIR or anything below it."""
    entries = safe_directories(env)
    if not entries:
        return False
    names = {os.path.normpath(os.path.abspath(directory)), os.path.realpath(directory)}
    for entry in entries:
        if entry == "*":
            return True
        if not os.path.isabs(entry):
            continue  # relative to what? an exception must say exactly what it trusts
        if entry.endswith("/*"):
            base = os.path.normpath(entry[:-2])
            below = base.rstrip("/") + "/"
            if any(name == base or name.startswith(below) for name in names):
                return True
        elif os.path.normpath(entry) in names:
            return True
    return False


# -- the rule ---------------------------------------------------------------------------------
def trusted_uids() -> set[int]:
    """The invoking user (the effective uid, as file access uses) and root."""
    return {os.geteuid(), 0}


def who(uid: int) -> str:
    """``uid 65534 (nobody)``, or ``uid 1234`` when the user has no name."""
    try:
        import pwd  # noqa: PLC0415 - only a refusal names an owner

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _not_trusted_owner(path: str, info: os.stat_result) -> str | None:
    if info.st_uid in trusted_uids():
        return None
    return f"{path} is owned by {who(info.st_uid)}, not by you ({who(os.geteuid())}) or root"


def _writable_by_others(path: str, info: os.stat_result) -> str | None:
    if not info.st_mode & OTHERS_WRITE:
        return None
    whom = {stat.S_IWGRP: "its group", stat.S_IWOTH: "every user"}.get(
        info.st_mode & OTHERS_WRITE, "its group and every user"
    )
    return f"{path} is writable by {whom} (mode {stat.S_IMODE(info.st_mode):o})"


def file_problem(path: str, info: os.stat_result) -> str | None:
    """Why the file or directory ``info`` describes may not decide what runs, or ``None``:
    owned by someone other than the invoking user or root, or writable by others."""
    return _not_trusted_owner(path, info) or _writable_by_others(path, info)


def directory_problem(path: str, *, sticky: bool = True) -> str | None:
    """Why another user could replace what cudaup writes in the directory ``path`` (not
    following a link), or ``None``: it must be owned by the invoking user or root and
    writable by no one else (its group's write is allowed when the group is the user's
    private one), except (with ``sticky``) with the sticky bit (``/tmp``), where others
    may add entries but neither rename nor remove the user's.  Raises ``OSError`` when it
    cannot be examined."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a directory (a symbolic link?)"
    if (sticky and info.st_mode & stat.S_ISVTX) or _private_group_write(info):
        return _not_trusted_owner(path, info)
    return file_problem(path, info)


def _private_group_write(info: os.stat_result) -> bool:
    """Whether the only others who may write it are its group, the user's private one:
    Debian's and Ubuntu's users get umask 002, so every directory they make is 775,
    writable by their own group alone."""
    return info.st_mode & OTHERS_WRITE == stat.S_IWGRP and _group_is_yours(info.st_gid)


def ancestors_problem(path: str) -> str | None:
    """Why another user could put another directory in the place of ``path``, or ``None``:
    every directory and link above it must follow :func:`path_problem`'s rule, each
    directory's sticky bit and the user's private group counting as in
    :func:`directory_problem` (a directory under ``/tmp`` is fine; one under another
    user's home, or under a directory every user may write, is not)."""
    # Joined, not normalized: ``..`` after a link is the link target's parent, as the
    # kernel resolves it (:func:`_walk`), not the lexical one.
    absolute = (path if os.path.isabs(path) else os.path.join(os.getcwd(), path)).rstrip("/")
    parent = os.path.dirname(absolute)
    if not absolute or parent == absolute:
        return None
    try:
        return _walk(parent, sticky_end=True, private_group=True)
    except OSError as exc:  # a component vanished or may not be read: nothing to trust
        return f"{exc.filename or parent} cannot be examined ({exc.strerror})"


def directories_problem(checks: Iterable[tuple[str, bool]]) -> str | None:
    """The first :func:`directory_problem` among ``checks`` (each a directory and whether
    its sticky bit counts, the topmost first), skipping those not there yet (made later,
    and checked then), and :func:`ancestors_problem` of the first one there: who may
    write above it may replace it and all below."""
    above = False
    for path, sticky in checks:
        try:
            problem = directory_problem(path, sticky=sticky)
        except FileNotFoundError:
            continue
        if problem is None and not above:
            above, problem = True, ancestors_problem(path)
        if problem is not None:
            return problem
    return None


def _group_is_yours(gid: int) -> bool:
    """Whether ``gid`` is the invoking user's private group (the scheme behind Debian's
    and Ubuntu's umask 002): the user's own group, named after them, listing no other
    member."""
    try:
        import grp  # noqa: PLC0415 - only a group-writable directory asks
        import pwd  # noqa: PLC0415

        user = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == os.getegid() and group.gr_name == user and set(group.gr_mem) <= {user}


def path_problem(path: str) -> str | None:
    """Why ``path`` may not decide what runs, or ``None``: the rule of the module
    docstring for ``path`` and every directory and link on the way to it."""
    try:
        return _walk(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))
    except OSError as exc:  # a component vanished or may not be read: nothing to trust
        return f"{exc.filename or path} cannot be examined ({exc.strerror})"


def _walk(path: str, *, sticky_end: bool = False, private_group: bool = False) -> str | None:
    """:func:`path_problem` for an absolute path, component by component as the kernel
    resolves it (links followed from where they are, ``..`` from the real directory).
    ``sticky_end``: the sticky bit counts for ``path`` itself too; ``private_group``: a
    directory only the user's private group may write counts as the user's."""
    pending = [part for part in path.split("/") if part]
    current = "/"
    info = os.lstat(current)
    links = 0
    while True:
        problem = _not_trusted_owner(current, info)
        if problem is None and info.st_mode & OTHERS_WRITE:
            sticky = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
            if not (
                (sticky and (pending or sticky_end))
                or (private_group and _private_group_write(info))
            ):
                problem = _writable_by_others(current, info)
        if problem is not None:
            return problem
        if not pending:
            return None
        name = pending.pop(0)
        if name in {".", ".."}:
            # ``current`` is a real directory (links are resolved), so its parent is lexical.
            current = os.path.dirname(current) if name == ".." else current
            info = os.lstat(current)
            continue
        entry = os.path.join(current, name)
        info = os.lstat(entry)
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > _MAX_LINKS:
                return f"{path} goes through more than {_MAX_LINKS} symbolic links"
            problem = _not_trusted_owner(entry, info)  # a link's own mode means nothing
            if problem is not None:
                return problem
            target = os.readlink(entry)
            pending[:0] = [part for part in target.split("/") if part]
            current = "/" if target.startswith("/") else current
            info = os.lstat(current)
            continue
        current = entry


def toolkit_problem(toolkit: str, tool: str | None, env: Mapping[str, str]) -> str | None:
    """Why a toolkit named by path may not be used, or ``None``: the rule for the
    directory, its ``bin`` and (when it exists) ``bin/TOOL``, unless
    ``CUDAUP_SAFE_DIRECTORIES`` lists the toolkit."""
    bin_dir = os.path.join(toolkit, "bin")
    checked = [toolkit, bin_dir]
    if tool:
        checked.append(os.path.join(bin_dir, tool))
    for index, path in enumerate(checked):
        if index and not os.path.lexists(path):
            break  # a toolkit without it is refused for what it lacks, elsewhere
        problem = path_problem(path)
        if problem is not None:
            return None if is_safe_directory(toolkit, env) else problem
    return None


def read_pin_file(
    path: str, env: Mapping[str, str], limit: int = 1 << 16
) -> tuple[str, str | None]:
    """The text of the pin ``path`` and ``None``, or ``("", why)`` when the rule refuses
    it and ``CUDAUP_SAFE_DIRECTORIES`` does not list its directory.

    A pin is the invoking user's or root's, and so is its directory; a link to it is
    too; the file may be written by no one else.  A file that cannot be read is
    ``("", None)``: empty, which the caller reports as such.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        link = os.lstat(path)
        folder = os.stat(directory)
        # O_NONBLOCK: a FIFO planted under the name must not hang the shim.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "", None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "", f"{path} is not a regular file"
        problem = (
            _not_trusted_owner(path, link)
            or _not_trusted_owner(directory, folder)
            or file_problem(path, info)
        )
        if problem is not None and not is_safe_directory(directory, env):
            return "", problem
        return os.read(fd, limit).decode("utf-8", errors="replace"), None
    except OSError:
        return "", None
    finally:
        os.close(fd)
