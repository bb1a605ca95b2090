"""What ``uv pip install``, as a plan prints it, would install: the line resolved by uv
itself (``uv pip compile`` with the line's own requirements and indexes, nothing else)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from cudaup.plan.attempt import uv_platform
from cudaup.plan.uv import find_uv


def printed_resolution(
    uv_line: str, python: str, platform: str, cache: Path, *, default_index: str | None = None
) -> dict[str, str]:
    """``{name: version}`` uv resolves for the printed ``uv pip install …`` line."""
    words = shlex.split(uv_line)
    assert words[:3] == ["uv", "pip", "install"], uv_line
    requirements, options = [], []
    rest = iter(words[3:])
    for word in rest:
        if word.startswith("--"):
            options += [word, next(rest)]
        else:
            requirements.append(word)
    if default_index is not None and "--default-index" not in options:
        options += ["--default-index", default_index]
    argv = [
        find_uv(), "pip", "compile", "-", "--no-config", "--no-build", "--no-header", "--quiet",
        "--python-version", python, "--python-platform", uv_platform(platform),
        "--cache-dir", str(cache), *options,
    ]  # fmt: skip
    environment = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    done = subprocess.run(
        argv,
        input="\n".join(requirements) + "\n",
        capture_output=True,
        text=True,
        check=False,
        env=environment,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    found = {}
    for line in done.stdout.splitlines():
        if match := re.match(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==(\S+)", line.strip()):
            found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return found
