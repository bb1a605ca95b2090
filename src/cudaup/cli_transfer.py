"""The commands that move bytes: ``download``, ``install``, ``uninstall``, ``list``, ``lock``, ``mirror``."""

from __future__ import annotations

import argparse
import sys

from cudaup.cli_common import emit_json, human_size, platform_of, settings_of


def cmd_download(args: argparse.Namespace) -> int:
    from cudaup.tls import warm_up  # noqa: PLC0415

    warm_up()  # the CA certificates load while the modules below import
    from pathlib import Path  # noqa: PLC0415

    from cudaup.components import split_components  # noqa: PLC0415
    from cudaup.download import DownloadRequest, fetch_many  # noqa: PLC0415
    from cudaup.errors import UsageError  # noqa: PLC0415
    from cudaup.http import HttpClient  # noqa: PLC0415
    from cudaup.progress import display_for  # noqa: PLC0415

    settings = settings_of(args)
    http = HttpClient(settings)
    if "://" in args.target:
        requests = [DownloadRequest.from_url(args.target, sha256=args.sha256, md5=args.md5)]
    else:
        if args.sha256 or args.md5:
            raise UsageError(
                "--sha256/--md5 are for a bare URL; a release's checksums come from its sources"
            )
        from cudaup.resolve import Resolver  # noqa: PLC0415

        resolution = Resolver(settings, http).resolve(
            args.target,
            platform=platform_of(args),
            channel=args.channel,
            components=split_components(args.components),
        )
        requests = [DownloadRequest.from_artifact(a) for a in resolution.artifacts]
    with display_for(quiet=args.quiet or args.json, terminal=sys.stdout.isatty()) as display:
        results = fetch_many(
            requests,
            Path(args.output),
            http=http,
            connections=args.connections,
            progress=display,
            allow_unverified=args.allow_unverified,
        )
    if args.json:
        emit_json({"schema": 1, "files": [r.to_json() for r in results]})
        return 0
    for result in results:
        if result.skipped:
            how = "already here"
        else:
            rate = result.fetched / result.seconds / 2**20 if result.seconds else 0.0
            how = f"{result.fetched / 2**20:.1f} MiB in {result.seconds:.1f} s ({rate:.0f} MiB/s)"
            if result.resumed_from:
                how += f", resumed at {result.resumed_from} bytes"
        check = (
            f"{result.algorithm} verified"
            if result.algorithm
            else "NOT verified (--allow-unverified)"
        )
        print(f"{result.path}  {human_size(result.size)}  {check}  · {how}")
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    from cudaup.tls import warm_up  # noqa: PLC0415

    warm_up()  # the CA certificates load while the modules below import
    from pathlib import Path  # noqa: PLC0415

    from cudaup.components import split_components  # noqa: PLC0415
    from cudaup.errors import UsageError  # noqa: PLC0415
    from cudaup.install.installer import InstallOptions, install  # noqa: PLC0415
    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.progress import display_for  # noqa: PLC0415

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
    )
    with display_for(quiet=args.quiet or args.json, terminal=sys.stdout.isatty()) as display:
        if args.lock:
            from cudaup.install.installer import install_locked  # noqa: PLC0415

            if args.version or args.components or args.all:
                raise UsageError(
                    "--lock decides the release and its files; give no VERSION, --components or --all"
                )
            result = install_locked(
                Path(args.lock), options, settings=settings_of(args), store=Store.from_env(),
                mirror=args.mirror, progress=display,
            )  # fmt: skip
        elif not args.version:
            raise UsageError("name a release to install (13.0.1, 13.0, cu130) or give --lock FILE")
        else:
            result = install(
                args.version,
                options,
                settings=settings_of(args),
                store=Store.from_env(),
                progress=display,
            )
    if args.json:
        emit_json({"schema": 1, **result.to_json()})
        return 0
    what = "already installed" if result.skipped else "installed"
    print(
        f"CUDA {result.version} {what} at {result.path} ({result.channel}: {', '.join(result.components)})"
    )
    for note in result.notes:
        print(f"note: {note}")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from cudaup.errors import ArtifactNotFoundError, UsageError  # noqa: PLC0415
    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415
    from cudaup.toolkits import Lookup, find_toolkits  # noqa: PLC0415

    store = Store.from_env()
    toolkit = store.find(args.version)
    if toolkit is None:
        others = [
            t
            for t in find_toolkits(
                Lookup(root=SystemRoot.from_env(), env=dict(os.environ), store=store.toolkits_dir)
            )
            if args.version in t.identity.candidates or t.identity.line == args.version
        ]
        if others:
            owner = others[0].owner or "not cudaup"
            hint = (
                f"remove it with {others[0].path}/bin/cuda-uninstaller"
                if owner == "runfile installer"
                else "remove it with the tool that installed it"
            )
            raise UsageError(
                f"CUDA {args.version} at {others[0].path} is owned by {owner}, not cudaup; {hint}"
            )
        installed = ", ".join(t.version for t in store.installed()) or "none"
        raise ArtifactNotFoundError(
            f"cudaup has no CUDA {args.version} installed (installed: {installed})"
        )
    store.remove(toolkit)
    if store.default() in {toolkit.version, str(toolkit.path)}:
        store.set_default(None)
    from cudaup.switch import refresh_shims  # noqa: PLC0415

    refresh_shims(store)
    from cudaup.cachedir import inspect  # noqa: PLC0415

    # Its unpacked archives stay in the cache (hard links kept them shared until now).
    reclaimable = inspect(settings_of(args).cache_root).reclaimable
    if args.json:
        emit_json({
            "schema": 1, "removed": toolkit.version, "path": str(toolkit.path),
            "cache_reclaimable_bytes": reclaimable,
        })  # fmt: skip
    else:
        print(f"removed CUDA {toolkit.version} from {toolkit.path}")
        if reclaimable:
            print(
                f"cudaup's cache keeps {human_size(reclaimable)} that no installed toolkit "
                "uses, for a quick reinstall; `cudaup cache prune` frees it"
            )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415
    from cudaup.toolkits import Lookup, find_toolkits  # noqa: PLC0415

    store = Store.from_env()
    installed = store.installed()
    default = store.default()
    mine = {t.path.resolve() for t in installed}
    others = [
        t
        for t in find_toolkits(
            Lookup(root=SystemRoot.from_env(), env=dict(os.environ), store=store.toolkits_dir)
        )
        if t.real.resolve() not in mine
    ]
    if args.json:
        emit_json({
            "schema": 1,
            "default": default,
            "installed": [
                {"version": t.version, "path": str(t.path), "components": t.components,
                 "channel": (t.record or {}).get("channel"), "default": default in {t.version, str(t.path)}}
                for t in installed
            ],
            "other": [t.to_json() for t in others],
        })  # fmt: skip
        return 0
    if not installed:
        print("installed by cudaup: none")
    for toolkit in installed:
        mark = "*" if default in {toolkit.version, str(toolkit.path)} else " "
        channel = (toolkit.record or {}).get("channel", "?")
        print(
            f"{mark} {toolkit.version:<9} {toolkit.path}  ({channel}: {', '.join(toolkit.components)})"
        )
    for other in others:
        owner = f" · {other.owner}" if other.owner else ""
        via = ", ".join(other.found_via)
        print(f"  {other.identity.describe():<9} {other.path}  (found via {via}{owner})")
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from cudaup.components import split_components  # noqa: PLC0415
    from cudaup.errors import IntegrityError, UsageError  # noqa: PLC0415
    from cudaup.install.installer import choose_channel  # noqa: PLC0415
    from cudaup.lock import Lock, LockedWheels, compare, locked_toolkit, read_lock  # noqa: PLC0415
    from cudaup.platforms import parse_platform  # noqa: PLC0415
    from cudaup.resolve import Resolver  # noqa: PLC0415

    settings = settings_of(args)
    resolver = Resolver(settings)
    if args.check:
        lock = read_lock(Path(args.check))
        changes: list[str] = []
        for toolkit in lock.toolkits:
            live = resolver.resolve(
                toolkit.release, platform=toolkit.platform, channel=toolkit.channel,
                components=None if toolkit.channel == "installer" else list(toolkit.components),
            )  # fmt: skip
            changes += compare(toolkit, locked_toolkit(live, settings.canonical))
        if args.json:
            emit_json(
                {"schema": 1, "lock": args.check, "unchanged": not changes, "changes": changes}
            )
        else:
            for change in changes:
                print(f"changed: {change}")
            print(
                "the origins still serve exactly these bytes"
                if not changes
                else f"{len(changes)} change(s)"
            )
        if changes:
            raise IntegrityError(
                f"{args.check}: the origins no longer serve what the lock names ({len(changes)} change(s))"
            )
        return 0
    if not args.version:
        raise UsageError("name a release to lock (13.0.1, 13.0, cu130) or give --check FILE")
    components = split_components(args.components)
    if args.all == bool(components) and args.channel != "installer":
        raise UsageError(
            "name what to lock: --components nvcc,cudart (with what they need), or --all"
        )
    platforms = [parse_platform(p) for p in (args.platform or [])] or [platform_of(args)]
    notes: list[str] = []
    channel = choose_channel(settings, args.channel, notes)
    lock = Lock(args.version)
    for platform in platforms:
        resolution = resolver.resolve(
            args.version, platform=platform, channel=channel, components=components, closure=True
        )
        lock.toolkits.append(locked_toolkit(resolution, settings.canonical))
    output = Path(args.output)
    if args.with_packages:
        from cudaup.install.store import Store  # noqa: PLC0415
        from cudaup.plan import indexes_for, parse_requirements  # noqa: PLC0415
        from cudaup.planner import Planner, Target, export_pylock, python_version  # noqa: PLC0415

        user = Store.from_env().home / "indexes.toml"
        indexes = indexes_for(settings.pypi_url, args.index or [], user)
        requirements = parse_requirements([p for p in args.with_packages.split(",") if p.strip()])
        for platform in platforms:
            target = Target(python_version(args.python), platform, None, None)
            result = Planner(settings).plan(requirements, indexes, target)
            name = f"pylock.{output.stem.replace('.', '-')}-{platform}.toml"  # PEP 751: pylock.<name>.toml
            export_pylock(result, output.parent / name, indexes)
            line = f"{result.choice.line[0]}.{result.choice.line[1]}"
            lock.wheels.append(LockedWheels(platform, name, line))
    output.write_text(lock.to_toml())
    if args.json:
        emit_json(
            {"schema": 1, "lock": str(output), "toolkits": len(lock.toolkits), "notes": notes}
        )
    else:
        for toolkit in lock.toolkits:
            print(
                f"{toolkit.platform}: CUDA {toolkit.release} ({toolkit.channel}, {len(toolkit.files)} file(s))"
            )
        for wheels in lock.wheels:
            print(f"{wheels.platform}: wheels for CUDA {wheels.cuda_line} in {wheels.pylock}")
        print(f"wrote {output}")
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from cudaup.http import HttpClient  # noqa: PLC0415
    from cudaup.lock import read_lock  # noqa: PLC0415
    from cudaup.mirror import build_mirror  # noqa: PLC0415
    from cudaup.progress import display_for  # noqa: PLC0415

    settings = settings_of(args)
    lock_path = Path(args.lock)
    with display_for(quiet=args.quiet or args.json, terminal=sys.stdout.isatty()) as display:
        report = build_mirror(
            read_lock(lock_path), lock_path.parent, Path(args.directory),
            settings=settings, http=HttpClient(settings), progress=display,
        )  # fmt: skip
    if args.json:
        emit_json({"schema": 1, "directory": args.directory, **report.to_json()})
    else:
        print(
            f"{args.directory}: {len(report.fetched)} fetched, {len(report.kept)} kept (verified), {len(report.documents)} documents"
        )
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from cudaup import cachedir  # noqa: PLC0415

    root = settings_of(args).cache_root
    if args.action == "dir":
        if args.json:
            emit_json({"schema": 1, "root": str(root)})
        else:
            print(root)
        return 0
    if args.action == "info":
        info = cachedir.inspect(root)
        if args.json:
            emit_json(info.to_json())
            return 0
        print(f"{root}: {human_size(info.bytes)}")
        for area in info.areas:
            line = f"  {area.name + '/':<11} {human_size(area.bytes):>10}  {area.files} files"
            if area.name == "unpacked" and area.files:
                line += (
                    f"; {human_size(area.shared_bytes)} shared with installed toolkits, "
                    f"{area.unused_entries} archives no toolkit uses"
                )
            print(line)
        if info.reclaimable:
            print(f"`cudaup cache prune` frees {human_size(info.reclaimable)}")
        return 0
    report = cachedir.prune(root) if args.action == "prune" else cachedir.clean(root)
    if args.json:
        emit_json(report.to_json())
    else:
        print(
            f"removed {len(report.removed)} entries from {root}, {human_size(report.freed)} freed"
        )
    return 0
