from __future__ import annotations

import pytest

from cudaup.download.segments import ALIGN, MIN_SPLIT, Segment, SegmentPlan

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


def test_tail_first_is_its_own_segment_and_handed_out_first() -> None:
    size = 10 * MIN_SPLIT + 12345
    plan = SegmentPlan.split(size, 2, tail_first=256 * 1024)
    *head, tail = plan.segments
    assert tail.first and tail.end == size and size - tail.start >= 256 * 1024
    assert tail.start % ALIGN == 0
    assert [s.start for s in head] == [0, head[1].start] and head[-1].end == tail.start
    assert plan.take() is tail
    assert plan.take() is head[0]
    # a small file stays whole: its tail comes with it
    assert len(SegmentPlan.split(MIN_SPLIT, 4, tail_first=256 * 1024).segments) == 1


def test_wait_for_range_across_segments() -> None:
    plan = SegmentPlan.split(4 * MIN_SPLIT, 2)
    first, second = plan.segments
    assert plan.wait_for_range(0, 0, timeout=0)  # nothing asked, nothing to wait for
    assert not plan.wait_for_range(0, 10, timeout=0.01)
    plan.advance(first, 100)
    assert plan.wait_for_range(0, 100, timeout=0)
    assert not plan.wait_for_range(50, 150, timeout=0.01)
    straddling = (first.end - 10, first.end + 10)
    plan.advance(second, 10)
    assert not plan.wait_for_range(*straddling, timeout=0.01)  # the first half's end is missing
    plan.advance(first, first.end - first.pos)
    assert plan.wait_for_range(*straddling, timeout=0)
    plan.cancel()
    assert not plan.wait_for_range(*straddling, timeout=1.0)  # cancelled: never "ready"


def test_a_range_waiter_is_woken_by_bytes_away_from_the_watermark() -> None:
    import threading

    plan = SegmentPlan.split(4 * MIN_SPLIT, 2)
    _first, second = plan.segments
    woke: list[bool] = []
    waiter = threading.Thread(
        target=lambda: woke.append(plan.wait_for_range(second.start, second.start + 10, 5.0))
    )
    waiter.start()
    plan.advance(second, 10)  # the watermark stays at 0: only a range waiter cares
    waiter.join(2.0)
    assert woke == [True]
