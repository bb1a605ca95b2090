"""The switching commands: ``default``, ``pin``, ``env``, ``run``, ``which``, ``show``, ``undo``.

Each handler returns an exit code and, with ``--json``, prints one JSON object
with ``"schema": 1``.  The work is done by :mod:`cudaup.switch`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from cudaup.cli.common import emit_json, settings_of, warn
from cudaup.core.tools import is_toolkit_tool
from cudaup.errors import CommandNotRunError, ReleaseNotFoundError, UsageError
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import is_shim
from cudaup.switch import environment, github, pins, pyenv, selection, shim, shims, system_link

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
        choices=environment.TARGETS,
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


def _override_note(active: selection.Active) -> str | None:
    """A note when something above the default decides here."""

    if active.source in {"env", "file"}:
        return f"here, {shim.asker(active.source, str(active.origin))} takes precedence ({active.request})"
    return None


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
            emit_json({"schema": 1, **change.to_json()})
            return 0
        via = " through update-alternatives" if change.method == "update-alternatives" else ""
        print(f"{system_link.LINK} {change.after.words()}{via}")
        print(f"  was {change.before.words()}; `cudaup undo` puts it back")
        return 0
    if args.unset:
        if args.value is not None:
            raise UsageError("give a value or --unset, not both")
        store.set_default(None)
        if args.json:
            emit_json({"schema": 1, "default": None})
        else:
            print("no default toolkit now")
        return 0
    if args.value is None:
        return _print_default(args, store)
    choice = selection.choose_default(store, args.value, root=root)
    store.set_default(choice.value)
    shims.refresh_shims(store)
    active = _select(store)
    notes = [n for n in (choice.note, _override_note(active)) if n]
    if not shims.shims_on_path(store):
        notes.append(f"add {store.bin_dir} to PATH so that nvcc and friends run the active toolkit")
    if args.json:
        emit_json({"schema": 1, "default": choice.to_json(), "notes": notes})
        return 0
    print(f"default: {_answer(choice.value, choice.path, choice.version)}")
    for note in notes:
        print(f"note: {note}")
    return 0


def _print_default(args: argparse.Namespace, store: Store) -> int:

    value = store.default()
    resolved = selection.resolve_default(store)
    if args.json:
        document = None
        if value is not None and resolved is not None:
            document = {
                "value": value,
                "path": str(resolved.path) if resolved.path else None,
                "version": resolved.version,
                "problem": resolved.problem,
            }
        emit_json({"schema": 1, "default": document})
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
        emit_json({"schema": 1, "link": system_link.LINK, "state": state.to_json()})
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
        removed = pins.remove_pin(here)
        still, still_asks, _ = pins.nearest_pin(here)
        if args.json:
            emit_json(
                {
                    "schema": 1,
                    "removed": str(removed) if removed else None,
                    "applies_here": str(still) if still else None,
                }
            )
            return 0
        print(f"removed {removed}" if removed else f"no {selection.PIN_FILE} in {here}")
        if still is not None:
            print(f"note: {still} still applies here ({still_asks})")
        return 0
    if args.value is None:
        pin, asks, skipped = pins.nearest_pin(here)
        request = asks if pin else None
        for warning in skipped:
            warn(warning)
        if args.json:
            emit_json({"schema": 1, "pin": str(pin) if pin else None, "request": request})
        elif pin is None:
            print(
                f"no {selection.PIN_FILE} in {here} or above; write one with `cudaup pin VERSION`"
            )
        else:
            print(f"{pin}: {request}")
        return 0
    value = selection.check_request(args.value)
    if shim.is_path_request(value):
        problem = selection.foreign_problem(
            store, selection.real_path(SystemRoot.from_env(), value, here)
        )
        if problem is not None:
            raise UsageError(problem)
    path = pins.write_pin(here, args.value)
    without_env = {k: v for k, v in os.environ.items() if k != selection.TOOLKIT_ENV}
    pinned = selection.select(store, env=without_env, cwd=here)
    if pinned.path is None:
        fix = (
            f"; install it with `cudaup install {value}`"
            if pinned.failure == "not-installed"
            else ""
        )
        warn(f"{pinned.problem}{fix}")
    notes = []
    if os.environ.get(selection.TOOLKIT_ENV, "").strip():
        notes.append(
            f"{selection.TOOLKIT_ENV}={os.environ[selection.TOOLKIT_ENV]} overrides it in this environment"
        )
    if args.json:
        emit_json(
            {
                "schema": 1,
                "pin": str(path),
                "request": value,
                "toolkit": pinned.to_json(),
                "notes": notes,
            }
        )
        return 0
    answer = f" → {pinned.describe()}" if pinned.path else ""
    print(f"wrote {path}: {value}{answer}")
    for note in notes:
        print(f"note: {note}")
    return 0


# -- env / run -----------------------------------------------------------------------------------
def cmd_env(args: argparse.Namespace) -> int:

    shell: environment.Target = args.shell or environment.detect_shell()
    if args.output and shell != "github":
        raise UsageError("--output goes with --shell github (it writes to $GITHUB_OUTPUT)")
    store = Store.from_env()
    if args.python is not None and args.version is not None:
        raise UsageError("give a VERSION or --python, not both")
    extra: dict[str, str] = {}
    if args.python is not None:
        active, extra = _for_environment(args, store)
    else:
        _no_install_without_python(args)
        active = _select(store, request=args.version)
    toolkit = active.require()
    document: dict[str, Any] = {"schema": 1, "shell": shell, "toolkit": active.to_json()}
    if shell == "dockerfile":
        text = environment.render_dockerfile(toolkit)  # checks the paths first
        document["variables"] = environment.dockerfile_env(toolkit)
    else:
        variables = environment.toolkit_env(toolkit, store)
        if shell != "github":  # the runner's files take the toolkit's variables alone
            variables.update(extra)
        document["variables"] = variables
        if shell == "github":
            text, document["files"] = _github_env(active, toolkit, variables, output=args.output)
        else:
            text = environment.render_env(variables, shell)
    if args.json:
        emit_json(document)
    else:
        sys.stdout.write(text)
    return 0


def _no_install_without_python(args: argparse.Namespace) -> None:
    if args.install:
        raise UsageError("--install goes with --python (`cudaup install VERSION` installs one)")


def _for_environment(
    args: argparse.Namespace, store: Store
) -> tuple[selection.Active, dict[str, str]]:
    """The toolkit of ``--python``'s line (installed with ``--install``), and the variables
    to add: ``TORCH_CUDA_ARCH_LIST`` from the GPUs present when it is unset.  A host compiler
    the toolkit does not accept is warned about, with the way out."""
    # Only these commands need the installer and the driver probe: loaded here, not at start.
    from cudaup.install.installer import InstallOptions, install  # noqa: PLC0415
    from cudaup.machine.driver_probe import detect_driver  # noqa: PLC0415
    from cudaup.machine.host import host_platform  # noqa: PLC0415

    root = pyenv.environment_root(args.python)
    line = pyenv.environment_line(root)
    log.info("%s: %s: CUDA %s", root, line.reason, line.request)
    active = _select(store, request=line.request)
    if active.path is None and args.install:
        empty = store.is_empty()
        # What `upgrade` installs beside an environment: what a JIT or an extension build needs.
        from cudaup.cli.upgrade import DEFAULT_COMPONENTS  # noqa: PLC0415

        options = InstallOptions(platform=host_platform(), components=DEFAULT_COMPONENTS)
        result = install(line.request, options, settings=settings_of(args), store=store)
        store.adopt_first(store.at(result.path), empty)
        shims.refresh_shims(store)
        active = _select(store, request=line.request)
    if active.path is None:
        hint = (
            f"; `--install` installs it ({line.reason})"
            if active.failure == "not-installed"
            else ""
        )
        raise ReleaseNotFoundError(f"{active.problem or 'no toolkit'}{hint}")
    extra: dict[str, str] = {}
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        log.info("TORCH_CUDA_ARCH_LIST is set (%s): kept", os.environ["TORCH_CUDA_ARCH_LIST"])
    else:
        gpus = detect_driver(root=SystemRoot.from_env()).gpus
        arch = pyenv.arch_list(gpus)
        if arch is None:
            log.info("no GPU found here: TORCH_CUDA_ARCH_LIST is left unset")
        else:
            extra["TORCH_CUDA_ARCH_LIST"] = arch
    problem = pyenv.compiler_problem(active.path, os.environ)
    if problem is not None:
        warn(problem)
    return active, extra


def _github_env(
    active: selection.Active, toolkit: Path, variables: dict[str, str], *, output: bool
) -> tuple[str, dict[str, str]]:
    """Append the environment (with ``output``, the outputs too) to the runner's files.

    Returns what went where, in words for the step's log, and the files written.
    """
    outputs = None
    if output:
        if active.version is None:
            raise UsageError(
                f"cudaup did not install the toolkit at {toolkit}, so it does not know its exact "
                "release for cuda-version; name one it installed, or drop --output"
            )
        outputs = {"cuda-version": active.version, "cuda-home": str(toolkit)}
    appends = environment.github_appends(variables, toolkit, outputs)
    github.append_all(appends)
    lines = [
        active.describe(),
        f"  ${github.ENV_FILE}     {', '.join(environment.GITHUB_VARIABLES)}",
        f"  ${github.PATH_FILE}    {toolkit / 'bin'}",
    ]
    if outputs:
        pairs = ", ".join(f"{name}={value}" for name, value in outputs.items())
        lines.append(f"  ${github.OUTPUT_FILE}  {pairs}")
    return "\n".join(lines) + "\n", {a.variable: str(a.path) for a in appends}


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
    if args.python is not None:
        active, extra = _for_environment(args, store)
    else:
        _no_install_without_python(args)
        # `run 13.0 -- ncu` wants the newest 13.0.x that has ncu, as the ncu shim would.
        tool = program if "/" not in program else shim.COMPILER
        active = _select(store, request=args.version, tool=tool)
    toolkit = active.require()
    if (
        "/" not in program
        and not is_toolkit_tool(program)
        and shim.tool_path(str(toolkit), program)
    ):
        # PATH would find it in the toolkit's bin first: a name no NVIDIA toolkit ships.
        raise CommandNotRunError(
            f"cannot run {program}: {shim.not_a_toolkit_tool(program)}, and {toolkit / 'bin'} "
            "holds one, which PATH would find first; name the program you mean by its path",
            127,
        )
    environ = dict(os.environ)
    environ.update(environment.toolkit_env(toolkit, store))
    environ.update(extra)
    # Shims the command starts (a tool this toolkit lacks, a nested build) agree with it,
    # and come before any other toolkit's tools on PATH.
    environ[selection.TOOLKIT_ENV] = str(toolkit)
    environ["PATH"] = _with_shims(environ["PATH"], toolkit, store)
    if args.python is not None:  # the environment's own tools (python, pip) next
        bin_dir = str(pyenv.environment_root(args.python) / "bin")
        entries = [e for e in environ["PATH"].split(os.pathsep) if e != bin_dir]
        at = next((i + 1 for i, e in enumerate(entries) if e == str(store.bin_dir.absolute())), 1)
        environ["PATH"] = os.pathsep.join([*entries[:at], bin_dir, *entries[at:]])
    if "/" not in program:
        _refuse_other_toolkits(program, active, toolkit, environ["PATH"], store)
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


def _with_shims(path: str, toolkit: Path, store: Store) -> str:
    """``PATH`` with the shims right after the toolkit's ``bin`` (when there are shims)."""
    if not store.bin_dir.is_dir():
        return path
    shim_dir = os.path.normpath(store.bin_dir.absolute())
    entries = [e for e in path.split(os.pathsep) if e and os.path.normpath(e) != shim_dir]
    own = str(toolkit / "bin")
    at = entries.index(own) + 1 if own in entries else 0
    return os.pathsep.join([*entries[:at], shim_dir, *entries[at:]])


