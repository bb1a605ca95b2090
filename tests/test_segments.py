from __future__ import annotations

import pytest

from cudaup.segments import ALIGN, MIN_SPLIT, Segment, SegmentPlan

MiB = 1024 * 1024


def test_split_partitions_aligned() -> None:
    plan = SegmentPlan.split(100 * MiB + 123, 8)
    assert len(plan.segments) == 8
    assert plan.segments[0].start == 0 and plan.segments[-1].end == 100 * MiB + 123
    for a, b in zip(plan.segments, plan.segments[1:], strict=False):
        assert a.end == b.start and b.start % ALIGN == 0


def test_small_files_get_fewer_segments() -> None:
    assert len(SegmentPlan.split(3 * MiB, 8).segments) == 3
    assert len(SegmentPlan.split(10, 8).segments) == 1
    assert SegmentPlan.split(0, 8).all_done()


def test_take_gives_idle_segments_then_steals_half_of_the_busiest() -> None:
    plan = SegmentPlan.split(8 * MiB, 2)
    a, b = plan.take(), plan.take()
    assert a is not None and b is not None and (a.start, b.start) == (0, 4 * MiB)
    plan.advance(b, 4 * MiB)
    plan.release(b)
    stolen = plan.take()
    assert stolen is not None and stolen.start == 2 * MiB and stolen.end == 4 * MiB
    assert a.end == 2 * MiB  # the victim now stops where the thief starts
    assert [(s.start, s.end) for s in plan.segments] == [
        (0, 2 * MiB),
        (2 * MiB, 4 * MiB),
        (4 * MiB, 8 * MiB),
    ]


def test_no_steal_below_the_minimum_or_into_reserved_bytes() -> None:
    plan = SegmentPlan.split(2 * MIN_SPLIT - ALIGN, 1)
    segment = plan.take()
    assert segment is not None
    assert plan.take() is None  # halves would be smaller than MIN_SPLIT
    even = SegmentPlan.split(2 * MIN_SPLIT, 1)
    assert even.take() is not None
    half = even.take()
    assert half is not None and half.end - half.start == MIN_SPLIT  # exactly the minimum is fine
    big = SegmentPlan(16 * MiB, [Segment(0, 0, 16 * MiB)])
    victim = big.take()
    assert victim is not None
    assert big.reserve(victim, 12 * MiB) == 12 * MiB  # a writer holds bytes up to 12 MiB
    stolen = big.take()
    assert stolen is not None and stolen.start >= 12 * MiB
    assert big.reserve(victim, 20 * MiB) == stolen.start  # the writer may not cross into it


def test_watermark_is_the_contiguous_prefix() -> None:
    plan = SegmentPlan(10, [Segment(0, 0, 4), Segment(4, 4, 10)])
    first, second = plan.segments
    plan.advance(second, 6)
    assert plan.watermark() == 0
    plan.advance(first, 2)
    assert plan.watermark() == 2
    plan.advance(first, 2)
    assert plan.watermark() == 10 and plan.all_done()


def test_state_round_trip_and_validation() -> None:
    plan = SegmentPlan(10, [Segment(0, 3, 4), Segment(4, 9, 10)])
    again = SegmentPlan.from_state(10, plan.state())
    assert again.state() == [[0, 3, 4], [4, 9, 10]] and again.completed == 8
    with pytest.raises(ValueError, match="partition"):
        SegmentPlan.from_state(10, [[0, 0, 4], [5, 5, 10]])
    with pytest.raises(ValueError, match="cover"):
        SegmentPlan.from_state(10, [[0, 0, 4]])
    with pytest.raises(ValueError, match="partition"):
        SegmentPlan.from_state(10, [[0, 7, 4], [4, 4, 10]])


def test_cancel_stops_taking_and_wakes_waiters() -> None:
    plan = SegmentPlan.split(8 * MiB, 2)
    plan.cancel()
    assert plan.take() is None
    assert plan.wait_for_prefix(0, timeout=5) == 0  # returns at once
