"""The line rule that ``plan`` and ``upgrade`` share: the newest line the driver runs fully
wins; one it runs only under minor-version compatibility comes after every fully supported
line, or alike with ``--allow-minor-compat`` (pure: NVIDIA's table, the shipped data)."""

from __future__ import annotations

import pytest

from cudaup.core.compat import CompatTable
from cudaup.core.driver import CudaVersion, DriverVersion
from cudaup.plan.lines import Line, line_tiers
from cudaup.plan.result import minor_compat_note, passed_over
from tests.upgrade.conftest import MakeEnv
from tests.upgrade.world import upgrade

TABLE = CompatTable.load()
#: Driver 590.48.01 is 13.1.1's toolkit driver: 13.1 and older run fully, 13.2 under
#: minor-version compatibility (its toolkit driver is 595.45.04, the 13.x floor 580).
DRIVER = DriverVersion.from_text("590.48.01")


@pytest.mark.parametrize(
    ("driver", "releases", "verdict"),
    [
        ("590.48.01", ["13.1.0", "13.1.1"], "full"),
        ("590.44.01", ["13.1.0", "13.1.1"], "full"),  # 13.1.0 runs fully, 13.1.1 does not
        ("590.48.01", ["13.2.0", "13.2.1", "13.2.2"], "minor-version"),
        ("580.65.06", ["13.0.0", "13.0.1", "13.0.2"], "full"),
        ("575.57.08", ["13.0.0", "13.0.1"], "no"),  # below the 13.x floor
        ("590.48.01", ["12.8.0", "12.8.1"], "full"),  # newer drivers run older toolkits
        ("590.48.01", ["13.9.0"], "minor-version"),  # no source names its driver yet
    ],
)
def test_how_a_driver_runs_a_line(driver: str, releases: list[str], verdict: str) -> None:
    table = TABLE.with_releases(["13.9.0"], "a test list")
    support = table.line_support(DriverVersion.from_text(driver), releases)
    assert support is not None and support.verdict == verdict


def test_a_line_without_releases_and_the_reported_cuda() -> None:
    assert TABLE.line_support(DRIVER, []) is None
    # The driver's own report (NVML) wins over the table.
    reported = TABLE.line_support(DRIVER, ["13.2.0"], reported=CudaVersion(13, 2))
    assert reported is not None and reported.verdict == "full"


FULL, MINOR = "full", "minor-version"
LINES: list[Line] = [(13, 5), (13, 2), (13, 1), (13, 0), (12, 9), (12, 8)]


@pytest.mark.parametrize(
    ("support", "allow", "tiers"),
    [
        # The machine: 13.1 and older fully, 13.2 and newer under minor-version.
        (
            {(13, 5): MINOR, (13, 2): MINOR, (13, 1): FULL, (13, 0): FULL, (12, 9): FULL,
             (12, 8): FULL},
            False,
            [[(13, 1), (13, 0), (12, 9), (12, 8)], [(13, 5), (13, 2)]],
        ),
        # --allow-minor-compat: newest first, all alike.
        ({(13, 5): MINOR, (13, 2): MINOR, (13, 1): FULL}, True, [LINES]),
        # Every line fully: one group, newest first.
        (dict.fromkeys(LINES, FULL), False, [LINES]),
        # Every 13.x line only under minor-version compatibility: 12.x first.
        (
            {(13, 5): MINOR, (13, 2): MINOR, (13, 1): MINOR, (13, 0): MINOR, (12, 9): FULL,
             (12, 8): FULL},
            False,
            [[(12, 9), (12, 8)], [(13, 5), (13, 2), (13, 1), (13, 0)]],
        ),
        # No driver: nothing to tell the lines apart by.
        (dict.fromkeys(LINES), False, [LINES]),
        # Lines the driver cannot run stay with the first group: the driver check that
        # follows excludes them with its own reason.
        ({(13, 5): "no", (13, 2): MINOR}, False, [[(13, 5), (13, 1), (13, 0), (12, 9), (12, 8)],
                                                  [(13, 2)]]),
    ],
)  # fmt: skip
def test_line_tiers(support: dict[Line, str | None], allow: bool, tiers: list[list[Line]]) -> None:
    assert line_tiers(LINES, support, allow) == tiers


def test_no_lines_no_tiers() -> None:
    assert line_tiers([], {}, False) == [] and line_tiers([], {}, True) == []


def test_the_lines_passed_over_say_why() -> None:
    support = {(13, 5): MINOR, (13, 2): MINOR, (13, 1): FULL, (13, 0): FULL}
    over = passed_over((13, 0), support, DRIVER)
    assert [str(e) for e in over] == [
        f"13.5: driver {DRIVER} runs it only under minor-version compatibility, and it runs "
        "13.0 fully (--allow-minor-compat takes the newer line)",
        f"13.2: driver {DRIVER} runs it only under minor-version compatibility, and it runs "
        "13.0 fully (--allow-minor-compat takes the newer line)",
    ]
    assert all(e.kind == "driver" for e in over)
    # A line taken under minor-version compatibility passes nothing over for that reason.
    assert passed_over((13, 2), support, DRIVER) == []
    assert "13.2 is taken under minor-version compatibility (--allow-minor-compat)" in (
        minor_compat_note((13, 2), DRIVER, asked=False, allowed=True)
    )
    assert "(as asked)" in minor_compat_note((13, 2), DRIVER, asked=True, allowed=True)
    assert "(no line the driver runs fully fits)" in (
        minor_compat_note((13, 2), DRIVER, asked=False, allowed=False)
    )


def test_upgrade_takes_the_line_the_driver_runs_fully(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """cupy and cuda-bindings publish 13.0 and 13.2; driver 590.48.01 runs 13.2 only under
    minor-version compatibility: 13.0, unless --allow-minor-compat."""
    python = make_env(["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"], name="small")
    driver = ("--driver", "590.48.01", "--dry-run", "--json")
    default = upgrade(capsys, python, *driver)
    assert default.code == 0, default.err
    plan = default.json()
    assert plan["line_after"] == "13.0"
    assert [(e["line"], e["kind"]) for e in plan["excluded"]] == [("13.2", "driver")]
    assert "--allow-minor-compat takes the newer line" in plan["excluded"][0]["message"]
    allowed = upgrade(capsys, python, *driver, "--allow-minor-compat")
    assert allowed.code == 0, allowed.err
    assert allowed.json()["line_after"] == "13.2"
    assert any(
        n.startswith("CUDA 13.2 is taken under minor-version compatibility (--allow-minor-compat)")
        for n in allowed.json()["notes"]
    )
    # A line asked for is taken as asked, and the note says so.
    asked = upgrade(capsys, python, "13.2", *driver)
    assert asked.code == 0, asked.err
    assert any("minor-version compatibility (as asked)" in n for n in asked.json()["notes"])