def _refuse_other_toolkits(
    program: str, active: selection.Active, toolkit: Path, path: str, store: Store
) -> None:
    """Exit 127 when ``program`` is a toolkit's tool (one cudaup knows, or one an installed
    toolkit has: it has a shim) that the chosen toolkit lacks: PATH would find another
    toolkit's (``/usr/local/bin/nvcc``), and a build with the wrong compiler that exits 0
    is worse than none."""
    if shim.tool_path(str(toolkit), program) is not None:
        return
    if not is_toolkit_tool(program):
        return  # make, cmake, python: no toolkit's tool
    shim_dir = os.path.normpath(store.bin_dir.absolute())
    beyond = os.pathsep.join(e for e in path.split(os.pathsep) if os.path.normpath(e) != shim_dir)
    found = shutil.which(program, path=beyond)  # what PATH would have run
    instead = f"; cudaup does not run {found} instead" if found and not is_shim(Path(found)) else ""
    raise CommandNotRunError(selection.missing_tool(active, program, store) + instead, 127)


# -- which / show -----------------------------------------------------------------------------------
def cmd_which(args: argparse.Namespace) -> int:

    store = Store.from_env()
    active = _select(store, tool=args.tool)
    path = selection.tool_in(active, args.tool, store)
    if args.json:
        emit_json({"schema": 1, "tool": args.tool, "path": str(path), "toolkit": active.to_json()})
        return 0
    print(path)
    label = f"CUDA {active.version}" if active.version else f"the toolkit at {active.path}"
    sys.stderr.write(f"{label}, {_why(active)}\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:

    store = Store.from_env()
    root = SystemRoot.from_env()
    active = _select(store)
    installed = store.installed()
    link = system_link.read_link_state(root)
    on_path = shims.shims_on_path(store)
    if args.json:
        emit_json(
            {
                "schema": 1,
                "active": active.to_json(),
                "default": store.default(),
                "installed": [
                    {
                        "version": t.version,
                        "path": str(t.path),
                        "external": t.external,
                        "active": active.path is not None and t.path == active.path,
                    }
                    for t in installed
                ],
                "shims": {"dir": str(store.bin_dir), "on_path": on_path},
                "system_link": {"link": system_link.LINK, **link.to_json()},
            }
        )
        return 0
    if active.path is None:
        print(f"active     {active.reason}")
    else:
        print(f"active     {active.describe()}")
        print(f"           {_why(active)}")
    print(f"default    {store.default() or 'none'}")
    if not installed:
        print("installed  none")
    default = selection.resolve_default(store)
    for index, toolkit in enumerate(installed):
        marks = [
            word
            for word, chosen in (("active", active), ("default", default))
            if chosen is not None and chosen.path is not None and toolkit.path == chosen.path
        ]
        head = "installed" if index == 0 else ""
        mark = f"  ({', '.join(marks)})" if marks else ""
        print(f"{head:<10} {toolkit.version:<8} {toolkit.path}{mark}")
    where = "on PATH" if on_path else "not on PATH: add it so that nvcc runs the active toolkit"
    print(f"shims      {store.bin_dir} ({where})")
    print(f"system     {system_link.LINK} {link.words()}")
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

    store = Store.from_env()
    stale = shims.stale_shims(store)
    if args.rebuild:
        shims.refresh_shims(store)
    listed = store.bin_dir.iterdir() if store.bin_dir.is_dir() else iter(())
    written = sorted(p for p in listed if is_shim(p))
    rebuilt = [p.name for p in stale] if args.rebuild else []
    still = [] if args.rebuild else [p.name for p in stale]
    if args.json:
        emit_json({
            "schema": 1, "dir": str(store.bin_dir), "shims": [p.name for p in written],
            "stale": still, "rebuilt": rebuilt, "on_path": shims.shims_on_path(store),
        })  # fmt: skip
        return 0
    print(f"{store.bin_dir}: {', '.join(p.name for p in written) or 'no shims'}")
    if rebuilt:
        print(f"rewrote {', '.join(rebuilt)} for this cudaup ({sys.executable})")
    if still:
        print(
            f"note: {', '.join(still)} run another cudaup (a checkout or environment since "
            "moved?); `cudaup shims --rebuild` rewrites them for this one"
        )
    return 0


# -- undo --------------------------------------------------------------------------------------------
def cmd_undo(args: argparse.Namespace) -> int:

    store = Store.from_env()
    change = system_link.undo_system_link(store)
    if args.json:
        emit_json({"schema": 1, **change.to_json()})
        return 0
    print(f"{system_link.LINK} {change.after.words()} again")
    if change.note:
        print(f"note: {change.note}")
    return 0
