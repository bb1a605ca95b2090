from __future__ import annotations

import io

from cudaup.cli.progress import NoProgress, PlainProgress, RichProgress, display_for
from cudaup.download import ProgressEvent


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


def test_choice_of_display() -> None:
    assert isinstance(display_for(quiet=True, terminal=True), NoProgress)
    assert isinstance(display_for(quiet=False, terminal=False), PlainProgress)
    assert isinstance(display_for(quiet=False, terminal=True), RichProgress)


def test_rich_display_accepts_events() -> None:
    with RichProgress() as display:
        display(ProgressEvent("a.run", "start", 0, 10))
        display(ProgressEvent("a.run", "advance", 5, 10))
        display(ProgressEvent("a.run", "notice", 5, 10, "hello"))
        display(ProgressEvent("a.run", "done", 10, 10))
        display(ProgressEvent("a.run", "unpacked", 10, 10))
        [task] = display._progress.tasks
        assert task.completed == 10 and task.description.endswith("unpacked")
