"""``upgrade`` and ``rollback`` as transactions: the environment is always one whole tree.

An upgrade, under the environment's lock: finish what a killed one left, plan, ask,
lock the plan's files (uv's ``pylock.toml``: URLs and hashes), snapshot the
environment (a hard-linked clone, with its fingerprint), clone it again as the work
tree (uv locks the files meanwhile), apply the plan to the work tree with uv, verify the work tree in its own
interpreter, install the line's toolkit side by side, check that the snapshot is
still byte for byte what was kept, and only then swap the work tree in (one
``renameat2`` exchange; journaled).  Until that swap the environment has not been
touched, so any failure, Ctrl-C or kill leaves it as it was, and the work tree and
the snapshot of a failure that was handled are removed.  A rollback swaps the newest
snapshot's tree back in the same way; it needs no network and no working interpreter.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaup.config import Settings
from cudaup.core.libraries import LIBRARIES
from cudaup.download import Progress
from cudaup.errors import (
    ConflictError,
    CudaupError,
    IntegrityError,
    LockedError,
    VerificationFailedError,
)
from cudaup.install.installer import InstallOptions, InstallResult, install
from cudaup.install.store import Store
from cudaup.plan.export import export_pylock
from cudaup.plan.lines import line_text
from cudaup.plan.uv import pages_identity, write_local_index
from cudaup.upgrade.apply import apply_pins, pinned_requirements
from cudaup.upgrade.binding import read_binding, write_binding
from cudaup.upgrade.clone import clone_tree
from cudaup.upgrade.environment import locate
from cudaup.upgrade.families import load_families
from cudaup.upgrade.planning import UpgradePlan, UpgradeRequest, plan_upgrade
from cudaup.upgrade.snapshots import RESTORABLE, EnvironmentSnapshot, SnapshotStore, place_of
from cudaup.upgrade.verify import Check, Verifier, problems
from cudaup.util.cachedir import CacheLayout
from cudaup.util.faults import Place, cache_place, explained, remove_tree
from cudaup.util.locks import locked

Echo = Callable[[str], None]
#: How long an upgrade waits for another one of the same environment.
LOCK_WAIT = 3600.0
#: The temporary directories of upgrades (``$TMPDIR/cudaup-upgrade-*``).
SCRATCH_PREFIX = "cudaup-upgrade-"


def _quiet(_message: str) -> None:
    pass


@dataclass
class UpgradeOutcome:
    plan: UpgradePlan
    snapshot: str | None
    checks: list[Check] = field(default_factory=list)
    toolkit: InstallResult | None = None
    notes: list[str] = field(default_factory=list)
    #: Nothing to change: the environment is on the line, the toolkit installed.
    nothing: bool = False
    #: The user answered no.
    declined: bool = False
    #: The toolkit the environment's cudaup-toolkit.pth names (CUDA_HOME), if any.
    binding: Path | None = None
    #: The ``.cuda-version`` that ``upgrade --pin`` wrote afterwards, if any.
    pin: Path | None = None

    @property
    def pinnable(self) -> bool:
        """Whether ``--pin`` writes the release to ``.cuda-version``: the environment is
        on the new line now (moved, or already there), not declined nor rolled back."""
        return self.snapshot is not None or self.nothing

    def to_json(self) -> dict[str, Any]:
        return {
            **self.plan.to_json(),
            "snapshot": self.snapshot,
            "verification": [c.to_json() for c in self.checks],
            "toolkit": self.toolkit.to_json() if self.toolkit else None,
            "applied": self.snapshot is not None,
            "binding": str(self.binding) if self.binding else None,
            "notes": [*self.plan.notes, *self.notes],
            "dry_run": False,
            "pin": str(self.pin) if self.pin else None,
        }


@dataclass
class RollbackOutcome:
    environment: Path
    snapshot: dict[str, Any]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "environment": str(self.environment),
            "restored": self.snapshot,
            "notes": self.notes,
        }


class Upgrader:
    def __init__(
        self,
        settings: Settings,
        *,
        echo: Echo = _quiet,
        lock_wait: float = LOCK_WAIT,
        verifier: Verifier | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.settings, self.echo, self.lock_wait = settings, echo, lock_wait
        self.verifier, self.progress = verifier, progress

    # -- upgrade ---------------------------------------------------------------------------
    def upgrade(
        self, request: UpgradeRequest, confirm: Callable[[UpgradePlan], bool], **plan_options: Any
    ) -> UpgradeOutcome:
        """Plan under the lock, ask ``confirm``, and apply (see the module docstring)."""
        root, _ = locate(request.python)
        store = SnapshotStore(root)
        with explained(f"cannot prepare the upgrade of {root}", store.directory, [place_of(root)]):
            store.ensure()
        with store.locked(self.lock_wait, self.echo):
            notes = store.recover(self.echo) + sweep_scratch(self.echo)
            plan = plan_upgrade(self.settings, request, **plan_options)
            if not plan.changes and (request.components is None or plan.toolkit_installed):
                return UpgradeOutcome(plan, None, notes=notes, nothing=True)
            if not confirm(plan):
                return UpgradeOutcome(plan, None, notes=notes, declined=True)
            if not plan.changes:  # only the toolkit is missing: the environment stays as it is
                return UpgradeOutcome(
                    plan,
                    None,
                    toolkit=self._toolkit(plan, request, notes),
                    notes=notes,
                    nothing=True,
                )
            return self._apply(plan, request, store, notes)

    def _apply(
        self, plan: UpgradePlan, request: UpgradeRequest, store: SnapshotStore, notes: list[str]
    ) -> UpgradeOutcome:
        environment = plan.environment
        root = store.environment
        before = problems(environment.interpreter)
        places = [place_of(root), cache_place(self.settings.cache_root)]
        with held_scratch() as scratch:
            return self._apply_in(plan, request, store, notes, before, places, scratch)

    def _apply_in(
        self,
        plan: UpgradePlan,
        request: UpgradeRequest,
        store: SnapshotStore,
        notes: list[str],
        before: dict[str, str],
        places: list[Place],
        scratch: Path,
    ) -> UpgradeOutcome:
        environment = plan.environment
        root = store.environment
        snapshot_id = store.new_id()
        work = store.work_path(snapshot_id)
        snapshot: EnvironmentSnapshot | None = None
        committed = False
        try:
            # uv locks the plan's files while the trees are cloned: a subprocess waiting on
            # the network or uv's cache beside hard links (neither needs the other), seconds
            # of a torch environment's upgrade.  Leaving the block waits for uv either way.
            with ThreadPoolExecutor(max_workers=1) as side:
                self.echo("locking the plan's files (uv)")
                locking = side.submit(
                    export_pylock, plan.result, scratch / "pylock.toml", self.settings
                )
                with explained(f"cannot snapshot {root}", store.directory, places):
                    self.echo(f"snapshot {snapshot_id}: keeping {root} as it is")
                    store.path_of(snapshot_id).mkdir()
                    fingerprint = clone_tree(root, store.path_of(snapshot_id) / "tree")
                    record = self._record(snapshot_id, plan, fingerprint.files, fingerprint.bytes)
                    snapshot = store.create(record, fingerprint)
                    clone_tree(root, work)
                lock = locking.result()
            self.echo(f"applying the plan to a copy of {root} (uv)")
            pins = scratch / "requirements.txt"
            pins.write_text(pinned_requirements(lock), encoding="utf-8")
            shutil.copyfile(lock, store.path_of(snapshot_id) / "pylock.toml")  # what it installed
            indexes = list(plan.result.job.indexes)
            if plan.result.pages:
                local = self._line_index(plan, scratch)
                indexes = [local, *(i for i in indexes if not i.startswith("file:"))]
            default = plan.result.job.default_index
            cache = self._uv_cache(store)
            timeout = self.settings.timeout
            apply_pins(
                environment, work, pins, indexes, default, plan.removals, cache, timeout=timeout
            )
            # The toolkit first: the check may load a module against its stub driver library,
            # and the work tree is bound to it (cudaup-toolkit.pth) before it is checked.
            toolkit = self._toolkit(plan, request, notes)
            bound = self._bind(plan, work, toolkit, notes)
            self.echo("verifying the upgraded environment in its own interpreter")
            verifier = self.verifier or Verifier(plan.driver, gpus=request.gpus)
            verifier.scratch = scratch
            checks = verifier.verify(
                work / environment.interpreter.relative_to(environment.root),
                plan.line,
                plan.changes,
                {p.name: str(p.version) for p in plan.result.closure},
                before,
                load_families(self.settings.home_root / "families.toml"),
                environment,
            )
            changed = fingerprint.differences(store.path_of(snapshot_id) / "tree")
            if changed:
                raise IntegrityError(
                    f"the snapshot of {root} changed while the upgrade was applied "
                    f"({'; '.join(changed)}): a file it shares with the environment was written "
                    "in place, the environment's copy with it; the upgrade stopped before its swap"
                )
            with explained(f"cannot put the upgraded {root} in place", root.parent, places):
                old = store.swap_in(snapshot, work, "applying")
            committed = True
            snapshot.record.update(
                status="applied",
                finished=_now(),
                verification=[c.to_json() for c in checks],
                toolkit=toolkit.to_json() if toolkit else None,
            )
            snapshot.record.pop("journal", None)
            try:
                store.write(snapshot)
                remove_tree(old)
            except OSError as exc:  # the upgrade is in place; its journal still says so
                notes.append(
                    f"the upgrade is in place, but its record could not be finished ({exc}); "
                    "the next cudaup command on this environment finishes it"
                )
            return UpgradeOutcome(plan, snapshot.id, checks, toolkit, notes, binding=bound)
        except BaseException as exc:
            if not committed and snapshot is not None and snapshot.journal:
                # The swap itself failed: finished, or undone (the environment put back).
                committed = store.swapped(snapshot)
            if committed:
                raise
            # The environment was never touched: what the upgrade made goes.
            for made in (work, store.path_of(snapshot_id)):
                if made.exists():
                    remove_tree(made)
            if isinstance(exc, VerificationFailedError):
                raise VerificationFailedError(
                    f"the upgraded environment failed '{exc.step}'"
                    + (f" for {exc.package}" if exc.package else "")
                    + f": {exc}; it was rolled back: {root} is as it was",
                    exc.step,
                    exc.package,
                ) from None
            if isinstance(exc, CudaupError):
                self.echo(f"the upgrade stopped; nothing was changed: {root} is as it was")
            raise

    def _record(self, snapshot_id: str, plan: UpgradePlan, files: int, size: int) -> dict[str, Any]:
        return {
            "schema": 1,
            "id": snapshot_id,
            "environment": str(plan.environment.root),
            "interpreter": str(plan.environment.interpreter),
            "created": _now(),
            "status": "taken",
            "line_before": plan.line_before,
            "line_after": line_text(plan.line),
            "release": plan.release,
            "changes": [c.to_json() for c in plan.changes],
            "files": files,
            "bytes": size,
        }

    def _line_index(self, plan: UpgradePlan, scratch: Path) -> str:
        """The plan's per-line pages as a local index at a path fixed by their content: uv
        keys the wheels it caches by index, so a second upgrade reuses the first's."""
        pages = plan.result.pages
        folder = CacheLayout(self.settings.cache_root).plan_dir(
            "line-indexes", pages_identity(pages)[:32]
        )
        if not (folder / "complete").is_file():
            made = scratch / "line"
            write_local_index(made, pages, "the plan's per-line indexes")
            (made / "complete").write_text("", encoding="utf-8")
            folder.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):  # another upgrade put the same pages there
                made.rename(folder)
            if not (folder / "complete").is_file():
                return made.as_uri()
        return folder.as_uri()

    def _uv_cache(self, store: SnapshotStore) -> Path:
        """uv's cache for the install: cudaup's, where it is on the environment's filesystem
        (so uv hard-links from it); else one beside the environment's snapshots."""
        cache = CacheLayout(self.settings.cache_root).plan_dir("uv")
        try:
            cache.mkdir(parents=True, exist_ok=True)
            if cache.stat().st_dev == store.directory.stat().st_dev:
                return cache
        except OSError:
            pass
        return store.directory / "uv-cache"

    def _bind(
        self, plan: UpgradePlan, work: Path, toolkit: InstallResult | None, notes: list[str]
    ) -> Path | None:
        """Bind the work tree to the toolkit of the new line (the one just installed, else
        the newest of the line in the store); without one, an old binding goes."""
        environment = plan.environment
        try:
            site = work / environment.purelib.relative_to(environment.root)
        except ValueError:
            notes.append(f"{environment.purelib} is outside {environment.root}: no toolkit bound")
            return None
        target = toolkit.path if toolkit is not None else None
        if target is None and (found := Store.from_env().find(line_text(plan.line))) is not None:
            target = found.path
        old = read_binding(site)
        write_binding(site, target)
        if target is None and old is not None:
            notes.append(
                f"{environment.root} was bound to {old}, not a CUDA {line_text(plan.line)} "
                f"toolkit: no longer (`cudaup install {line_text(plan.line)}` and upgrade again "
                "to bind one)"
            )
        return target

    def _toolkit(
        self, plan: UpgradePlan, request: UpgradeRequest, notes: list[str]
    ) -> InstallResult | None:
        if request.components is None:
            return None
        store = Store.from_env()
        components = (*request.components, *self._libraries_of_old(plan, store, notes))
        self.echo(f"installing CUDA {plan.release} ({','.join(components)}) side by side")
        options = InstallOptions(
            platform=request.platform,
            channel=request.channel,
            components=components,
            force=request.force,
            driver=request.driver,
        )
        empty = store.is_empty()
        result = install(
            plan.release, options, settings=self.settings, store=store, progress=self.progress
        )
        if (default := store.adopt_first(store.at(result.path), empty)) is not None:
            notes.append(f"default: {default} (the first toolkit cudaup installed)")
        return result

    def _libraries_of_old(self, plan: UpgradePlan, store: Store, notes: list[str]) -> list[str]:
        """The libraries (cuDNN, NCCL, …) of the toolkit the environment was bound to: they
        move with the line, each as the new major's build (cuDNN's cuda12 → cuda13)."""
        bound = read_binding(plan.environment.purelib)
        old = store.at(bound) if bound is not None else None
        libraries = sorted(((old.record or {}).get("libraries") or {}) if old else {})
        names = [name for name in libraries if name in LIBRARIES]
        if names:
            notes.append(
                f"{', '.join(names)} of {bound} move with the line: the CUDA "
                f"{line_text(plan.line).split('.')[0]} builds are installed beside the toolkit"
            )
        return names

    # -- rollback -------------------------------------------------------------------------
    def rollback(self, python: str, snapshot_id: str | None = None) -> RollbackOutcome:
        """Swap the newest snapshot (or ``snapshot_id``) back in; it is used up."""
        root, _ = locate(python)
        store = SnapshotStore(root)
        if not store.directory.is_dir():
            raise ConflictError(f"{root} has no snapshot: nothing to roll back")
        with store.locked(self.lock_wait, self.echo):
            notes = store.recover(self.echo) + sweep_scratch(self.echo)
            candidates = [s for s in store.snapshots() if s.status in RESTORABLE]
            if snapshot_id is not None:
                chosen = next((s for s in candidates if s.id == snapshot_id), None)
                if chosen is None:
                    known = ", ".join(s.id for s in candidates) or "none"
                    raise ConflictError(
                        f"{root} has no snapshot {snapshot_id} to restore (snapshots: {known})"
                    )
            elif not candidates:
                raise ConflictError(f"{root} has no snapshot: nothing to roll back")
            else:
                chosen = candidates[-1]
            if chosen.tree.is_symlink() or not chosen.tree.is_dir():
                raise IntegrityError(
                    f"snapshot {chosen.id} of {root} holds no tree ({chosen.tree} is not a "
                    "directory): it was not restored"
                )
            changed = chosen.fingerprint().differences(chosen.tree)
            if changed:
                raise IntegrityError(
                    f"snapshot {chosen.id} of {root} is no longer what was kept ({'; '.join(changed)}): "
                    "a file it shares with the environment was changed in place since; it was not restored"
                )
            summary = chosen.to_json()
            with explained(f"cannot restore {root}", root.parent, [place_of(root)]):
                chosen.record["before_restore"] = chosen.status
                try:
                    old = store.swap_in(chosen, chosen.tree, "restoring")
                except BaseException:
                    if not store.swapped(chosen):  # undone: the environment is as it was
                        chosen.record["status"] = chosen.record.pop("before_restore")
                        chosen.record.pop("journal", None)
                        store.write(chosen)
                    raise
                if old.exists():
                    remove_tree(old)
                store.remove(chosen)
            return RollbackOutcome(root, summary, notes)

    # -- the list ---------------------------------------------------------------------------
    def snapshots(
        self, python: str, *, removed: list[EnvironmentSnapshot] | None = None
    ) -> SnapshotList:
        """The snapshots, once what a dead run left is finished or removed (not while a live
        one works on the environment: then its entries are listed as they are);
        ``removed``: what :meth:`prune` just removed, named with them."""
        root, _ = locate(python)
        store = SnapshotStore(root)
        notes, busy = store.recover_if_idle(self.echo)
        notes += sweep_scratch(self.echo)
        if busy:
            notes.append(f"another cudaup is working on {root} now: its entry is in progress")
        return SnapshotList(store, store.snapshots(), notes, busy, list(removed or []))

    def prune(self, python: str, keep: int) -> tuple[SnapshotStore, list[EnvironmentSnapshot]]:
        root, _ = locate(python)
        store = SnapshotStore(root)
        if not store.directory.is_dir():
            return store, []
        with store.locked(self.lock_wait, self.echo):
            store.recover(self.echo)
            sweep_scratch(self.echo)
            with explained(f"cannot remove snapshots of {root}", store.directory, [place_of(root)]):
                return store, store.prune(keep)


