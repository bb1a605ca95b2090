"""The speed floor and the stall clock on a fake clock; their settings from the environment."""

from __future__ import annotations

import pytest

from cudaup.config import DEFAULT_SPEED_LIMIT, DEFAULT_SPEED_TIME, DEFAULT_STALL_TIMEOUT, Settings
from cudaup.download.watch import TICK, TransferLimits, Watchdog
from cudaup.errors import UsageError

LIMITS = TransferLimits(speed_limit=1000, speed_time=10.0, stall_timeout=30.0, read_timeout=60.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Response:
    def __init__(self) -> None:
        self.shut = 0

    def shutdown(self) -> None:
        self.shut += 1


def run_flow(rate: int, seconds: float, reading: int = 0) -> tuple[Response, str | None]:
    """A flow receiving ``rate`` bytes/s for ``seconds``, checked eight times a second
    (steps a float adds exactly)."""
    clock = Clock()
    watchdog = Watchdog(LIMITS, clock)
    response = Response()
    with watchdog.flow() as flow:
        watchdog.attach(flow, response.shutdown)
        flow.reading = reading
        for _ in range(int(seconds * 8)):
            clock.now += 0.125
            flow.received += rate // 8
            watchdog.check()
        return response, flow.dropped


def test_a_flow_at_the_floor_is_kept_and_one_below_is_dropped_after_the_window() -> None:
    response, dropped = run_flow(rate=1000, seconds=60)
    assert dropped is None and response.shut == 0
    response, dropped = run_flow(rate=480, seconds=9.875)  # below, but not for a whole window
    assert dropped is None
    response, dropped = run_flow(rate=480, seconds=12)
    assert response.shut == 1  # dropped once, at the end of the first window
    assert dropped == "slower than 1000 B/s for 10 s (480 B/s in the last 10 s)"


def test_a_read_waiting_on_the_socket_is_granted_at_most_half_the_floor() -> None:
    # A 64 KiB read waits on the socket: up to 5000 of its bytes (half the window's
    # 10000) may have arrived uncounted.
    _, dropped = run_flow(rate=600, seconds=12, reading=64 * 1024)
    assert dropped is None  # 6000 counted + 5000 granted
    _, dropped = run_flow(rate=400, seconds=12, reading=64 * 1024)
    assert dropped is not None  # 4000 + 5000: below
    _, dropped = run_flow(rate=0, seconds=12, reading=64 * 1024)
    assert dropped is not None and "(0 B/s in the last 10 s)" in dropped


def test_no_floor_when_the_limit_is_zero() -> None:
    clock = Clock()
    watchdog = Watchdog(TransferLimits(0, 1.0, 30.0, 60.0), clock)
    with watchdog.flow() as flow:
        watchdog.attach(flow, Response().shutdown)
        clock.now += 100
        watchdog.check()
        assert flow.dropped is None


def test_the_stall_clock_counts_only_time_with_a_request_out() -> None:
    clock = Clock()
    watchdog = Watchdog(LIMITS, clock)
    with watchdog.flow():
        clock.now += 20
    clock.now += 1000  # waiting for a connection slot or a Retry-After: not a stall
    assert watchdog.stalled_for() == 20
    assert watchdog.stall_error("host") is None
    with watchdog.flow():
        clock.now += 5
        assert watchdog.request_timeout() == 5  # what is left of the 30 s limit
        clock.now += 5
        error = watchdog.stall_error("example.org:8080")
    assert error is not None and error.exit_code == 5
    assert str(error) == (
        "the server stalled: nothing arrived from example.org:8080 for 30 s; try again later"
    )


def test_a_trickle_is_not_progress_a_window_at_the_floor_is() -> None:
    clock = Clock()
    watchdog = Watchdog(LIMITS, clock)  # a window at the floor: 1000 B/s * 10 s
    with watchdog.flow():
        for _ in range(31):
            clock.now += 1
            watchdog.progressed(2)  # two bytes a second, reconnecting or not
        watchdog.note_failure(TimeoutError("read timed out"))
        error = watchdog.stall_error("h")
        assert error is not None
        assert str(error) == (
            "the server stalled: only 62 bytes arrived from h in 30 s "
            "(last: read timed out); try again later"
        )
        watchdog.progressed(10_000)
        assert watchdog.stalled_for() == 0 and watchdog.stall_error("h") is None


def test_the_probe_answer_restarts_the_clock_and_timeouts_stay_within_the_limits() -> None:
    clock = Clock()
    watchdog = Watchdog(TransferLimits(10, 2.0, 30.0, 60.0), clock)
    assert watchdog.request_timeout() == 2.0  # the floor's window, not the 60 s socket timeout
    with watchdog.flow():
        clock.now += 29.5
        assert watchdog.request_timeout() == pytest.approx(0.5)
        watchdog.answered()
        assert watchdog.stalled_for() == 0


def test_the_checks_come_ten_times_per_window_when_the_window_is_under_a_second() -> None:
    assert Watchdog(LIMITS).tick == TICK == 0.1  # the 10 s window: ten times a second
    assert Watchdog(TransferLimits(1000, 0.2, 0.6, 60.0)).tick == pytest.approx(0.02)


def test_limits_from_the_environment_and_bad_values_refused() -> None:
    default = TransferLimits.of(Settings.from_env({}))
    assert default == TransferLimits(
        DEFAULT_SPEED_LIMIT, DEFAULT_SPEED_TIME, DEFAULT_STALL_TIMEOUT, 30.0
    )
    assert (DEFAULT_SPEED_LIMIT, DEFAULT_SPEED_TIME, DEFAULT_STALL_TIMEOUT) == (10240, 30.0, 60.0)
    env = {"CUDAUP_SPEED_LIMIT": "0", "CUDAUP_SPEED_TIME": "2.5", "CUDAUP_STALL_TIMEOUT": "9"}
    assert TransferLimits.of(Settings.from_env(env)) == TransferLimits(0, 2.5, 9.0, 30.0)
    for name, value in (
        ("CUDAUP_SPEED_LIMIT", "fast"),
        ("CUDAUP_SPEED_LIMIT", "-1"),
        ("CUDAUP_SPEED_TIME", "0"),
        ("CUDAUP_STALL_TIMEOUT", "inf"),
        ("CUDAUP_STALL_TIMEOUT", "nan"),
    ):
        with pytest.raises(UsageError, match=f"{name}='{value}' is not a number of"):
            Settings.from_env({name: value})
