from __future__ import annotations

import random
import threading

import pytest

from cudaup.download.range_plan import (
    ALIGN,
    BASE_PIECE,
    MAX_PIECE,
    MIN_SPLIT,
    ROUND_TRIPS_PER_PIECE,
    ROUND_TRIPS_PER_STEAL,
    Segment,
    SegmentPlan,
)

MiB = 1024 * 1024


def partitioned(plan: SegmentPlan) -> None:
    """The segments cover the file exactly, in order."""
    covered = 0
    for segment in plan.segments:
        assert segment.start == covered and segment.start <= segment.pos <= segment.end
        covered = segment.end
    assert covered == plan.size


def fill(plan: SegmentPlan, segment: Segment) -> None:
    plan.advance(segment, segment.end - segment.pos)
    plan.release(segment)


def test_pieces_come_from_the_front_in_order() -> None:
    plan = SegmentPlan.split(100 * MiB + 123, 8)
    taken = [plan.take() for _ in range(8)]
    assert [(s.start, s.end) for s in taken if s] == [
        (i * BASE_PIECE, (i + 1) * BASE_PIECE) for i in range(8)
    ]
    partitioned(plan)
    assert all(s.start % ALIGN == 0 for s in plan.segments)
    assert plan.watermark() == 0


def test_a_piece_is_sized_to_the_round_trip_and_the_speed() -> None:
    plan = SegmentPlan.split(4096 * MiB, 8)
    assert plan.piece() == BASE_PIECE  # nothing known yet
    plan.observe(0.05, 6 * MiB, 1.0)  # a CDN: 50 ms away, 6 MiB/s per connection
    wanted = ROUND_TRIPS_PER_PIECE * 0.05 * 6 * MiB
    assert wanted <= plan.piece() < wanted + ALIGN and plan.piece() % ALIGN == 0
    fast = SegmentPlan.split(4096 * MiB, 8)
    fast.observe(0.0003, 100 * MiB, 1.0)  # loopback: the round trip does not show
    assert fast.piece() == BASE_PIECE
    far = SegmentPlan.split(4096 * MiB, 8)
    far.observe(0.3, 100 * MiB, 1.0)
    assert far.piece() == MAX_PIECE


def test_the_least_round_trip_counts_and_speeds_are_smoothed() -> None:
    plan = SegmentPlan.split(4096 * MiB, 8)
    plan.observe(0.05, 64 * 1024, 0.0001)  # a short answer: its "speed" is noise
    assert plan.speed is None and plan.round_trip == 0.05
    plan.observe(0.15, 8 * MiB, 1.0)  # a busy CPU answers late: the link did not change
    assert plan.round_trip == 0.05 and plan.speed == 8 * MiB
    plan.observe(0.04, 4 * MiB, 1.0)
    assert plan.round_trip == 0.04 and 4 * MiB < plan.speed < 8 * MiB


def test_pieces_shrink_near_the_end() -> None:
    plan = SegmentPlan.split(80 * MiB, 8)
    sizes = []
    while (segment := plan.take()) is not None:
        sizes.append(segment.end - segment.start)
        fill(plan, segment)
    assert sizes[0] == BASE_PIECE and sizes[-2] < BASE_PIECE
    assert sizes[:-1] == sorted(sizes[:-1], reverse=True)  # never larger again
    assert min(sizes) >= MIN_SPLIT  # the last one takes what is left, at least that
    assert plan.all_done() and plan.state() == [[0, 80 * MiB, 80 * MiB]]


def test_the_last_pieces_are_sized_to_the_round_trip_and_the_hash() -> None:
    plan = SegmentPlan.split(400 * MiB, 8)
    plan.observe(0.05, 6 * MiB, 1.0)  # pieces of 64 round trips: 19.2 MiB
    plan.observe_hash(700 * MiB, 1.0)
    # halving the last pieces is worth a round trip while it saves more hashing
    floor = 2 * 0.05 * 700 * MiB / 7
    sizes = []
    while (segment := plan.take()) is not None:
        sizes.append(segment.end - segment.start)
        fill(plan, segment)
    assert max(sizes) < 20 * MiB
    assert all(size >= floor for size in sizes[:-1]) and min(sizes[:-1]) < floor + ALIGN
    assert sum(sizes) == 400 * MiB
    slow_hash = SegmentPlan.split(400 * MiB, 8)
    slow_hash.observe(0.05, 6 * MiB, 1.0)
    slow_hash.observe_hash(100 * MiB, 1.0)
    slow_hash.segments[0].pos = 380 * MiB  # near the end
    assert slow_hash.piece() < plan.piece() or plan.piece() == floor


