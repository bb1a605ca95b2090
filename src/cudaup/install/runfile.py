"""Running NVIDIA's runfile installer silently into a staging directory.

Whether a silent install with a non-default ``--toolkitpath`` re-creates
``/usr/local/cuda`` is not documented, so the link is recorded before and put
back if the installer changed it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import subprocess
import tempfile
from pathlib import Path

from cudaup.errors import ExternalToolError
from cudaup.machine.sysroot import SystemRoot
from cudaup.util import processes

RUNFILE_TIMEOUT = 3600.0


def run_runfile(runfile: Path, target: Path, log_dir: Path, root: SystemRoot) -> Path:
    """Run NVIDIA's runfile silently into ``target``; the log path.

    Whether a silent install with a non-default ``--toolkitpath`` re-creates
    ``/usr/local/cuda`` is not documented, so the link is recorded before and
    put back if the installer changed it.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{runfile.name}.{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}.log"
    link_before = root.readlink("/usr/local/cuda")
    with tempfile.TemporaryDirectory(prefix="cudaup-runfile-", dir=target.parent) as tmp:
        argv = [
            "sh", str(runfile), "--silent", "--toolkit", f"--toolkitpath={target}",
            f"--defaultroot={target}", "--no-man-page", "--override", f"--tmpdir={tmp}",
        ]  # fmt: skip
        with log.open("w") as handle:
            handle.write("$ " + " ".join(argv) + "\n")
            handle.flush()
            try:
                done = processes.run(
                    argv,
                    timeout=RUNFILE_TIMEOUT,
                    text=False,
                    environment={**os.environ, "TMPDIR": tmp},
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                )
            except subprocess.TimeoutExpired:
                raise ExternalToolError(
                    f"the installer did not finish within {RUNFILE_TIMEOUT:.0f} s; log: {log}"
                ) from None
    link_after = root.readlink("/usr/local/cuda")
    if link_after != link_before:
        link = root.path("/usr/local/cuda")
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        if link_before is not None:
            link.symlink_to(link_before)
    if done.returncode != 0:
        raise ExternalToolError(f"the installer failed (exit {done.returncode}); its log: {log}")
    return log
