"""The commands about installed toolkits: ``install``, ``uninstall``, ``list``.

After an install, as rustup and uv do: the first toolkit installed into an empty
store becomes cudaup's default (never ``/usr/local/cuda``), and one line says the
next step.  ``install`` with no version installs what the nearest
``.cuda-version`` asks for.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from cudaup.cli.common import (
    add_components,
    add_connections,
    human_size,
    platform_of,
    settings_of,
    warn,
)
from cudaup.cli.output import emit_json
from cudaup.core.components import PROFILES, split_components
from cudaup.errors import ArtifactNotFoundError, UsageError
from cudaup.install.store import RECORD, InstalledToolkit, Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.switch import shim
from cudaup.switch.shim_files import foreign_programs, refresh_shims, shims_on_path

if TYPE_CHECKING:
    from cudaup.install.installer import InstallResult

# Imported where used, not here: an install imports only what installing needs (lock
# files only with --lock; pins only without a version; what selects the active toolkit
# only when the shims are on PATH; the machine's other toolkits, the system link and the
# listing only for uninstall and list), which the start-up test in tests/install pins;
# `list` and `uninstall` import no download engine (tests/cli/test_startup.py).


def add_install(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "version",
        nargs="?",
        help="13.0.1, 13.0, cu130, latest (default: what the nearest .cuda-version asks for)",
    )
    parser.add_argument(
        "--lock", metavar="FILE", help="install exactly what a cuda.lock.toml names"
    )
    parser.add_argument(
        "--channel",
        choices=("auto", "installer", "redist", "pypi"),
        default="auto",
        help="where the files come from (default: auto, redist when NVIDIA answers, else pypi)",
    )
    add_components(parser)
    parser.add_argument("--all", action="store_true", help="the whole toolkit")
    parser.add_argument(
        "--profile",
        choices=tuple(PROFILES),
        help="minimal: nvcc, cudart; default: those, nvrtc and the math libraries; "
        "complete: --all (default: CUDAUP_PROFILE, else default)",
    )
    parser.add_argument("--prefix", help="install there instead of the cudaup store")
    parser.add_argument("--platform", help="a Linux platform (default: this host)")
    parser.add_argument("--driver", help="check against this driver instead of the detected one")
    parser.add_argument(
        "--force",
        action="store_true",
        help="install even if the driver cannot run it, or over another release at --prefix",
    )
    parser.add_argument(
        "--allow-unverified", action="store_true", help="install files with no published checksum"
    )
    parser.add_argument(
        "--link-mode",
        choices=("hardlink", "copy"),
        default="hardlink",
        help="hardlink (default): share the unpacked cache's files; copy: files of its own",
    )
    parser.add_argument(
        "--verify", action="store_true", help="hash every cached file before using it"
    )
    add_connections(parser)
    parser.set_defaults(handler=cmd_install)


def add_uninstall(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "version",
        metavar="VERSION|PATH",
        help="an installed release (12.8.1, or a request like 12.8), or a --prefix directory",
    )
    parser.set_defaults(handler=cmd_uninstall)


def add_list(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=cmd_list)


def cmd_install(args: argparse.Namespace) -> int:
    from cudaup.cli.progress import display_for  # noqa: PLC0415 - see the imports
    from cudaup.install.installer import InstallOptions, install  # noqa: PLC0415

    store = Store.from_env()

    options = InstallOptions(
        platform=platform_of(args),
        channel=args.channel,
        components=split_components(args.components),
        everything=args.all,
        prefix=Path(args.prefix).resolve() if args.prefix else None,
        allow_unverified=args.allow_unverified,
        force=args.force,
        driver=args.driver,
        connections=args.connections,
        link_mode=args.link_mode,
        verify=args.verify,
        profile=args.profile,
    )
    pin: Path | None = None
    version = args.version
    if not args.lock and not version:
        from cudaup.switch.pins import pinned_release  # noqa: PLC0415 - see the imports

        pin, version, skipped = pinned_release(Path.cwd())
        for warning in skipped:
            warn(warning)
    empty = store.is_empty()
    with display_for(quiet=args.quiet or args.json) as display:
        if args.lock:
            if args.version or args.components or args.all or args.profile:
                raise UsageError(
                    "--lock decides the release and its files; give no VERSION, --components, "
                    "--all or --profile"
                )
            from cudaup.fleet.apply import install_locked  # noqa: PLC0415 - see the imports

            result = install_locked(
                Path(args.lock),
                options,
                settings=settings_of(args),
                store=store,
                mirror=args.mirror,
                progress=display,
            )
        else:
            result = install(
                version,
                options,
                settings=settings_of(args),
                store=store,
                progress=display,
            )
    installed = store.at(result.path)
    default = store.adopt_first(installed, empty)
    refresh_shims(store)  # the new toolkit's tools get shims
    # Programs in its bin/ that are not NVIDIA's tools (an archive's ls or sudo) get none.
    skipped = foreign_programs(result.path)
    step = next_step(store, result, installed)
    if args.json:
        emit_json(
            {
                **result.to_json(),
                "pin": str(pin) if pin else None,
                "default_set": default,
                "shims_skipped": skipped,
                "next": step,
            }
        )
        return 0
    if pin is not None:
        print(f"{pin} asks for {version}")
    what = "already installed" if result.skipped else "installed"
    print(
        f"CUDA {result.version} {what} at {result.path} ({result.channel}: {', '.join(result.components)})"
    )
    for note in result.notes:
        print(f"note: {note}")
    if skipped:
        print(
            f"note: no shims for {', '.join(skipped)} in {result.path / 'bin'}: "
            "they are not tools NVIDIA's toolkits ship, so they never shadow a system command"
        )
    if default is not None:
        print(
            f"default: {default} (the first toolkit cudaup installed; `cudaup default` changes it)"
        )
    print(f"next: {step}")
    return 0


def next_step(store: Store, result: InstallResult, toolkit: InstalledToolkit | None) -> str:
    """The one thing to do after an install for ``nvcc`` to run this toolkit, in words."""
    if toolkit is not None and toolkit.foreign is not None:
        return (
            f"this {toolkit.foreign} toolkit cannot run here: cudaup lists it and can "
            "uninstall it, but never selects it; copy or mount it where it runs"
        )
    if not shims_on_path(store):
        return (
            f'put {store.bin_dir} on PATH (export PATH="{store.bin_dir}:$PATH" in your shell\'s '
            "profile) so that nvcc and the other tools run the active toolkit"
        )
    from cudaup.switch.selection import select  # noqa: PLC0415 - see the imports

    active = select(store)
    name = str(result.path) if toolkit is not None and toolkit.external else result.version
    if active.path is not None and os.path.realpath(active.path) == os.path.realpath(result.path):
        return f"nothing: CUDA {result.version} is the active toolkit here ({active.reason})"
    now = f"{active.describe()} is active here" if active.path else "no toolkit is active here"
    return (
        f"`cudaup default {name}` to use it everywhere, or `cudaup pin {name}` for this "
        f"directory ({now})"
    )


def _to_remove(store: Store, value: str) -> InstalledToolkit | None:
    """The toolkit ``uninstall VALUE`` names: a directory, a release, or a request; a
    release installed at several places must be named by its path."""
    if shim.is_path_request(value):
        return store.at(Path(value).expanduser())
    toolkit = store.find(value)
    if toolkit is None:
        toolkit = next((t for t in store.installed() if t.version == value), None)  # foreign
    if toolkit is None:
        return None
    same = [t for t in store.installed() if t.version == toolkit.version]
    if len(same) > 1:
        places = ", ".join(str(t.path) for t in same)
        raise UsageError(
            f"CUDA {toolkit.version} is installed at {len(same)} places ({places}); "
            "name the one to remove by its path"
        )
    return toolkit


def cmd_uninstall(args: argparse.Namespace) -> int:
    # See the imports: an install needs none of these.
    from cudaup.install.installer import uninstall  # noqa: PLC0415 - list needs none of it
    from cudaup.machine.toolkits import Lookup, find_toolkits  # noqa: PLC0415
    from cudaup.switch import system_link  # noqa: PLC0415
    from cudaup.switch.selection import resolve_default  # noqa: PLC0415
    from cudaup.util.cachedir import inspect  # noqa: PLC0415

    store = Store.from_env()
    toolkit = _to_remove(store, args.version)
    if toolkit is None:
        others = [
            t
            for t in find_toolkits(
                Lookup(root=SystemRoot.from_env(), env=dict(os.environ), store=store.toolkits_dir)
            )
            if args.version in {*t.identity.candidates, t.identity.line, t.path}
        ]
        if others:
            other = others[0]
            hint = (
                f"remove it with {other.path}/bin/cuda-uninstaller"
                if other.owner == "runfile installer"
                else "remove it with the tool that installed it"
            )
            owner = (
                f"is owned by {other.owner}"
                if other.owner
                else f"was not installed by cudaup (found via {', '.join(other.found_via)})"
            )
            raise UsageError(f"CUDA {args.version} at {other.path} {owner}; {hint}")
        installed = ", ".join(_shown(t) for t in store.installed()) or "none"
        raise ArtifactNotFoundError(
            f"cudaup has no CUDA {args.version} installed (installed: {installed})"
        )
    # The system link goes back to what it was before `default --system` made it lead
    # here (refused, with nothing removed, where that needs root).
    link_changes, link_note = system_link.release_link_to(store, toolkit.path)
    settings = settings_of(args)
    uninstall(store, toolkit, settings.cache_root)
    unset = None
    chosen = resolve_default(store)
    if chosen is not None and chosen.path is None:
        unset = store.default()  # it named what was removed, and names nothing now
        store.set_default(None)

    refresh_shims(store)

    notes = [link_note] if link_note else []
    if link_changes:
        after = link_changes[-1].after
        notes.insert(
            0,
            f"{system_link.LINK} led to it (`cudaup default --system`): undone, "
            f"{system_link.LINK} {after.words()} again",
        )
    # Its unpacked archives stay in the cache (hard links kept them shared until now).
    reclaimable = inspect(settings.cache_root).reclaimable
    if args.json:
        emit_json(
            {
                "removed": toolkit.version,
                "path": str(toolkit.path),
                "default_unset": unset,
                "cache_reclaimable_bytes": reclaimable,
                "system_link": [change.to_json() for change in link_changes],
                "notes": notes,
            }
        )
    else:
        print(f"removed CUDA {toolkit.version} from {toolkit.path}")
        if unset is not None:
            print(f"note: the default ({unset}) named it; there is no default now")
        for note in notes:
            print(f"note: {note}")
        if reclaimable:
            print(
                f"cudaup's cache keeps {human_size(reclaimable)} that no installed toolkit "
                "uses, for a quick reinstall; `cudaup cache prune` frees it"
            )
    return 0


def _shown(toolkit: InstalledToolkit) -> str:
    """``12.8.1``, or ``12.8.1 at /opt/cuda`` for a prefix install."""
    return f"{toolkit.version} at {toolkit.path}" if toolkit.external else toolkit.version


def cmd_list(args: argparse.Namespace) -> int:
    from cudaup.switch.overview import list_toolkits  # noqa: PLC0415 - see the imports

    listing = list_toolkits(Store.from_env(), SystemRoot.from_env(), os.environ)
    if args.json:
        emit_json(listing.to_json())
        return 0
    if not listing.installed:
        print("installed by cudaup: none")
    for toolkit in listing.installed:
        # In words, as `show` marks them: a `*` meant the default here and "active" there.
        mark = " (default)" if listing.is_default(toolkit) else ""
        foreign = f"; for {toolkit.foreign}, not run here" if toolkit.foreign else ""
        if toolkit.record is None:  # damaged, or no regular file: nothing it says is known
            what = f"its {RECORD} cannot be read"
        else:
            what = f"{toolkit.record.get('channel', '?')}: {', '.join(toolkit.components)}"
        print(f"  {toolkit.version:<9} {toolkit.path}  ({what}{foreign}){mark}")
    for other in listing.others:
        owner = f" · {other.owner}" if other.owner else ""
        via = ", ".join(other.found_via)
        print(f"  {other.identity.describe():<9} {other.path}  (found via {via}{owner})")
    return 0