def test_one_connection_takes_everything_in_one_request() -> None:
    plan = SegmentPlan.split(100 * MiB, 1)
    segment = plan.take()
    assert segment is not None and (segment.start, segment.end) == (0, 100 * MiB)


def test_fewer_connections_take_larger_shares() -> None:
    plan = SegmentPlan.split(32 * MiB, 8)
    assert plan.piece() == 2 * MiB  # half an even share
    plan.connections = 2  # two 503s later
    assert plan.piece() == BASE_PIECE


def test_nothing_smaller_than_the_minimum_is_left_behind() -> None:
    plan = SegmentPlan.split(2 * MIN_SPLIT - ALIGN, 8)
    segment = plan.take()
    assert segment is not None and segment.end == plan.size  # the rest came with it
    empty = SegmentPlan.split(0, 8)
    assert empty.all_done() and empty.take() is None and empty.watermark() == 0
    small = SegmentPlan.split(3 * MiB, 8)  # pieces never get smaller than MIN_SPLIT
    assert [(s.start, s.end) for s in (small.take(), small.take(), small.take()) if s] == [
        (0, MiB),
        (MiB, 2 * MiB),
        (2 * MiB, 3 * MiB),
    ]


def test_take_steals_half_of_the_busiest_when_nothing_is_left() -> None:
    plan = SegmentPlan(8 * MiB, [Segment(0, 0, 4 * MiB), Segment(4 * MiB, 4 * MiB, 8 * MiB)])
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


def test_a_far_link_steals_only_what_outlasts_the_round_trips() -> None:
    plan = SegmentPlan.split(16 * MiB, 1)
    plan.observe(0.5, 8 * MiB, 1.0)  # half a second away: a steal costs that much
    assert plan.take() is not None
    assert plan.take() is None  # 8 MiB halves take one second: not four round trips


def test_finished_pieces_merge_so_the_state_stays_short() -> None:
    plan = SegmentPlan.split(1024 * MiB, 8)
    rng = random.Random(3)
    active: list[Segment] = []
    while True:
        while len(active) < 8 and (segment := plan.take()) is not None:
            active.append(segment)
        if not active:
            break
        fill(plan, active.pop(rng.randrange(len(active))))  # pieces end in any order
        assert len(plan.state()) <= 2 * 8 + 2
        partitioned(plan)
    assert plan.state() == [[0, 1024 * MiB, 1024 * MiB]]


@pytest.mark.parametrize("spread", [(1,), (1, 2, 3)], ids=["even", "uneven"])
def test_the_watermark_follows_the_front(spread: tuple[int, ...]) -> None:
    """Eight connections: the contiguous prefix (what can be hashed) stays within the
    pieces in flight of the furthest byte; a slower connection's piece holds it while
    the others go on at their speeds, so the bound grows with how much faster they are."""
    plan = SegmentPlan.split(512 * MiB, 8)
    rng = random.Random(5)
    speeds = [rng.choice(spread) * 256 * 1024 for _ in range(8)]
    # the pieces in flight, and what the others fetch while the slowest fills one of them
    bound = BASE_PIECE * (8 + sum(speeds) // min(speeds))
    held: list[Segment | None] = [plan.take() for _ in range(8)]
    furthest = 0
    while any(held):
        for index, segment in enumerate(held):
            if segment is None:
                continue
            plan.advance(segment, min(speeds[index], segment.end - segment.pos))
            furthest = max(furthest, segment.pos)
            if segment.done:
                plan.release(segment)
                held[index] = plan.take()
        assert furthest - plan.watermark() <= bound
    assert plan.watermark() == plan.size
    # eight equal segments (what the plan used to be) would hold the prefix at the
    # first segment's progress: 7/8 of the file behind it at the end


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
    with pytest.raises(ValueError, match="whole numbers"):
        SegmentPlan.from_state(10, [[0, 0.5, 10]])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"\[start, position, end\]"):
        SegmentPlan.from_state(10, [[0, 10]])


