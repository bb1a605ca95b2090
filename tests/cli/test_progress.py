from __future__ import annotations

import fcntl
import io
import os
import struct
import termios
from collections.abc import Iterator
from typing import IO

import pytest
from rich.console import Console

from cudaup.cli import output
from cudaup.cli.bars import RichProgress
from cudaup.cli.progress import (
    MAX_BAR,
    MIN_BAR,
    RATE_WIDTH,
    STATE_WIDTH,
    NoProgress,
    PlainProgress,
    bytes_text,
    bytes_width,
    display_for,
    eta_text,
    fit,
    middle_ellipsis,
    rate_text,
)
from cudaup.download import ProgressEvent

WHEEL = "nvidia_cuda_nvcc_cu12-12.8.93-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"


def test_plain_lines_every_ten_percent() -> None:
    out = io.StringIO()
    display = PlainProgress(out)
    display(ProgressEvent("cuda.run", "start", 0, 1000))
    for done in range(0, 1001, 50):
        display(ProgressEvent("cuda.run", "advance", done, 1000))
    display(ProgressEvent("cuda.run", "notice", 500, 1000, "resuming at 500 of 1000 bytes"))
    display(ProgressEvent("cuda.run", "done", 1000, 1000))
    display(ProgressEvent("cuda.run", "unpacked", 1000, 1000))
    lines = out.getvalue().splitlines()
    assert lines[0] == "cuda.run: starting, 1000 B"
    percent = [line for line in lines if "%" in line]
    assert 9 <= len(percent) <= 11 and percent[-1].startswith("cuda.run: 100% of 1000 B")
    assert "cuda.run: resuming at 500 of 1000 bytes" in lines and lines[-2] == "cuda.run: done"
    assert lines[-1] == "cuda.run: unpacked"


@pytest.fixture
def terminal() -> Iterator[IO[str]]:
    """The slave side of a real pseudo-terminal, as a text stream (isatty() is true)."""
    master, slave = os.openpty()
    stream = os.fdopen(slave, "w", encoding="utf-8")
    try:
        yield stream
    finally:
        stream.close()
        os.close(master)


def test_the_choice_is_taken_from_the_stream_drawn_on(terminal: IO[str]) -> None:
    output.begin()
    assert isinstance(display_for(quiet=True, stream=terminal).display, NoProgress)
    assert isinstance(display_for(quiet=False, stream=io.StringIO()).display, PlainProgress)
    assert isinstance(display_for(quiet=False, stream=terminal).display, RichProgress)


