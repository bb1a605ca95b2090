"""The console script on a real pseudo-terminal: progress frames, where they go, colour.

Each test runs the installed ``cudaup`` in a subprocess whose stderr (or stdout) is
the slave side of a pty set to 80 columns with ``TIOCSWINSZ``, downloading from the
fault server on loopback throttled to a few hundred KiB/s, and reads every byte the
terminal received.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

from tests.faultserver import Fault, FaultServer, payload

WHEEL = "nvidia_cuda_nvcc_cu12-12.8.93-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
BODY = payload(2 * 1024 * 1024, seed=5)
#: Every escape sequence a terminal interprets (cursor moves, erasing, colours).
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: Select Graphic Rendition: colours and text styles.
SGR = re.compile(r"\x1b\[[0-9;]*m")


def cudaup() -> str:
    return str(Path(sys.executable).parent / "cudaup")


@dataclass
class Ran:
    code: int
    terminal: str  # what the pty received, escape sequences and all
    stdout: str  # what went to the file when stdout was not the pty
    stderr: str  # what went to the file when stderr was not the pty

    def lines(self) -> list[str]:
        """What the terminal shows, one entry per line drawn (frames included)."""
        text = CSI.sub("", self.terminal)
        return [line for line in re.split(r"[\r\n]", text) if line.strip()]


def on_terminal(
    argv: list[str],
    tmp_path: Path,
    *,
    on_pty: str,
    columns: int = 80,
    env: dict[str, str] | None = None,
) -> Ran:
    """Run ``cudaup argv`` with ``on_pty`` ("stderr" or "stdout") on an 80-column pty
    and the other stream in a file; stdin is the pty too, as in a shell."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES", "NO_COLOR"}}
    environment.update({"TERM": "xterm-256color", **(env or {})})
    out_file, err_file = tmp_path / "stdout", tmp_path / "stderr"
    with out_file.open("w") as out, err_file.open("w") as err:
        process = subprocess.Popen(
            [cudaup(), *argv],
            stdin=slave,
            stdout=slave if on_pty == "stdout" else out,
            stderr=slave if on_pty == "stderr" else err,
            env=environment,
        )
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the last holder of the slave side closed it
                break
            if not data:
                break
            received += data
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return Ran(code, received.decode(), out_file.read_text(), err_file.read_text())


def _throttled(server: FaultServer) -> list[str]:
    server.add("/" + WHEEL, BODY, Fault(rate=400 * 1024))
    sha256 = hashlib.sha256(BODY).hexdigest()
    return [server.url + "/" + WHEEL, "--sha256", sha256, "--connections", "1"]


def test_the_bar_keeps_every_column_on_80_columns(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    ran = on_terminal(
        ["download", *_throttled(fault_server), "-o", str(tmp_path / "dl"), "-v"],
        tmp_path,
        on_pty="stderr",
        env={"CUDAUP_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert ran.code == 0, ran.terminal
    assert (tmp_path / "dl" / WHEEL).read_bytes() == BODY
    assert "sha256 verified" in ran.stdout and "MiB/s" in ran.stdout  # the summary: stdout
    lines = ran.lines()
    frames = [line for line in lines if not line.startswith("cudaup: ")]
    assert all(len(frame) <= 80 for frame in frames), max(frames, key=len)
    assert len(frames) >= 3, lines
    for frame in frames:
        # the name, shortened in the middle, then bar, bytes, rate and time left; a frame
        # that says "verifying, NN %" widens the state, and the name gives way a little more
        assert frame.startswith("nvidia_cuda_n") and "…" in frame and ".whl " in frame
        assert re.search(r" \d+\.\d/2\.0 MiB ", frame), frame
    assert any(re.search(r"\d+(\.\d)? (KiB|MiB)/s +\d:\d\d:\d\d$", f) for f in frames), frames
    assert frames[-1].endswith(" done") and "2.0/2.0 MiB" in frames[-1]
    assert "MB/s" not in ran.terminal and "kB/s" not in ran.terminal  # binary units only
    assert SGR.search(ran.terminal)  # a terminal gets colour by default
    # -v: what was fetched, printed above the bar whole (the terminal wraps it), never
    # through the bar
    log = [line for line in lines if line.startswith("cudaup: ")]
    assert any(re.fullmatch(rf"cudaup: GET \S+/{WHEEL} \[bytes=0-0\] → 206 .*", x) for x in log)


def test_a_stderr_that_is_no_terminal_gets_plain_lines(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """`cudaup download … 2>log` in a terminal: stdout is the terminal, the log gets
    lines, never frames."""
    ran = on_terminal(
        ["download", *_throttled(fault_server), "-o", str(tmp_path / "dl")],
        tmp_path,
        on_pty="stdout",
        env={"CUDAUP_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert ran.code == 0, ran.stderr
    assert f"{WHEEL}: starting, 2.0 MiB" in ran.stderr and f"{WHEEL}: done" in ran.stderr
    assert re.search(rf"{re.escape(WHEEL)}: \d+% of 2\.0 MiB, [\d.]+ (KiB|MiB)/s", ran.stderr)
    assert "\x1b" not in ran.stderr and "\r" not in ran.stderr and "━" not in ran.stderr
    assert "sha256 verified" in ran.lines()[-1]  # the summary on the terminal


def test_no_color_and_the_color_flag(fault_server: FaultServer, tmp_path: Path) -> None:
    args = ["download", *_throttled(fault_server), "-o", str(tmp_path / "dl")]
    cache = {"CUDAUP_CACHE_DIR": str(tmp_path / "cache")}
    plain = on_terminal(args, tmp_path, on_pty="stderr", env={**cache, "NO_COLOR": "1"})
    assert plain.code == 0 and "━" in plain.terminal and not SGR.search(plain.terminal)
    # the error line: red on a terminal, plain with NO_COLOR or --color never, red with
    # --color always even into a file
    bad = ["resolve", "thirteen"]
    red = "cudaup: \x1b[1;31merror:\x1b[0m 'thirteen' is not a CUDA version request"
    assert red in on_terminal(bad, tmp_path, on_pty="stderr").terminal
    assert (
        "cudaup: error: 'thirteen'"
        in on_terminal(bad, tmp_path, on_pty="stderr", env={"NO_COLOR": "1"}).terminal
    )
    never = on_terminal([*bad, "--color", "never"], tmp_path, on_pty="stderr")
    assert "cudaup: error: 'thirteen'" in never.terminal and not SGR.search(never.terminal)
    forced = on_terminal(
        ["--color", "always", *bad], tmp_path, on_pty="stdout", env={"NO_COLOR": "1"}
    )
    assert forced.code == 2 and red in forced.stderr