@dataclass
class SnapshotList:
    """``cudaup snapshots``'s answer: an environment's snapshots, oldest first."""

    store: SnapshotStore
    snapshots: list[EnvironmentSnapshot]
    notes: list[str]
    #: A live cudaup holds the environment's lock: its snapshot is in progress.
    busy: bool
    #: what ``--prune`` removed before the listing
    removed: list[EnvironmentSnapshot] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        """Each snapshot's record, with the disk it holds and frees, and whether the
        run that holds the environment's lock is at work on it."""
        rows = []
        for snapshot in self.snapshots:
            usage = self.store.usage(snapshot)
            in_progress = self.busy and snapshot.status in {"taken", "applying", "restoring"}
            rows.append(
                {
                    **snapshot.to_json(),
                    "holds": usage.disk,
                    "frees": usage.frees,
                    "in_progress": in_progress,
                }
            )
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "environment": str(self.store.environment),
            "store": str(self.store.directory),
            "snapshots": self.rows(),
            "removed": [s.id for s in self.removed],
            "notes": self.notes,
        }


@contextlib.contextmanager
def held_scratch() -> Iterator[Path]:
    """A private temporary directory for one upgrade, removed at its end; its ``lock``
    is held all along, so :func:`sweep_scratch` tells a live run's from a dead one's."""
    made = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    place = Place(made.parent, "set TMPDIR to a directory this user may write")
    with locked(made / "lock", busy=f"{made} is in use", wait=0.0, place=place, mode=0o600):
        try:
            yield made
        finally:
            with contextlib.suppress(OSError):
                remove_tree(made)


def sweep_scratch(echo: Echo = _quiet) -> list[str]:
    """Remove the temporary directories of upgrades that died (this user's, whose lock no
    live process holds); what was removed, in words."""
    notes = []
    base = Path(tempfile.gettempdir())
    for entry in sorted(base.glob(f"{SCRATCH_PREFIX}*")):
        try:
            status = entry.lstat()
            if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():
                continue
            if not (entry / "lock").is_file():
                continue  # not one cudaup made, or made a moment ago: not ours to judge
            place = Place(entry, "")
            with locked(entry / "lock", busy="", wait=0.0, place=place, mode=0o600):
                remove_tree(entry)
        except (LockedError, CudaupError, OSError):
            continue  # a live upgrade's, or one this user cannot judge
        notes.append(f"removed {entry}, left by an upgrade that was killed")
    for note in notes:
        echo(note)
    return notes


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