def test_a_dumb_terminal_gets_lines(terminal: IO[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(display_for(quiet=False, stream=terminal).display, PlainProgress)


@pytest.mark.parametrize("columns", [50, 120])
def test_the_bar_measures_the_terminal_it_draws_on(terminal: IO[str], columns: int) -> None:
    """Not stdin's or stdout's, which rich would ask first."""
    fcntl.ioctl(terminal.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    assert RichProgress(terminal)._progress.console.width == columns


def test_every_display_feeds_the_ledger(terminal: IO[str]) -> None:
    run = output.begin()
    with display_for(quiet=True, stream=terminal) as display:  # --quiet records too
        display(ProgressEvent("a.run", "start", 0, 10))
        display(ProgressEvent("b.run", "start", 0, 10))
        display(ProgressEvent("b.run", "done", 10, 10))
    assert run.ledger.started == {"a.run", "b.run"} and run.ledger.finished == {"b.run"}
    advice = run.ledger.after_interrupt()
    assert advice is not None and advice.startswith("run the same command again to resume")


def test_the_interrupt_advice_says_what_is_true() -> None:
    ledger = output.Ledger()
    assert ledger.after_interrupt() is None  # nothing started: no advice at all
    ledger.record(ProgressEvent("cuda.run", "start", 0, 10))
    ledger.record(ProgressEvent("cuda.run", "discarded", 0, 10, "deleted"))
    advice = ledger.after_interrupt()
    assert advice == (
        "cuda.run: the partial download was deleted (a later run cannot resume it); "
        "run the same command again to start over"
    )
    ledger.record(ProgressEvent("big.tar.xz", "start", 0, 10))
    assert ledger.after_interrupt() == (
        "run the same command again to resume (kept: the partial big.tar.xz; cuda.run starts over)"
    )
    ledger.record(ProgressEvent("cuda.run", "start", 0, 10))  # a new attempt keeps its bytes
    assert "to resume" in (ledger.after_interrupt() or "")
    ledger.record(ProgressEvent("cuda.run", "done", 10, 10))
    ledger.record(ProgressEvent("big.tar.xz", "done", 10, 10))
    assert "the 2 finished download(s) are kept" in (ledger.after_interrupt() or "")


def test_rich_display_accepts_events(terminal: IO[str]) -> None:
    with RichProgress(terminal) as display:
        display(ProgressEvent("a.run", "start", 0, 10))
        display(ProgressEvent("a.run", "advance", 5, 10))
        display(ProgressEvent("a.run", "notice", 5, 10, "hello [not markup]"))
        display(ProgressEvent("a.run", "done", 10, 10))
        display(ProgressEvent("a.run", "unpacked", 10, 10))
        [task] = display._progress.tasks
        assert task.completed == 10 and task.fields["state"] == "unpacked"


def row(display: RichProgress) -> str:
    """The rows the bar draws now, as text on 80 columns (through its real columns)."""
    progress = display._progress
    drawn = io.StringIO()
    Console(file=drawn, width=80, color_system=None).print(
        progress.make_tasks_table(progress.tasks)
    )
    return drawn.getvalue()


def test_the_bar_says_verifying_until_the_verdict(terminal: IO[str]) -> None:
    fcntl.ioctl(terminal.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    with RichProgress(terminal) as display:
        display(ProgressEvent(WHEEL, "start", 0, 4 * 2**30))
        display(ProgressEvent(WHEEL, "advance", 4 * 2**30, 4 * 2**30))  # the last byte is here
        display(ProgressEvent(WHEEL, "verifying", int(2.5 * 2**30), 4 * 2**30))
        drawn = row(display)
        assert "verifying, 62 %" in drawn and "done" not in drawn, drawn
        assert "4.0/4.0 GiB" in drawn and max(map(len, drawn.splitlines())) <= 80
        display(ProgressEvent(WHEEL, "verifying", 4 * 2**30 - 1, 4 * 2**30))
        assert "verifying, 99 %" in row(display)
        display(ProgressEvent(WHEEL, "done", 4 * 2**30, 4 * 2**30))
        drawn = row(display)
        assert "done" in drawn and "verifying" not in drawn, drawn


def test_plain_lines_say_verifying_until_the_verdict() -> None:
    out = io.StringIO()
    display = PlainProgress(out)
    display(ProgressEvent("cuda.run", "start", 0, 1000))
    display(ProgressEvent("cuda.run", "advance", 1000, 1000))
    for hashed in range(0, 1000, 50):
        display(ProgressEvent("cuda.run", "verifying", hashed, 1000))
    display(ProgressEvent("cuda.run", "done", 1000, 1000))
    lines = out.getvalue().splitlines()
    verifying = [line for line in lines if "verifying" in line]
    assert (
        verifying[0] == "cuda.run: verifying, 0 %" and verifying[-1] == "cuda.run: verifying, 90 %"
    )
    assert len(verifying) == 10 and lines[-1] == "cuda.run: done"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (512, "512 B/s"),
        (812.5 * 1024, "812 KiB/s"),
        (99.94 * 1024, "99.9 KiB/s"),
        (1023.9 * 2**20, "1024 MiB/s"),
        (1.5 * 2**30, "1.5 GiB/s"),
    ],
)
def test_rates_are_binary_and_fit_their_column(value: float | None, text: str) -> None:
    assert rate_text(value) == text and len(text) <= RATE_WIDTH


def test_bytes_are_shown_in_the_unit_of_the_total() -> None:
    assert bytes_text(512 * 2**20, 4 * 2**30) == "0.5/4.0 GiB"
    assert bytes_text(900, 1000) == "900/1000 B"
    assert bytes_text(3 * 2**20, None) == "3.0 MiB"
    assert bytes_width([3 * 2**20, 4302469087]) == len("4.0/4.0 GiB")
    assert bytes_width([1023 * 2**20 + 900 * 2**10]) == len("1023.9/1023.9 MiB")


def test_time_left() -> None:
    assert eta_text(None) == "-:--:--" and eta_text(83.4) == "0:01:23"
    assert eta_text(36000) == "10:00:00" and eta_text(400 * 3600) == ">99 h"
    assert all(len(eta_text(s)) <= STATE_WIDTH for s in (None, 0, 36000, 99 * 3600, 10**9))


def test_names_lose_their_middle() -> None:
    short = middle_ellipsis(WHEEL, 27)
    assert len(short) == 27 and short.startswith("nvidia_cuda_n") and short.endswith(".whl")
    assert short.count("…") == 1
    assert middle_ellipsis("cuda.run", 27) == "cuda.run"
    assert middle_ellipsis(WHEEL, 1) == "…"


@pytest.mark.parametrize("columns", [80, 100, 132, 200])
def test_a_row_fits_the_terminal_with_every_column(columns: int) -> None:
    fixed = bytes_width([4 * 2**30]) + RATE_WIDTH + STATE_WIDTH + 4
    name, bar = fit(columns, len(WHEEL), fixed)
    assert name + bar + fixed <= columns
    assert MIN_BAR <= bar <= MAX_BAR and name >= 12
    if columns == 80:  # the name gives way first: the bar keeps more than its minimum
        assert name < len(WHEEL) and bar > MIN_BAR
    if columns == 200:
        assert name == len(WHEEL) and bar == MAX_BAR
    # a short name leaves the room to the bar
    short, wide = fit(columns, 8, fixed)
    assert short == 12 and wide == min(MAX_BAR, columns - fixed - 12)
