"""``cudaup upgrade``, ``rollback`` and ``snapshots``: a Python environment moved to another
CUDA line in one step, and back."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from cudaup.cli.common import (
    add_allow_minor_compat,
    add_channel,
    add_components,
    add_platform,
    human_size,
    platform_of,
    settings_of,
)
from cudaup.cli.output import emit_json
from cudaup.cli.progress import display_for
from cudaup.core.components import split_components
from cudaup.core.gpus import parse_gpu
from cudaup.errors import UsageError
from cudaup.install.store import Store
from cudaup.plan.indexes import indexes_for
from cudaup.plan.lines import line_text, parse_line
from cudaup.switch.pins import write_pin
from cudaup.switch.shim_files import refresh_shims
from cudaup.upgrade import UpgradePlan, Upgrader, UpgradeRequest, plan_upgrade
from cudaup.upgrade.snapshots import EnvironmentSnapshot
from cudaup.upgrade.transaction import UpgradeOutcome

DEFAULT_COMPONENTS = ("nvcc", "cudart")


def _add_python(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the environment's interpreter (.venv/bin/python) or directory (default: $VIRTUAL_ENV)",
    )


def add_upgrade(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "line",
        nargs="?",
        help="the CUDA line to move to (13.0, cu130; default: the newest that fits)",
    )
    _add_python(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would change; change nothing"
    )
    parser.add_argument("-y", "--yes", action="store_true", help="apply without asking")
    parser.add_argument("--driver", help="plan for this driver (default: this machine's)")
    parser.add_argument(
        "--index",
        action="append",
        help="pypi, pytorch, pytorch-nightly, flashinfer, sglang, vllm or a URL (repeatable; default: all; the nightly ones only with --pre)",
    )
    add_platform(parser, "(the toolkit's; default: this host)")
    add_components(parser)
    parser.add_argument(
        "--no-toolkit", action="store_true", help="do not install the line's toolkit side by side"
    )
    add_channel(parser, auto=True)
    parser.add_argument(
        "--pin", action="store_true", help="write .cuda-version here for the new toolkit"
    )
    parser.add_argument(
        "--force", action="store_true", help="move even to a line the driver or the GPUs cannot run"
    )
    add_allow_minor_compat(parser)
    parser.add_argument(
        "--pre",
        action="store_true",
        help="let the resolver take pre-releases, from the nightly indexes too (as plan --pre)",
    )
    parser.add_argument(
        "--gpu",
        help="where no GPU is present: the targets (sm_70,sm_90) the new kernels must cover",
    )
    parser.set_defaults(handler=cmd_upgrade)


def add_rollback(parser: argparse.ArgumentParser) -> None:
    _add_python(parser)
    parser.add_argument("--to", metavar="ID", help="restore this snapshot (default: the newest)")
    parser.set_defaults(handler=cmd_rollback)


def add_snapshots(parser: argparse.ArgumentParser) -> None:
    _add_python(parser)
    parser.add_argument("--prune", action="store_true", help="remove all but the newest --keep")
    parser.add_argument("--keep", type=int, default=3, help="snapshots --prune keeps (default 3)")
    parser.set_defaults(handler=cmd_snapshots)


def _python(args: argparse.Namespace) -> str:
    python: str | None = args.python or os.environ.get("VIRTUAL_ENV")
    if not python:
        raise UsageError(
            "name the environment with --python .venv/bin/python (no $VIRTUAL_ENV is set)"
        )
    return python


def _echo(quiet: bool) -> Callable[[str], None]:
    def echo(message: str) -> None:
        if not quiet:
            sys.stderr.write(f"cudaup: {message}\n")
            sys.stderr.flush()

    return echo


def cmd_upgrade(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.no_toolkit and args.components:
        raise UsageError("--no-toolkit and --components exclude each other")
    request = UpgradeRequest(
        python=_python(args),
        line=parse_line(args.line) if args.line else None,
        indexes=indexes_for(
            settings.pypi_url, args.index or [], settings.user_indexes, pre=args.pre
        ),
        pre=args.pre,
        platform=platform_of(args),
        driver=args.driver,
        force=args.force,
        allow_minor_compat=args.allow_minor_compat,
        components=None
        if args.no_toolkit
        else split_components(args.components) or DEFAULT_COMPONENTS,
        channel=args.channel,
        gpus=tuple(g.strip() for g in args.gpu.split(",") if parse_gpu(g)) if args.gpu else (),
    )
    terminal = sys.stdin.isatty() and not args.json
    if args.dry_run or not (args.yes or terminal):
        plan = plan_upgrade(settings, request)
        if args.dry_run:
            _show_plan(plan, args.json)
            return 0
        refusal = UsageError(
            "nothing was changed: there is no terminal to ask on; apply it with --yes"
        )
        _show_plan(plan, args.json, error=refusal)
        sys.stderr.write(f"cudaup: error: {refusal}\n")
        return refusal.exit_code

    def confirm(plan: UpgradePlan) -> bool:
        if args.yes:
            return True
        _show_plan(plan, False)
        answer = input("apply? [y/N] ").strip().lower()
        return answer in {"y", "yes"}

    quiet = args.quiet or args.json
    with display_for(quiet=quiet) as display:
        upgrader = Upgrader(settings, echo=_echo(quiet), progress=display)
        outcome = upgrader.upgrade(request, confirm)
    if outcome.toolkit is not None:
        refresh_shims(Store.from_env())  # the new toolkit's tools get shims
    if args.pin and outcome.pinnable:
        outcome.pin = write_pin(Path.cwd(), outcome.plan.release)
    if args.json:
        emit_json(outcome.to_json())
        return 0
    _show_outcome(outcome)
    return 0


def _show_plan(plan: UpgradePlan, as_json: bool, *, error: UsageError | None = None) -> None:
    if as_json:
        emit_json(plan.dry_run_json(error))
        return
    environment = plan.environment
    before = plan.line_before or "no line"
    print(
        f"{environment.root} (Python {environment.python_text}): CUDA {before} → {line_text(plan.line)}"
    )
    state = "installed" if plan.toolkit_installed else "to install side by side"
    print(f"  toolkit CUDA {plan.release} ({state}): {plan.result.release_reason}")
    if not plan.changes:
        print("  no package changes")
    for change in plan.changes:
        where = (
            f"  from {change.index or change.index_url}" if change.index or change.index_url else ""
        )
        print(f"  {change.describe()}{where}  ({change.reason})")
    for exclusion in plan.result.excluded:
        print(f"excluded {exclusion.summary()}")
    for note in plan.notes:
        print(f"note: {note}")


def _show_outcome(outcome: UpgradeOutcome) -> None:
    plan = outcome.plan
    root = plan.environment.root
    if outcome.declined:
        print(f"nothing was changed: {root} is as it was")
        return
    if outcome.nothing:
        print(f"{root} is on CUDA {line_text(plan.line)} and has nothing to change")
    else:
        print(
            f"{root}: CUDA {plan.line_before or 'no line'} → {line_text(plan.line)}, "
            f"{len(plan.changes)} changes (snapshot {outcome.snapshot}; `cudaup rollback` undoes it)"
        )
        for change in plan.changes:
            print(f"  {change.describe()}")
        for check in outcome.checks:
            print(f"  {check.step}: {check.status}: {check.detail}")
    if outcome.toolkit is not None:
        what = "already installed" if outcome.toolkit.skipped else "installed"
        print(f"CUDA {outcome.toolkit.version} {what} at {outcome.toolkit.path}")
    if outcome.binding is not None:
        print(f"CUDA_HOME for {root}/bin/python: {outcome.binding} (cudaup-toolkit.pth)")
    if outcome.pin is not None:
        print(f"wrote {outcome.pin}")
    for note in [*plan.notes, *outcome.notes]:
        print(f"note: {note}")


def cmd_rollback(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    outcome = Upgrader(settings, echo=_echo(args.quiet or args.json)).rollback(
        _python(args), args.to
    )
    if args.json:
        emit_json(outcome.to_json())
        return 0
    restored = outcome.snapshot
    print(
        f"{outcome.environment}: restored snapshot {restored['id']} of {restored['created']} "
        f"(CUDA {restored.get('line_before') or 'no line'}, as before the move to {restored.get('line_after')})"
    )
    for note in outcome.notes:
        print(f"note: {note}")
    return 0


def cmd_snapshots(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    upgrader = Upgrader(settings, echo=_echo(args.quiet or args.json))
    if args.keep < 0:
        raise UsageError("--keep takes a number of snapshots, 0 or more")
    removed: list[EnvironmentSnapshot] = []
    if args.prune:
        _store, removed = upgrader.prune(_python(args), args.keep)
    listing = upgrader.snapshots(_python(args), removed=removed)
    if args.json:
        emit_json(listing.to_json())
        return 0
    store, rows = listing.store, listing.rows()
    for snapshot in removed:
        print(f"removed {snapshot.id}")
    if not rows:
        print(f"{store.environment} has no snapshot")
    else:
        print(f"{store.environment}: snapshots in {store.directory}")
    for row in rows:
        status = _status_words(str(row["status"]), bool(row["in_progress"]))
        print(
            f"  {row['id']}  {row['created']}  {status}  CUDA {row['line_before'] or 'no line'} → "
            f"{row['line_after']}  {len(row['changes'] or [])} changes  holds {human_size(row['holds'])} "
            f"(removing it frees {human_size(row['frees'])})"
        )
    for note in listing.notes:
        print(f"note: {note}")
    return 0


def _status_words(status: str, in_progress: bool) -> str:
    if in_progress:
        return f"in progress ({status})"
    if status == "interrupted":
        return "interrupted (its upgrade was killed before it changed the environment)"
    return status
