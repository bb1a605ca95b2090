"""The progress bar on a terminal (rich), laid out by :mod:`cudaup.cli.progress`'s rules:
a row keeps its bar, bytes, rate and time left on 80 columns, the name gives way first."""

from __future__ import annotations

import os
import sys
import threading
from typing import IO, Any

from rich.console import Console, ConsoleDimensions
from rich.progress import Progress, ProgressColumn
from rich.progress_bar import ProgressBar
from rich.table import Column
from rich.text import Text

from cudaup.cli import output
from cudaup.cli.progress import (
    GAPS,
    MIN_BAR,
    MIN_NAME,
    RATE_WIDTH,
    STATE_WIDTH,
    bytes_text,
    bytes_width,
    eta_text,
    fit,
    middle_ellipsis,
    rate_text,
    verifying_text,
)
from cudaup.download import ProgressEvent


def _console(stream: IO[str], color: bool) -> Any:
    """A rich console on ``stream``, as wide as that terminal (rich would ask stdin's)."""

    class TerminalConsole(Console):
        @property
        def size(self) -> ConsoleDimensions:
            try:
                columns, lines = os.get_terminal_size(self.file.fileno())
            except (AttributeError, ValueError, OSError):
                return super().size
            return ConsoleDimensions(columns or 80, lines or 25)

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            self._width, self._height = new_size

    return TerminalConsole(
        file=stream,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
    )


class RichProgress:
    """A live row per file: name, bar, bytes, rate, time left (rich), for terminals."""

    def __init__(self, stream: IO[str] | None = None, *, color: bool = True) -> None:

        console = _console(stream if stream is not None else sys.stderr, color)

        #: the widths of the name, the bar, the bytes and the state: measured once per
        #: refresh, when rich asks the first column for its width (it asks every column
        #: before any row); the state widens while a row says "verifying, 62 %"
        widths = [MIN_NAME, MIN_BAR, len("1023.9 MiB"), STATE_WIDTH]

        def measure() -> None:
            progress = getattr(self, "_progress", None)  # rich measures while it is made
            tasks = progress.tasks if progress is not None else []
            sized = bytes_width([int(t.total) if t.total is not None else None for t in tasks])
            longest = max((len(t.description) for t in tasks), default=0)
            told = max((len(str(t.fields.get("state") or "")) for t in tasks), default=0)
            stated = max(STATE_WIDTH, told)
            name, bar = fit(console.width, longest, sized + RATE_WIDTH + stated + GAPS)
            widths[:] = [name, bar, sized, stated]

        class Name(ProgressColumn):
            def get_table_column(self) -> Column:
                measure()
                return Column(width=widths[0], no_wrap=True)

            def render(self, task: Any) -> Text:
                return Text(middle_ellipsis(task.description, widths[0]))

        class Bar(ProgressColumn):
            def get_table_column(self) -> Column:
                return Column(width=widths[1], no_wrap=True)

            def render(self, task: Any) -> ProgressBar:
                return ProgressBar(
                    total=max(0, task.total) if task.total is not None else None,
                    completed=max(0, task.completed),
                    width=widths[1],
                    pulse=not task.started,
                    animation_time=task.get_time(),
                )

        class Fixed(ProgressColumn):
            def __init__(self, width: int | str, text: Any, style: str) -> None:
                super().__init__()
                self.width, self.text, self.style = width, text, style

            def get_table_column(self) -> Column:
                # a number, or which measured width: "bytes" or "state"
                measured = {"bytes": widths[2], "state": widths[3]}
                width = self.width if isinstance(self.width, int) else measured[self.width]
                return Column(width=width, no_wrap=True, justify="right")

            def render(self, task: Any) -> Text:
                return Text(self.text(task), style=self.style)

        def state(task: Any) -> str:
            if task.fields.get("state"):
                return str(task.fields["state"])
            return "done" if task.finished else eta_text(task.time_remaining)

        self._progress = Progress(
            Name(),
            Bar(),
            Fixed("bytes", lambda t: bytes_text(t.completed, t.total), "progress.download"),
            Fixed(
                RATE_WIDTH, lambda t: rate_text(t.finished_speed or t.speed), "progress.data.speed"
            ),
            Fixed("state", state, "progress.remaining"),
            console=console,
        )
        self._tasks: dict[str, Any] = {}
        self._lock = threading.Lock()

    def print_above(self, line: str) -> None:
        """``line`` above the bars, whole: the terminal wraps it, not rich at a space."""
        self._progress.console.print(
            line, soft_wrap=True, markup=False, highlight=False, emoji=False
        )

    def __enter__(self) -> RichProgress:
        self._progress.start()
        output.current().print_above = self.print_above
        return self

    def __exit__(self, *exc: object) -> None:
        output.current().print_above = None
        self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            task = self._tasks.get(event.filename)
            if task is None:
                task = self._progress.add_task(
                    event.filename, total=event.total, completed=event.done, state=""
                )
                self._tasks[event.filename] = task
            if event.kind in {"notice", "discarded"} and event.message:
                self.print_above(f"{event.filename}: {event.message}")
            if event.kind == "unpacked":
                # The bar is full once the bytes are in; the last column says when it is
                # unpacked too.
                self._progress.update(task, state="unpacked")
                return
            if event.kind == "verifying":
                # Every byte is in (the bar stays full); the hash is not done: never "done"
                # before the verdict.
                self._progress.update(task, state=verifying_text(event))
                return
            self._progress.update(task, completed=event.done, total=event.total)
            if event.kind != "notice":  # bytes move again, or the verdict: no longer verifying
                self._progress.update(task, state="")
