"""Progress displays for the command line: a rich bar on a terminal, plain lines otherwise.

The downloader only calls a callback with :class:`~cudaup.download.ProgressEvent`;
these classes are the CLI's renderers of it.  They write to stderr, so that
``--json`` output on stdout stays clean, and so whether to draw a bar is asked of
stderr: ``cudaup download … 2>log`` writes plain lines into the log, never frames.

A bar's row keeps its bar, bytes, rate and time left on an 80-column terminal: the
file name gives way first, shortened in the middle (``nvidia_cuda_nv…_x86_64.whl``).
Every size is in binary units (KiB, MiB, MiB/s).  Every event is also recorded in
the run's :class:`~cudaup.cli.output.Ledger`, which says after Ctrl-C whether
anything can be resumed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any, Protocol

from cudaup.cli import output
from cudaup.core.units import binary_size
from cudaup.download import ProgressEvent

#: The widths of a row's rate ("999.9 KiB/s", "1023 MiB/s") and state (an ETA
#: "0:01:23", "done", "unpacked") columns; the bytes column is as wide as its
#: largest total needs ("3.0/3.0 GiB").
RATE_WIDTH, STATE_WIDTH = 11, 8
#: Between the five columns of a row.
GAPS = 4
#: A name gives way to the bar down to this many characters ...
MIN_NAME = 12
#: ... and takes at most this many while the bar is shorter than :data:`MAX_BAR`.
NAME_SHARE = 32
MIN_BAR, MAX_BAR = 10, 40


def rate_text(per_second: float | None) -> str:
    """``812.5 KiB/s``, ``112 MiB/s`` (no decimal from 100 up): at most 11 characters."""
    if per_second is None:
        return ""
    text = binary_size(per_second)
    number, unit = text.split(" ")
    if unit != "B" and float(number) >= 100:
        text = f"{float(number):.0f} {unit}"
    return text + "/s"


def bytes_text(done: float, total: float | None) -> str:
    """``1.2/4.0 GiB`` (both in the total's unit), or ``1.2 GiB`` when the total is unknown."""
    if total is None:
        return binary_size(done)
    unit, scale = "B", 1.0
    for name in ("KiB", "MiB", "GiB", "TiB"):
        if total < scale * 1024:
            break
        unit, scale = name, scale * 1024
    if unit == "B":
        return f"{done:.0f}/{total:.0f} B"
    return f"{done / scale:.1f}/{total / scale:.1f} {unit}"


def verifying_text(event: ProgressEvent) -> str:
    """``verifying, 62 %``: how much of a downloaded file the hash has read."""
    percent = event.done * 100 // event.total if event.total else 0
    return f"verifying, {percent} %"


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    if hours > 99:
        return ">99 h"
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def middle_ellipsis(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters, its middle replaced by ``…``."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return name[:head] + "…" + (name[-tail:] if tail else "")


def bytes_width(totals: list[int | None]) -> int:
    """The bytes column's width: the longest text its files' totals can give."""
    return max(
        (len(bytes_text(t, t)) if t is not None else len("1023.9 MiB") for t in totals),
        default=len("1023.9 MiB"),
    )


def fit(columns: int, longest_name: int, fixed: int) -> tuple[int, int]:
    """The widths of the name and the bar on a terminal ``columns`` wide, when the other
    columns and the gaps take ``fixed``: the bar gets at least :data:`MIN_BAR`; the name
    up to :data:`NAME_SHARE` (more once the bar has :data:`MAX_BAR`), never less than
    :data:`MIN_NAME`; the bar whatever the name does not need, up to :data:`MAX_BAR`."""
    room = columns - fixed
    name = min(longest_name, max(NAME_SHARE, room - MAX_BAR), room - MIN_BAR)
    name = max(MIN_NAME, name)
    bar = max(1, min(MAX_BAR, room - name))
    return name, bar


class Display(Protocol):
    """What a progress display is: a context around the run, called with each event."""

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
    def __call__(self, event: ProgressEvent) -> None: ...


class PlainProgress:
    """One line per 10 % (or 10 s) of each file, plus notices: for logs and pipes."""

    def __init__(self, stream: IO[str] | None = None, step: int = 10, every: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.step, self.every = step, every  # percent, seconds
        # name -> (next percent to report, time of the last line, bytes at start)
        self._state: dict[str, tuple[int, float, int]] = {}
        # name -> (next percent of the hash to report, time of the last line)
        self._verifying: dict[str, tuple[int, float]] = {}
        self._started: dict[str, float] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            now = time.monotonic()
            name = event.filename
            if event.kind == "start":
                self._started[name] = now
                self._state[name] = (self.step, now, event.done)
                total = binary_size(event.total) if event.total is not None else "unknown size"
                self._line(f"{name}: starting, {total}")
            elif event.kind in {"notice", "discarded"}:
                self._line(f"{name}: {event.message}")
            elif event.kind == "advance" and event.total:
                threshold, last, base = self._state.get(name, (self.step, now, 0))
                percent = event.done * 100 // event.total
                if percent >= threshold or now - last >= self.every:
                    elapsed = max(now - self._started.get(name, now), 1e-6)
                    rate = (event.done - base) / elapsed
                    self._line(
                        f"{name}: {percent}% of {binary_size(event.total)}, {binary_size(rate)}/s"
                    )
                    self._state[name] = ((percent // self.step + 1) * self.step, now, base)
            elif event.kind == "verifying":
                threshold, last = self._verifying.get(name, (0, now))
                percent = event.done * 100 // event.total if event.total else 0
                if percent >= threshold or now - last >= self.every:
                    self._line(f"{name}: {verifying_text(event)}")
                    self._verifying[name] = ((percent // self.step + 1) * self.step, now)
            elif event.kind == "done":
                self._line(f"{name}: done{', ' + event.message if event.message else ''}")
            elif event.kind == "unpacked":
                self._line(f"{name}: unpacked{', ' + event.message if event.message else ''}")


class NoProgress:
    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, event: ProgressEvent) -> None:
        return None


class Recorded:
    """A display whose events the run's ledger sees too (what Ctrl-C's message reads)."""

    def __init__(self, display: Display, ledger: output.Ledger) -> None:
        self.display = display
        self._ledger = ledger

    def __enter__(self) -> Recorded:
        self.display.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.display.__exit__(*exc)

    def __call__(self, event: ProgressEvent) -> None:
        self._ledger.record(event)
        self.display(event)


def display_for(*, quiet: bool, stream: IO[str] | None = None) -> Recorded:
    """The display for this run: none when ``quiet``, a bar when ``stream`` (default
    stderr, where every display writes) is a terminal, plain lines otherwise."""
    stream = stream if stream is not None else sys.stderr
    run = output.current()
    display: Display
    if quiet:
        display = NoProgress()
    elif _is_terminal(stream):
        # rich (~40 ms of imports) loads only when a bar is drawn.
        from cudaup.cli.bars import RichProgress  # noqa: PLC0415

        display = RichProgress(stream, color=run.colors(stream))
    else:
        display = PlainProgress(stream)
    return Recorded(display, run.ledger)


def _is_terminal(stream: IO[str]) -> bool:
    """Whether a bar can be drawn on ``stream``: a terminal that can move its cursor
    (``TERM=dumb``, an editor's shell buffer, cannot redraw a row: it gets lines)."""
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
