"""One cold ``cudaup plan`` as a timeline: where its fixed cost goes.

Runs the plan in this process (an empty ``CUDAUP_CACHE_DIR``) with the plan's edges
wrapped, and prints, in seconds from the process's start (``/proc/self/stat``): each uv
spawn and exit, the index memo's start, each request uv sends the memo (in and out), its
wait for an upstream slot, its upstream fetch and its page rewrite; then, per index page,
the median and longest of those waits; and each connection of uv's the memo accepts, with
how many more were then waiting in its listening socket's queue (Linux's
``/proc/net/tcp``: its receive queue), the longest queue and when it was drained.
Nothing is changed but the timestamps taken.

    .venv/bin/python benchmarks/plan_timeline.py vllm==0.20.0 torch==2.9.0 [--all]

The target is the benchmarks' (``--python 3.12 --platform linux-x86_64 --driver
590.48.01 --index pypi``); ``--all`` prints every event, not only the plan's milestones.
"""

from __future__ import annotations

import contextlib
import os
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TARGET = ["--python", "3.12", "--platform", "linux-x86_64", "--driver", "590.48.01"]


def _process_start() -> float:
    """The wall-clock time this process started (its start tick against the uptime)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    up = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - (up - ticks / os.sysconf("SC_CLK_TCK"))


START = _process_start()
EVENTS: list[tuple[float, int, str]] = []


def event(what: str) -> None:
    EVENTS.append((time.time() - START, threading.get_ident(), what))


def _wrap(owner: Any, name: str, before: Callable[..., str], after: str = "") -> None:
    """``owner.name`` timestamped: ``before(*args)`` on entry, ``after`` (or the same
    text with "end") on exit."""
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        text = before(*args)
        event(text)
        try:
            return original(*args, **kwargs)
        finally:
            event(after or f"end {text}")

    setattr(owner, name, wrapped)


def _instrument() -> None:
    from cudaup.net.http import HttpClient
    from cudaup.plan import index_memo, ramp

    def served(memo: object, request: Any, method: str) -> str:
        return f"uv {method} {request.path.split('/', 2)[-1][:80]}"

    _wrap(index_memo.IndexMemo, "serve", served)
    _wrap(index_memo.IndexMemo, "_start", lambda *_: "memo start")
    _wrap(HttpClient, "get", lambda _client, url, *_: f"upstream get {url}")
    original_slot = ramp.Ramp.slot

    @contextlib.contextmanager
    def slot(self: ramp.Ramp) -> Iterator[None]:
        event("slot wait")
        with original_slot(self):
            event("slot got")
            yield

    ramp.Ramp.slot = slot  # type: ignore[method-assign]
    accept = socketserver.TCPServer.get_request

    def get_request(server: socketserver.TCPServer) -> tuple[Any, Any]:
        accepted = accept(server)
        event(f"accepted, {_waiting(server.socket)} waiting")
        return accepted

    socketserver.TCPServer.get_request = get_request  # type: ignore[assignment,method-assign]
    popen_init, popen_wait = subprocess.Popen.__init__, subprocess.Popen.wait

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        popen_init(self, args, *rest, **kwargs)
        event(f"spawn {self.pid}: {' '.join(map(str, args))[:90]}")

    exited: set[int] = set()

    def wait(self: subprocess.Popen[Any], *rest: Any, **kwargs: Any) -> int:
        code = popen_wait(self, *rest, **kwargs)
        if self.pid not in exited:  # waited for more than once (communicate, then wait)
            exited.add(self.pid)
            event(f"exit {self.pid}: {code}")
        return code

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen.wait = wait  # type: ignore[method-assign]


def _waiting(listener: Any) -> int:
    """Connections waiting to be accepted by ``listener`` (a listening IPv4 socket)."""
    port = f":{listener.getsockname()[1]:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(port) and fields[3] == "0A":  # 0A: listening
            return int(fields[4].split(":")[1], 16)
    return -1


def _accept_queue() -> str:
    """The longest queue of uv's connections waiting for the memo, and when it emptied."""
    waits = [(at, int(what.split()[1])) for at, _t, what in EVENTS if what.startswith("accepted")]
    if not waits:
        return "no connection accepted"
    longest = max(waits, key=lambda wait: wait[1])
    drained = next((at for at, count in waits if at > longest[0] and count == 0), waits[-1][0])
    return (
        f"{len(waits)} connections accepted; at most {longest[1]} waiting ({longest[0]:.3f} s), "
        f"none from {drained:.3f} s"
    )


def _page_waits() -> str:
    """Per index page uv asked for: its wait for a slot, its upstream fetch, its answer's
    rewrite and sending (median and longest of each)."""
    threads: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for at, thread, what in EVENTS:
        threads[thread].append((at, what))
    waits: dict[str, list[float]] = defaultdict(list)
    for events in threads.values():
        page: dict[str, float] = {}
        for at, what in events:
            if what.startswith("uv GET i/"):
                page = {"in": at}
            elif page and what == "slot got":
                page.setdefault("slot", at)
            elif page and what.startswith("upstream get"):
                page["get"] = at
            elif page and what.startswith("end upstream get"):
                page["got"] = at
            elif page and what.startswith("end uv GET i/") and "got" in page:
                waits["slot"].append(page.get("slot", page["in"]) - page["in"])
                waits["fetch"].append(page["got"] - page["get"])
                waits["rewrite and send"].append(at - page["got"])
                page = {}
    return (
        "; ".join(
            f"{name} median {statistics.median(v):.3f} s, longest {max(v):.3f} s"
            for name, v in waits.items()
        )
        + f" ({len(waits['slot'])} pages)"
    )


def main() -> int:
    everything = "--all" in sys.argv
    packages = [a for a in sys.argv[1:] if a != "--all"]
    os.environ["CUDAUP_CACHE_DIR"] = tempfile.mkdtemp(prefix="cudaup-timeline-")
    event("interpreter up")
    from cudaup.cli.main import main as cudaup_main

    _instrument()
    event("imported")
    with Path(os.devnull).open("w") as quiet, contextlib.redirect_stdout(quiet):
        code = cudaup_main(["plan", *packages, *TARGET, "--index", "pypi"])
    event(f"plan returned {code}")
    milestones = ("interpreter", "imported", "memo start", "spawn", "exit", "plan returned")
    for at, _thread, what in EVENTS:
        if everything or what.startswith(milestones):
            print(f"{at:7.3f}  {what}")
    uv_asks = [at for at, _t, what in EVENTS if what.startswith("uv ")]
    if uv_asks:
        print(f"uv's requests to the memo: {len(uv_asks)}, from {min(uv_asks):.3f} s")
        print(_page_waits())
        print(_accept_queue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
