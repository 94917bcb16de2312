"""bench/head_to_head_metrics.py: time to balance, moves from ownership polls, gaps near a move."""

from __future__ import annotations

import math

from bench.head_to_head_metrics import (
    Move,
    longest_gap_near,
    moves_from_ownership,
    percentile,
    spread,
    time_to_balance,
)


def test_spread_is_inf_when_a_broker_carries_nothing() -> None:
    assert spread({"a": 100.0, "b": 0.0}) == math.inf
    assert spread({"a": 120.0, "b": 100.0}) == 1.2
    assert spread({"a": 0.0, "b": 0.0}) == 1.0


def test_time_to_balance_needs_the_ratio_to_hold() -> None:
    even = {"a": 100.0, "b": 110.0}
    skewed = {"a": 100.0, "b": 200.0}
    # balanced at 10 s for a moment, skewed again at 15 s, balanced for good from 20 s
    samples = [(0.0, skewed), (5.0, skewed), (10.0, even), (15.0, skewed)]
    samples += [(20.0 + 5 * i, even) for i in range(20)]
    assert time_to_balance(samples, 0.0, 200.0, hold_s=30.0) == 20.0
    # measured from the disturbance, not from the first sample
    assert time_to_balance(samples, 5.0, 200.0, hold_s=30.0) == 15.0


def test_time_to_balance_is_none_when_never_balanced_in_the_phase() -> None:
    samples = [(float(t), {"a": 100.0, "b": 0.0}) for t in range(0, 100, 5)]
    assert time_to_balance(samples, 0.0, 100.0) is None
    # balanced only after the phase ended does not count
    late = samples + [(100.0 + t, {"a": 1.0, "b": 1.0}) for t in range(0, 100, 5)]
    assert time_to_balance(late, 0.0, 99.0) is None


def test_time_to_balance_accepts_a_short_tail_at_the_phase_end() -> None:
    samples = [(0.0, {"a": 3.0, "b": 1.0}), (50.0, {"a": 1.0, "b": 1.1}), (55.0, {"a": 1.0, "b": 1.0})]
    assert time_to_balance(samples, 0.0, 56.0, hold_s=60.0) == 50.0
    # a single balanced sample at the very end is not enough
    assert time_to_balance(samples[:2], 0.0, 51.0, hold_s=60.0) is None


def test_moves_are_owner_changes_between_polls_and_failed_lookups_do_not_count() -> None:
    polls = [
        (0.0, {"x": "b1", "y": "b1"}),
        (5.0, {"x": "b2"}),  # y's lookup failed
        (10.0, {"x": "b2", "y": "b1"}),
        (15.0, {"x": "b3", "y": "b2"}),
    ]
    assert moves_from_ownership(polls) == [
        Move(5.0, "x", "b1", "b2"),
        Move(15.0, "x", "b2", "b3"),
        Move(15.0, "y", "b1", "b2"),
    ]


def test_longest_gap_near_a_move_and_percentile() -> None:
    gaps = [(1.0, 0.5), (10.0, 3.0), (40.0, 9.0)]
    assert longest_gap_near(gaps, 11.0, 20.0) == 3.0
    assert longest_gap_near(gaps, 20.0, 30.0) == 0.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([], 99) is None