def test_a_resumed_plan_continues_where_each_segment_stopped() -> None:
    rows = [[0, 3 * MiB, 40 * MiB], [40 * MiB, 40 * MiB, 64 * MiB]]
    plan = SegmentPlan.from_state(64 * MiB, rows, connections=8)
    first = plan.take()
    assert first is not None and (first.start, first.pos) == (0, 3 * MiB)
    share = -(-(61 * MiB) // 16)  # half an even share of what is left
    assert first.end == (3 * MiB + share) // ALIGN * ALIGN  # a piece from where bytes stop
    second = plan.take()
    assert second is not None and second.start == first.end
    partitioned(plan)
    assert plan.completed == 3 * MiB


def test_cancel_stops_taking_and_wakes_waiters() -> None:
    plan = SegmentPlan.split(8 * MiB, 2)
    plan.cancel()
    assert plan.take() is None
    assert plan.wait_for_prefix(0, timeout=5) == 0  # returns at once


def test_tail_first_is_its_own_segment_and_handed_out_first() -> None:
    size = 10 * MIN_SPLIT + 12345
    plan = SegmentPlan.split(size, 2, tail_first=256 * 1024)
    head, tail = plan.segments
    assert tail.first and tail.end == size and size - tail.start >= 256 * 1024
    assert tail.start % ALIGN == 0 and head.start == 0 and head.end == tail.start
    assert plan.take() is tail
    after = plan.take()
    assert after is not None and after.start == 0
    # a small file stays whole: its tail comes with it
    assert len(SegmentPlan.split(MIN_SPLIT, 4, tail_first=256 * 1024).segments) == 1


def test_wait_for_range_across_segments() -> None:
    plan = SegmentPlan.split(4 * MIN_SPLIT, 2)
    first, second = plan.take(), plan.take()
    assert first is not None and second is not None
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
    plan = SegmentPlan.split(4 * MIN_SPLIT, 2)
    plan.take()
    second = plan.take()
    assert second is not None
    woke: list[bool] = []
    waiter = threading.Thread(
        target=lambda: woke.append(plan.wait_for_range(second.start, second.start + 10, 5.0))
    )
    waiter.start()
    plan.advance(second, 10)  # the watermark stays at 0: only a range waiter cares
    waiter.join(2.0)
    assert woke == [True]


def test_pieces_follow_the_round_trip() -> None:
    """The same speed, a round trip of 0.2 s against 1 ms: the far server's pieces are
    larger, so its round trips stay 1/64 of each piece's time."""
    pieces = {}
    for name, round_trip in (("far", 0.2), ("near", 0.001)):
        plan = SegmentPlan.split(1024 * MiB, 2)
        plan.observe(round_trip, 16 * MiB, 1.0)  # 16 MiB/s
        pieces[name] = plan.piece()
    assert pieces["near"] == BASE_PIECE
    expected = -(-int(ROUND_TRIPS_PER_PIECE * 0.2 * 16 * MiB) // ALIGN) * ALIGN
    assert pieces["far"] == min(MAX_PIECE, expected) > BASE_PIECE


def test_a_lone_connection_is_not_left_idle_by_pieces_cut_for_eight() -> None:
    """Alone while the ramp may still add seven, from a fast, far server (30 ms, 800
    MiB/s): pieces cut for eight's end (the tail floor, ~15 MiB: half a round trip's worth)
    left its link idle more than half the time.  Its pieces take at least the round trips a
    joiner may steal half of; once two run, they are cut for eight again."""
    plan = SegmentPlan.split(62 * MiB, 1)
    plan.may_grow_to = 8
    plan.observe(0.03, 4 * MiB, 0.005)  # 800 MiB/s
    plan.observe_hash(1600 * MiB, 1.0)
    lone = plan.piece()
    assert lone == min(
        MAX_PIECE, -(-int(ROUND_TRIPS_PER_STEAL * 0.03 * 800 * MiB) // ALIGN) * ALIGN
    )
    plan.connections = 2
    assert plan.piece() < 16 * MiB < lone
    near = SegmentPlan.split(62 * MiB, 1)  # a round trip that does not show: as before
    near.may_grow_to = 8
    near.observe(0.0003, 4 * MiB, 0.005)
    assert near.piece() <= BASE_PIECE
