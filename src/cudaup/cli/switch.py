"""The switching commands: ``default``, ``pin``, ``env``, ``run``, ``which``, ``show``, ``undo``.

Each handler reads its flags, calls :mod:`cudaup.switch` (which holds the rules and
the ``--json`` documents), and words the answer; it returns an exit code.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from cudaup.cli.common import settings_of, warn
from cudaup.cli.output import emit_json
from cudaup.errors import CommandNotRunError, UsageError
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.switch import (
    environment,
    launch,
    overview,
    pins,
    pyenv,
    selection,
    shim,
    shim_files,
    system_link,
)

log = logging.getLogger("cudaup.switch")
_CHOOSE = (
    "a version request (13.0, 12.8.1, cu128: the newest installed match) or a toolkit directory"
)


def add_default(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("value", nargs="?", metavar="VERSION|PATH", help=_CHOOSE)
    parser.add_argument(
        "--system",
        action="store_true",
        help="point /usr/local/cuda at it instead (root; `cudaup undo` restores)",
    )
    parser.add_argument("--unset", action="store_true", help="forget the default")
    parser.set_defaults(handler=cmd_default)


def add_pin(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("value", nargs="?", metavar="VERSION|PATH", help=_CHOOSE)
    parser.add_argument("--unset", action="store_true", help="remove .cuda-version from here")
    parser.set_defaults(handler=cmd_pin)


def _add_python(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the toolkit of this environment's CUDA line (its torch's torch/version.py, or "
        "its cupy-cudaNNx), instead of a VERSION",
    )
    parser.add_argument(
        "--install",
        action="store_true",
        help="with --python: install that toolkit when none of its line is installed",
    )


def add_env(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version", nargs="?", metavar="VERSION|PATH", help=_CHOOSE)
    _add_python(parser)
    parser.add_argument(
        "--shell",
        choices=environment.ENV_FORMATS,
        help="syntax (default: from $SHELL); github: append to $GITHUB_ENV and $GITHUB_PATH; "
        "dockerfile: ENV lines",
    )
    parser.add_argument(
        "--output",
        action="store_true",
        help="with --shell github: cuda-version and cuda-home to $GITHUB_OUTPUT too",
    )
    parser.set_defaults(handler=cmd_env)


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version", nargs="?", metavar="VERSION|PATH", help=_CHOOSE)
    _add_python(parser)
    parser.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...", help="the command to run"
    )
    parser.set_defaults(handler=cmd_run)


def add_which(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tool", help="nvcc, ptxas, cuobjdump, …")
    parser.set_defaults(handler=cmd_which)


def add_show(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=cmd_show)


def add_undo(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(handler=cmd_undo)


def _select(store: Store, **given: Any) -> selection.Active:
    """:func:`selection.select`, saying on stderr which pins it skipped and why."""
    active = selection.select(store, **given)
    for warning in active.warnings:
        warn(warning)
    return active


def _why(active: selection.Active) -> str:
    """``from /work/.cuda-version (asks for 12.8)``; a path request is not repeated."""

    if active.path is None or not active.request or shim.is_path_request(active.request):
        return active.reason
    return f"{active.reason} ({active.request})"


def _answer(value: str, path: Path | None, version: str | None) -> str:
    """``13.0 → CUDA 13.0.2 (/store/toolkits/13.0.2)``, or just the path."""
    if version:
        return f"{value} → CUDA {version} ({path})"
    return value if value == str(path) else f"{value} → {path}"


# -- default -------------------------------------------------------------------------------
def cmd_default(args: argparse.Namespace) -> int:

    store = Store.from_env()
    root = SystemRoot.from_env()
    if args.system:
        if args.unset:
            raise UsageError("--system and --unset do not go together; `cudaup undo` restores")
        if args.value is None:
            return _print_system_link(args, root)
        target, version = system_link.system_target(store, args.value, root=root)
        change = system_link.set_system_link(store, target, version=version, root=root)
        if args.json:
            emit_json(change.to_json())
            return 0
        via = " through update-alternatives" if change.method == "update-alternatives" else ""
        print(f"{system_link.LINK} {change.after.words()}{via}")
        print(f"  was {change.before.words()}; `cudaup undo` puts it back")
        return 0
    if args.unset:
        if args.value is not None:
            raise UsageError("give a value or --unset, not both")
        state = overview.unset_default(store)
        if args.json:
            emit_json(state.to_json())
        else:
            print("no default toolkit now")
        return 0
    if args.value is None:
        return _print_default(args, store)
    recorded = overview.set_default(store, args.value, root=root)
    for warning in recorded.active.warnings:
        warn(warning)
    if args.json:
        emit_json(recorded.to_json())
        return 0
    choice = recorded.choice
    print(f"default: {_answer(choice.value, choice.path, choice.version)}")
    for note in recorded.notes:
        print(f"note: {note}")
    return 0


def _print_default(args: argparse.Namespace, store: Store) -> int:

    state = overview.read_default(store)
    value, resolved = state.value, state.resolved
    if args.json:
        emit_json(state.to_json())
        return 0
    if value is None or resolved is None:
        print("no default toolkit; set one with `cudaup default VERSION`")
    elif resolved.path is None:
        print(f"default: {value} → none: {resolved.problem}")
    else:
        print(f"default: {_answer(value, resolved.path, resolved.version)}")
    return 0


def _print_system_link(args: argparse.Namespace, root: SystemRoot) -> int:

    state = system_link.read_link_state(root)
    if args.json:
        emit_json(state.report_json())
    else:
        print(f"{system_link.LINK} {state.words()}")
    return 0


# -- pin ---------------------------------------------------------------------------------------
def cmd_pin(args: argparse.Namespace) -> int:

    store = Store.from_env()
    here = Path.cwd()
    if args.unset:
        if args.value is not None:
            raise UsageError("give a value or --unset, not both")
        removal = pins.unpin(here)
        if args.json:
            emit_json(removal.to_json())
            return 0
        print(
            f"removed {removal.removed}"
            if removal.removed
            else f"no {selection.PIN_FILE} in {here}"
        )
        if removal.applies_here is not None:
            print(f"note: {removal.applies_here} still applies here ({removal.request})")
        return 0
    if args.value is None:
        lookup = pins.look_up_pin(here)
        for warning in lookup.skipped:
            warn(warning)
        if args.json:
            emit_json(lookup.to_json())
        elif lookup.pin is None:
            print(
                f"no {selection.PIN_FILE} in {here} or above; write one with `cudaup pin VERSION`"
            )
        else:
            print(f"{lookup.pin}: {lookup.request}")
        return 0
    change = pins.pin_directory(store, here, args.value, root=SystemRoot.from_env(), env=os.environ)
    if change.problem is not None:
        warn(change.problem)
    if args.json:
        emit_json(change.to_json())
        return 0
    answer = f" → {change.toolkit.describe()}" if change.toolkit.path else ""
    print(f"wrote {change.pin}: {change.request}{answer}")
    for note in change.notes:
        print(f"note: {note}")
    return 0


# -- env / run -----------------------------------------------------------------------------------
def cmd_env(args: argparse.Namespace) -> int:

    shell: environment.EnvFormat = args.shell or environment.detect_shell()
    if args.output and shell != "github":
        raise UsageError("--output goes with --shell github (it writes to $GITHUB_OUTPUT)")
    store = Store.from_env()
    if args.python is not None and args.version is not None:
        raise UsageError("give a VERSION or --python, not both")
    extra: dict[str, str] = {}
    if args.python is not None:
        found = _for_environment(args, store)
        active, extra = found.active, found.extra
    else:
        _no_install_without_python(args)
        active = _select(store, request=args.version)
    handed = environment.hand_on(active, shell, store, extra=extra, github_output=args.output)
    if args.json:
        emit_json(handed.to_json())
    else:
        sys.stdout.write(handed.text)
    return 0


def _no_install_without_python(args: argparse.Namespace) -> None:
    if args.install:
        raise UsageError("--install goes with --python (`cudaup install VERSION` installs one)")


def _for_environment(args: argparse.Namespace, store: Store) -> pyenv.EnvironmentToolkit:
    """:func:`pyenv.toolkit_for_environment` for ``--python`` (``--install``: what
    ``upgrade`` installs beside an environment), its warnings said."""

    def install(request: str) -> None:
        # Only these commands need the installer: loaded here, not at start.
        from cudaup.cli.upgrade import DEFAULT_COMPONENTS  # noqa: PLC0415
        from cudaup.install.installer import InstallOptions, install  # noqa: PLC0415
        from cudaup.machine.host import host_platform  # noqa: PLC0415

        empty = store.is_empty()
        options = InstallOptions(platform=host_platform(), components=DEFAULT_COMPONENTS)
        result = install(request, options, settings=settings_of(args), store=store)
        store.adopt_first(store.at(result.path), empty)
        shim_files.refresh_shims(store)

    found = pyenv.toolkit_for_environment(
        args.python,
        store,
        env=os.environ,
        root=SystemRoot.from_env(),
        install=install if args.install else None,
    )
    for warning in found.active.warnings:
        warn(warning)
    if found.compiler_problem is not None:
        warn(found.compiler_problem)
    return found


def cmd_run(args: argparse.Namespace) -> int:

    command = list(args.cmd)
    if args.python is not None and args.version is not None:
        command = [args.version, *command]  # `run --python E -- CMD`: no VERSION, CMD is all
    if command[:1] == ["--"]:
        command = command[1:]
    if args.python is None and args.version is None:
        raise UsageError("name a VERSION or --python: cudaup run 13.0 -- nvcc --version")
    if not command:
        raise UsageError(f"name a command to run: cudaup run {args.version} -- nvcc --version")
    store = Store.from_env()
    program = command[0]
    extra: dict[str, str] = {}
    python_bin = None
    if args.python is not None:
        found = _for_environment(args, store)
        active, extra, python_bin = found.active, found.extra, found.root / "bin"
    else:
        _no_install_without_python(args)
        # `run 13.0 -- ncu` wants the newest 13.0.x that has ncu, as the ncu shim would.
        tool = program if "/" not in program else shim.COMPILER
        active = _select(store, request=args.version, tool=tool)
    toolkit = active.require()
    launch.refuse_shadowed(program, toolkit)
    environ = launch.run_environ(toolkit, store, os.environ, extra=extra, python_bin=python_bin)
    launch.refuse_other_toolkits(program, active, toolkit, environ["PATH"], store)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(program, command, environ)  # noqa: S606 - running it is the point
    except FileNotFoundError:
        raise CommandNotRunError(
            f"{program}: command not found (PATH starts with {toolkit / 'bin'})", 127
        ) from None
    except OSError as exc:
        raise CommandNotRunError(f"cannot run {program}: {exc.strerror}", 126) from None
    return 0  # pragma: no cover - execvpe does not return


# -- which / show -----------------------------------------------------------------------------------
def cmd_which(args: argparse.Namespace) -> int:

    store = Store.from_env()
    active = _select(store, tool=args.tool)
    found = selection.FoundTool(args.tool, selection.tool_in(active, args.tool, store), active)
    if args.json:
        emit_json(found.to_json())
        return 0
    print(found.path)
    label = f"CUDA {active.version}" if active.version else f"the toolkit at {active.path}"
    sys.stderr.write(f"{label}, {_why(active)}\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:

    store = Store.from_env()
    state = overview.overview(store, SystemRoot.from_env(), _select(store))
    if args.json:
        emit_json(state.to_json())
        return 0
    active = state.active
    if active.path is None:
        print(f"active     {active.reason}")
    else:
        print(f"active     {active.describe()}")
        print(f"           {_why(active)}")
    print(f"default    {state.default.value or 'none'}")
    if not state.installed:
        print("installed  none")
    for index, toolkit in enumerate(state.installed):
        marks = state.marks(toolkit)
        head = "installed" if index == 0 else ""
        mark = f"  ({', '.join(marks)})" if marks else ""
        print(f"{head:<10} {toolkit.version:<8} {toolkit.path}{mark}")
    where = (
        "on PATH"
        if state.shims_on_path
        else "not on PATH: add it so that nvcc runs the active toolkit"
    )
    print(f"shims      {state.shim_dir} ({where})")
    print(f"system     {system_link.LINK} {state.link.words()}")
    return 0


# -- shims ------------------------------------------------------------------------------------------
def add_shims(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="rewrite them for this cudaup (after moving a checkout or a virtual environment)",
    )
    parser.set_defaults(handler=cmd_shims)


def cmd_shims(args: argparse.Namespace) -> int:

    report = shim_files.review_shims(Store.from_env(), rebuild=args.rebuild)
    if args.json:
        emit_json(report.to_json())
        return 0
    print(f"{report.directory}: {', '.join(report.shims) or 'no shims'}")
    if report.rebuilt:
        print(f"rewrote {', '.join(report.rebuilt)} for this cudaup ({sys.executable})")
    if report.stale:
        print(
            f"note: {', '.join(report.stale)} run another cudaup (a checkout or environment since "
            "moved?); `cudaup shims --rebuild` rewrites them for this one"
        )
    return 0


# -- undo --------------------------------------------------------------------------------------------
def cmd_undo(args: argparse.Namespace) -> int:

    store = Store.from_env()
    change = system_link.undo_system_link(store)
    if args.json:
        emit_json(change.to_json())
        return 0
    print(f"{system_link.LINK} {change.after.words()} again")
    if change.note:
        print(f"note: {change.note}")
    return 0
