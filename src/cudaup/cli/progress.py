"""Progress displays for the command line: a rich bar on a terminal, plain lines otherwise.

The downloader only calls a callback with :class:`~cudaup.download.ProgressEvent`;
these classes are the CLI's renderers of it.  Both write to stderr, so that
``--json`` output on stdout stays clean.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

from cudaup.download import ProgressEvent


def _size(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


class PlainProgress:
    """One line per 10 % (or 10 s) of each file, plus notices: for logs and pipes."""

    def __init__(self, stream: IO[str] | None = None, step: int = 10, every: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.step, self.every = step, every  # percent, seconds
        # name -> (next percent to report, time of the last line, bytes at start)
        self._state: dict[str, tuple[int, float, int]] = {}
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
                total = _size(event.total) if event.total is not None else "unknown size"
                self._line(f"{name}: starting, {total}")
            elif event.kind == "notice":
                self._line(f"{name}: {event.message}")
            elif event.kind == "advance" and event.total:
                threshold, last, base = self._state.get(name, (self.step, now, 0))
                percent = event.done * 100 // event.total
                if percent >= threshold or now - last >= self.every:
                    elapsed = max(now - self._started.get(name, now), 1e-6)
                    rate = (event.done - base) / elapsed
                    self._line(f"{name}: {percent}% of {_size(event.total)}, {_size(rate)}/s")
                    self._state[name] = ((percent // self.step + 1) * self.step, now, base)
            elif event.kind == "done":
                self._line(f"{name}: done{', ' + event.message if event.message else ''}")
            elif event.kind == "unpacked":
                self._line(f"{name}: unpacked{', ' + event.message if event.message else ''}")


class RichProgress:
    """A live bar per file with bytes, rate and ETA (rich), for terminals."""

    def __init__(self) -> None:
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._tasks: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            task = self._tasks.get(event.filename)
            if task is None:
                task = self._progress.add_task(
                    event.filename, total=event.total, completed=event.done
                )
                self._tasks[event.filename] = task
            if event.kind == "notice" and event.message:
                self._progress.console.print(f"{event.filename}: {event.message}")
            if event.kind == "unpacked":
                # The bar is full once the bytes are in; the name says when it is unpacked too.
                self._progress.update(task, description=f"{event.filename} [green]unpacked")
                return
            self._progress.update(task, completed=event.done, total=event.total)


class NoProgress:
    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, event: ProgressEvent) -> None:
        return None


def display_for(*, quiet: bool, terminal: bool) -> PlainProgress | RichProgress | NoProgress:
    if quiet:
        return NoProgress()
    return RichProgress() if terminal else PlainProgress()
