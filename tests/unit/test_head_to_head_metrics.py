"""bench/head_to_head_metrics.py and head_to_head_report.py: time to balance, moves from ownership
polls, gaps near a move, sequence-number loss accounting, and the aggregation over seeds."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from bench.head_to_head_metrics import (
    Move,
    ReceivedSequence,
    SeqSet,
    count_by_phase,
    longest_gap_near,
    merge_windows,
    moves_from_ownership,
    percentile,
    phase_of_seq,
    spread,
    time_to_balance,
)
from bench.head_to_head_report import aggregate, load_of, over_seeds, phase_table, runs_table


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


# ---- sequence numbers ----------------------------------------------------------------------------------
def test_seq_set_marks_each_number_once_and_grows() -> None:
    s = SeqSet([0, 3, 1_000_003])
    assert s.add(7) is True
    assert s.add(7) is False  # a duplicate
    assert len(s) == 4
    assert 3 in s and 1_000_003 in s and 7 in s
    assert 2 not in s and 2_000_000 not in s and -1 not in s
    with pytest.raises(ValueError, match="-5"):
        s.add(-5)


def test_acknowledged_but_never_received_are_the_lost_ones() -> None:
    acked = SeqSet(n for n in range(1000) if n != 500)  # 500's send failed: never acknowledged
    received = SeqSet(n for n in range(1000) if n not in (17, 500, 998))
    assert acked.missing_from(received) == [17, 998]
    # received beyond what the other side knows counts for nothing; an empty receiver lost all
    assert SeqSet([1, 2]).missing_from(SeqSet(range(10_000))) == []
    assert SeqSet([1, 9, 16]).missing_from(SeqSet()) == [1, 9, 16]


def test_received_sequence_tells_duplicates_gaps_and_late_arrivals() -> None:
    r = ReceivedSequence()
    for seq in (0, 1, 2, 5, 3, 4, 4, 6):  # 3 and 4 held back, then 4 redelivered
        r.receive(seq)
    assert (r.duplicates, r.gaps, r.late, r.highest) == (1, 1, 2, 6)
    assert r.seen.missing_from(SeqSet()) == [0, 1, 2, 3, 4, 5, 6]
    # numbers skipped and never delivered are what the end-of-run comparison reports
    acked = SeqSet(range(9))
    assert acked.missing_from(r.seen) == [7, 8]


def test_a_lost_or_failed_message_is_counted_in_the_phase_it_was_sent_in() -> None:
    marks = {
        "skew": {"a": 0, "b": 0},
        "outside": {"a": 100, "b": 50},
        "join": {"a": 120, "b": 60},
        "hot": {"a": 120, "b": 90},  # a sent nothing in the join phase
        "after": {"a": 300, "b": 200},
    }
    assert phase_of_seq(marks_for(marks, "a"), 120) == "hot"
    assert phase_of_seq(marks_for(marks, "a"), 99) == "skew"
    assert phase_of_seq({"skew": 10}, 3) == "outside"
    counts = count_by_phase({"a": [5, 110, 120, 301], "b": [59, 60, 89, 90]}, marks)
    assert counts == {"skew": 1, "outside": 2, "hot": 2, "join": 2, "after": 1}


def marks_for(marks: dict[str, dict[str, int]], topic: str) -> dict[str, int]:
    return {p: m[topic] for p, m in marks.items()}


def test_merge_windows_joins_overlaps_so_a_message_counts_once() -> None:
    assert merge_windows([(10.0, 20.0), (0.0, 5.0), (15.0, 30.0), (30.0, 31.0)]) == [(0.0, 5.0), (10.0, 31.0)]
    assert merge_windows([]) == []


def test_time_to_balance_over_a_phase_shorter_than_the_hold() -> None:
    # a 40 s phase with a 60 s hold: balanced from 20 s to its end counts, a relapse does not
    good = [(0.0, {"a": 2.0, "b": 1.0})] + [(20.0 + 5 * i, {"a": 1.0, "b": 1.0}) for i in range(5)]
    assert time_to_balance(good, 0.0, 40.0, hold_s=60.0) == 20.0
    relapse = [*good[:-1], (40.0, {"a": 1.3, "b": 1.0})]
    assert time_to_balance(relapse, 0.0, 40.0, hold_s=60.0) is None


# ---- over seeds ----------------------------------------------------------------------------------------
def run(name: str, seed: int, **phase: dict[str, float | int | None]) -> dict[str, object]:
    return {"name": name, "label": name.upper(), "seed": seed, "per_phase": phase}


def test_median_and_worst_over_seeds_with_never_as_worst() -> None:
    assert over_seeds([30.0, None, 90.0], none_is_worst=True) == (90.0, math.inf)
    assert over_seeds([30.0, 60.0, 90.0], none_is_worst=True) == (60.0, 90.0)
    assert over_seeds([None, None, 10.0], none_is_worst=True) == (math.inf, math.inf)
    # around-move metrics: a seed without a move has nothing to measure and is left out
    assert over_seeds([None, 2.5, 1.0], none_is_worst=False) == (1.75, 2.5)
    assert over_seeds([None, None], none_is_worst=False) is None


def test_aggregate_per_phase_and_the_table_cells() -> None:
    runs = [
        run(
            "lm",
            1,
            skew={"balanced_s": 120.0, "moves": 4, "gap_s": 1.5, "p99_ms": 200.0, "failed": 0, "lost": 0},
        ),
        run(
            "lm",
            2,
            skew={"balanced_s": None, "moves": 6, "gap_s": None, "p99_ms": None, "failed": 2, "lost": 0},
        ),
        run(
            "lm",
            3,
            skew={"balanced_s": 150.0, "moves": 5, "gap_s": 2.5, "p99_ms": 300.0, "failed": 0, "lost": 1},
        ),
    ]
    agg = aggregate(runs, ["skew"])["skew"]
    assert agg["balanced_s"] == (150.0, math.inf)
    assert agg["moves"] == (5.0, 6.0)
    assert agg["gap_s"] == (2.0, 2.5)
    assert agg["failed"] == (0.0, 2.0)
    assert agg["lost"] == (0.0, 1.0)
    table = phase_table(list(reversed(runs)), ["skew", "quiet"])
    row = next(line for line in table.splitlines() if "| skew |" in line)
    assert row.startswith(
        "| LM | skew | 1,2,3 | 150 / never | 5 / 6 | 2.0 / 2.5 | 250 / 300 | 0 / 2 | 0 / 1 |"
    )
    quiet = next(line for line in table.splitlines() if "| quiet |" in line)
    assert "never / never" in quiet  # no figures for a phase: never balanced, nothing around moves
    assert quiet.endswith("| – | – | – | – | – |")


def test_runs_table_shows_the_machine_load_beside_each_run() -> None:
    r = run("lm", 2) | {
        "workload": "unequal",
        "started_utc": "2026-11-29 00:10:00",
        "wall_s": 1234.4,
        "uptime_start": " 00:10:00 up 2:13,  0 user,  load average: 3.41, 1.46, 0.65",
        "uptime_end": "garbled",
        "moves": [{}, {}],
        "acked": 1_000_000,
        "failed_sends": 0,
        "lost_acked": 0,
    }
    row = runs_table([r]).splitlines()[2]
    assert row == (
        "| unequal | 2 | LM | 2026-11-29 00:10:00 | 1,234 | 3.41 / 1.46 / 0.65 | ? | 2 | 1,000,000 | 0 | 0 |"
    )
    assert load_of("load averages: 1.00 2.00 3.00") == "1.00 / 2.00 / 3.00"


# ---- one run's summary -----------------------------------------------------------------------------------
def test_a_run_summary_puts_moves_gaps_latency_failures_and_losses_in_their_phases() -> None:
    from array import array
    from types import SimpleNamespace

    from bench.head_to_head_summary import summarise
    from service.pulsar.workload import TopicRecord

    phases = {"skew": [0.0, 100.0], "boot": [100.0, 130.0], "join": [130.0, 230.0]}
    phases |= {"hot": [230.0, 330.0], "quiet": [330.0, 430.0]}
    sent = [float(t) for t in range(430)]
    slow = {105.0 + i for i in range(8)}  # around the move at 110
    moved = TopicRecord(
        sent_at=array("d", sent),
        latency=array("d", [2.0 if t in slow else 0.01 for t in sent]),
        gaps=[(108.0, 3.0)],
    )
    still = TopicRecord(sent_at=array("d", sent), latency=array("d", [0.01] * len(sent)))
    records = {"tx": moved, "ty": still}
    even, skewed = {"a": 100.0, "b": 105.0}, {"a": 300.0, "b": 100.0}
    sampler = SimpleNamespace(
        owners=[(0.0, {"X": "a", "Y": "a"}), (110.0, {"X": "b", "Y": "a"}), (250.0, {"X": "b", "Y": "b"})],
        rates=[(float(t), skewed if t < 150 else even) for t in range(0, 430, 5)],
        usage=[],
    )
    marks = {"skew": {"tx": 0}, "boot": {"tx": 100}, "join": {"tx": 130}, "hot": {"tx": 230}}
    marks |= {"quiet": {"tx": 330}, "after": {"tx": 430}}
    work = SimpleNamespace(
        records=records,
        marks=marks,
        failed_seqs={"tx": [240], "ty": []},
        sent=lambda: 862,
        failed=lambda: 1,
        acked=lambda: 860,
    )
    checker = SimpleNamespace(summary=lambda: {"received": 859})
    args = SimpleNamespace(poll=5.0, hold=60.0, workload="standard", broker_cpus=(0.4,) * 4, own_hosts=True)
    args.skew_s = args.join_s = args.hot_s = args.quiet_s = 100.0
    out = summarise(
        "lm",
        "LM",
        2,
        {},
        phases,
        cast(Any, sampler),  # the fields summarise reads, as a run leaves them
        work,
        checker,
        {"tx": [5, 120]},
        {"tx": "X", "ty": "Y"},
        cast(Any, args),
        {"wall_s": 1.0},
    )
    pp = out["per_phase"]
    assert pp["skew"] == {
        "balanced_s": None,
        "moves": 0,
        "gap_s": None,
        "p99_ms": None,
        "failed": 0,
        "lost": 1,
    }
    assert pp["boot"]["moves"] == 1 and pp["boot"]["gap_s"] == 3.0 and pp["boot"]["lost"] == 1
    assert pp["boot"]["p99_ms"] == 2000.0  # messages sent within [move - poll - 2, move + 10)
    assert pp["join"]["balanced_s"] == 20.0  # balanced from 150 s on, held 60 s
    assert pp["hot"] | {"balanced_s": 0.0} == {
        "balanced_s": 0.0,
        "moves": 1,
        "gap_s": 0.0,
        "p99_ms": 10.0,
        "failed": 1,
        "lost": 0,
    }
    assert pp["quiet"]["moves"] == 0 and pp["quiet"]["failed"] == 0
    assert out["lost_acked"] == 2 and out["lost_examples"] == {"tx": [5, 120]}
    assert out["seed"] == 2 and out["moves_per_phase"]["boot"] == 1
