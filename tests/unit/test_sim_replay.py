"""The pure what-if replay: recorded cycles through the engine under other strategies."""

from __future__ import annotations

import math

import pytest

from balancer.errors import InvalidInput
from balancer.sim.engine import PAIRS, StrategyPair
from balancer.sim.metrics import quality
from balancer.sim.replay import (
    CapacityLine,
    RecordedBroker,
    RecordedBundle,
    RecordedCycle,
    build_model,
    model_error,
    recorded_result,
    replay,
    replay_error,
    util_spread,
)

STEP_MS = 60_000
BG = 5.0  # CPU points at zero traffic, as the demo's simulated brokers
PER_POINT = 1000.0  # msg/s per CPU point
CONFIG = {
    "loadBalancerBundleUnloadMinThroughputThreshold": 0.0,
    "loadBalancerSheddingGracePeriodMinutes": 2.0,
}
RECORDED = StrategyPair("Overload+LLTMR (recorded)", "OverloadShedder", "LeastLongTermMessageRate")


def _history(
    cycles: int = 30,
    brokers: tuple[str, ...] = ("b1", "b2", "b3"),
    bundles: int = 12,
    leaves: dict[str, int] | None = None,
    cpu_noise: float = 0.0,
) -> list[RecordedCycle]:
    """A skewed cluster whose live leader never moved anything: every bundle stays on b1."""
    out = []
    for k in range(cycles):
        present = [b for b in brokers if k < (leaves or {}).get(b, cycles)]
        rows = {}
        for i in range(bundles):
            rate = 1000.0 + 100.0 * i + 50.0 * math.sin(k / 5 + i)
            owner = "b1" if "b1" in present else present[0]
            rows[f"t/ns/0x{i:08x}_0x{i + 1:08x}"] = RecordedBundle(
                owner, rate / 2, rate / 2, rate * 100, rate * 100
            )
        reported = {}
        for j, b in enumerate(present):
            rate = sum(r.rate for r in rows.values() if r.owner == b)
            tp = sum(r.tp_in for r in rows.values() if r.owner == b)
            noise = cpu_noise * math.sin(7 * k + j)
            reported[b] = RecordedBroker(BG + rate / PER_POINT + noise, tp / 1e6, tp / 1e6, rate, tp, tp)
        out.append(RecordedCycle(1_700_000_000_000 + k * STEP_MS, rows, reported))
    return out


def _exact_lines(brokers: tuple[str, ...] = ("b1", "b2", "b3")) -> dict[str, CapacityLine]:
    return {b: CapacityLine(b, PER_POINT, -BG * PER_POINT) for b in brokers}


def test_model_reproduces_an_exact_linear_cluster() -> None:
    cycles = _history()
    model = build_model(cycles, _exact_lines())
    assert model.slope["b1"] == PER_POINT and model.background["b1"] == pytest.approx(BG)
    assert model.strength == {"b1": 1.0, "b2": 1.0, "b3": 1.0}
    errors = model_error(cycles, model)
    assert set(errors) == {"b1", "b2", "b3"}
    for e in errors.values():
        assert e.samples == len(cycles)
        assert e.mean_abs < 1e-9 and e.rmse < 1e-9


def test_model_error_measures_noise_the_line_cannot_follow() -> None:
    cycles = _history(cpu_noise=2.0)
    errors = model_error(cycles, build_model(cycles, _exact_lines()))
    assert all(0.5 < e.mean_abs < 2.0 for e in errors.values())
    assert all(e.rmse >= e.mean_abs for e in errors.values())


def test_a_strategy_replayed_moves_bundles_the_leader_did_not() -> None:
    cycles = _history()
    model = build_model(cycles, _exact_lines())
    live = recorded_result(cycles, model, RECORDED, 1.0)
    assert live.moves == [] and len(live.cycles) == len(cycles) - 1
    run = replay(cycles, model, PAIRS["BalancedShedder"], CONFIG)
    assert len(run.cycles) == len(cycles) - 1
    assert run.moves, "a skewed cluster must be rebalanced"
    assert all(m.source == "b1" for m in run.moves[:3])
    assert util_spread(run)[-1] < util_spread(live)[-1] / 3
    assert quality(run).final_rate_ratio < quality(live).final_rate_ratio
    # Traffic independence: whoever owns them, the bundles carry exactly the recorded traffic.
    for state in run.cycles:
        recorded = sum(r.rate for r in cycles[state.cycle + 1].bundles.values())
        assert sum(state.msg_rate) == pytest.approx(recorded, rel=1e-12)


def test_replaying_the_recorded_strategy_has_the_model_error_when_decisions_agree() -> None:
    # OverloadShedder never fires below 85% CPU: like the recorded leader, it moves nothing.
    cycles = _history(cpu_noise=1.0)
    model = build_model(cycles, _exact_lines())
    run = replay(cycles, model, RECORDED, CONFIG)
    assert run.moves == []
    err = replay_error(run, cycles)
    only_model = model_error(cycles[1:], model)
    for b, e in err.items():
        assert e.samples == len(cycles) - 1
        assert e.mean_abs == pytest.approx(only_model[b].mean_abs, rel=1e-9)


def test_a_broker_that_leaves_has_its_bundles_placed_and_none_lost() -> None:
    cycles = _history(cycles=20, leaves={"b1": 8})
    model = build_model(cycles, _exact_lines())
    run = replay(cycles, model, PAIRS["Threshold+LRUW"], CONFIG)
    moved_off_b1 = {m.bundle for m in run.moves if m.source == "b1" and m.cycle < 8}
    assert run.placements == 12 - len(moved_off_b1) > 0  # what b1 still owned, each once
    after = run.cycles[10]
    assert "b1" not in after.brokers
    assert sum(after.msg_rate) == pytest.approx(sum(r.rate for r in cycles[11].bundles.values()))
    live = recorded_result(cycles, model, RECORDED, 1.0)
    assert live.placements == 12 and live.moves == []


def test_brokers_without_a_capacity_line_use_the_fleet_median() -> None:
    cycles = _history()
    lines = _exact_lines()
    lines["b3"] = CapacityLine("b3", None, None)  # its CPU never varied
    lines["b2"] = CapacityLine("b2", 2 * PER_POINT, -BG * 2 * PER_POINT)  # twice as strong
    model = build_model(cycles, lines)
    assert model.fallback == ["b3"]
    assert model.slope["b3"] == pytest.approx(statistics_median([PER_POINT, 2 * PER_POINT]))
    assert model.strength["b2"] > model.strength["b1"]


def statistics_median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(InvalidInput, match="history"):
        build_model([RecordedCycle(0, {}, {})], {})
    cycles = _history(cycles=1)
    with pytest.raises(InvalidInput, match="at least two recorded cycles"):
        replay(cycles, build_model(cycles, _exact_lines()), RECORDED, CONFIG)


def test_comparison_table_json_and_plots(tmp_path: object) -> None:
    import io
    import json
    from pathlib import Path

    from rich.console import Console

    from service.commands.replay import chosen_pairs, compare
    from service.commands.replay_output import print_table, write_json, write_plots

    root = Path(str(tmp_path))
    cycles = _history(cpu_noise=1.0)
    pairs = chosen_pairs(["BalancedShedder", "Threshold+LRUW"], RECORDED)
    assert [p.label for p in pairs] == [RECORDED.label, "BalancedShedder", "Threshold+LRUW"]
    c = compare(cycles, _exact_lines(), CONFIG, RECORDED, pairs, 1, lambda _: None)
    assert [r["strategy"] for r in c["runs"]] == ["live leader (recorded)"] + [p.label for p in pairs]
    assert c["interval_minutes"] == 1.0
    assert set(c["recorded_replay_error"]) == {"b1", "b2", "b3"}
    out = io.StringIO()
    print_table(c, Console(file=out, width=200))
    text = out.getvalue()
    assert "live leader (recorded)" in text and "Threshold+LRUW" in text
    assert "independent of its owner" in text and "replay |err|" in text
    write_json(c, str(root / "r.json"))
    assert json.loads((root / "r.json").read_text())["runs"][2]["quality"]["unloads"] > 0
    pngs = write_plots(c, str(root / "plots"))
    assert len(pngs) == 3
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_unknown_strategy_names_fail_before_any_work() -> None:
    from service.commands.replay import chosen_pairs

    with pytest.raises(InvalidInput):
        chosen_pairs(["NoSuchShedder+LeastLongTermMessageRate"], RECORDED)
    with pytest.raises(InvalidInput, match="strategy"):
        chosen_pairs(["Nonsense"], RECORDED)


def test_history_meta_round_trip_and_garbage(tmp_path: object) -> None:
    from pathlib import Path

    from balancer.config import LoadBalancerConfig
    from service.longterm.history_meta import META_NAME, read_meta, write_meta

    root = Path(str(tmp_path)) / "h"
    doc, why = read_meta(str(root))
    assert doc is None and "no _loadmgr.json" in why
    config = LoadBalancerConfig.from_dict({"loadBalancerLoadSheddingStrategy": "AvgShedder"})
    write_meta(str(root), config)
    doc, why = read_meta(root.as_uri())
    assert doc is not None and doc["strategy"]["shedder"] == "AvgShedder"
    assert LoadBalancerConfig.from_dict(doc["config"]) == config
    (root / META_NAME).write_text("{not json")
    doc, why = read_meta(str(root))
    assert doc is None and "unreadable" in why
    (root / META_NAME).write_text('{"config": 3}')
    assert read_meta(str(root))[0] is None


def _with_operator_unload(cycles: list[RecordedCycle], at: int, bundle: str, dest: str) -> None:
    """From recorded cycle ``at`` on, ``bundle`` is owned by ``dest`` (an operator's unload to it)."""
    for c in cycles[at:]:
        rb = c.bundles[bundle]
        c.bundles[bundle] = RecordedBundle(dest, rb.rate_in, rb.rate_out, rb.tp_in, rb.tp_out)


def _gapped(cycles: list[RecordedCycle], after: int, gap_ms: int) -> list[RecordedCycle]:
    return [
        RecordedCycle(c.time_ms + (gap_ms if k > after else 0), c.bundles, c.brokers)
        for k, c in enumerate(cycles)
    ]


BUNDLE = "t/ns/0x00000003_0x00000004"


def test_an_operator_unload_is_not_counted_as_the_leaders_move() -> None:
    """Issue 34: without decision kinds an operator's unload was counted as a live leader move; with
    the recorded decisions it is the operator's, and the replay makes it rather than re-deciding it."""
    from balancer.sim.replay import RecordedDecision, ReplaySimulation, observed_moves

    cycles = _history()
    _with_operator_unload(cycles, 10, BUNDLE, "b2")
    model = build_model(cycles, _exact_lines())
    # Inferred (a history without decisions): the old owner still reported, so it looks like shedding.
    guessed = observed_moves(cycles, None)
    assert [(m.kind, m.inferred) for m in guessed] == [("shedding", True)]
    assert len(recorded_result(cycles, model, RECORDED, 1.0).moves) == 1
    decided = [RecordedDecision(cycles[9].time_ms + 500, BUNDLE, "b1", "b2", "manual", "manual_unload")]
    seen = observed_moves(cycles, decided)
    assert [(m.cycle, m.bundle, m.source, m.destination, m.kind) for m in seen] == [
        (9, BUNDLE, "b1", "b2", "manual")
    ]
    live = recorded_result(cycles, model, RECORDED, 1.0, seen)
    assert live.moves == [] and live.placements == 0
    # The recorded pair never sheds here (b1 is far below OverloadShedder's threshold): the only owner
    # change of its replay is the operator's, made at the recorded time.
    sim = ReplaySimulation(cycles, model, RECORDED, CONFIG, 1, operator=seen)
    result = sim.run()
    assert result.moves == []
    assert sim.cluster.owners[BUNDLE] == "b2"
    assert {"type": "_assign", "bundle": BUNDLE, "broker": "b2"} in sim.schedule[9]


def test_a_decision_recorded_for_another_bundle_or_later_does_not_explain_a_move() -> None:
    from balancer.sim.replay import RecordedDecision, observed_moves

    cycles = _history()
    _with_operator_unload(cycles, 10, BUNDLE, "b2")
    later = [RecordedDecision(cycles[12].time_ms, BUNDLE, "b1", "b2", "shedding", "overloaded")]
    other = [RecordedDecision(cycles[9].time_ms, "t/ns/0x00000001_0x00000002", "b1", "b2", "shedding", "")]
    assert [m.kind for m in observed_moves(cycles, later)] == ["unrecorded"]
    assert [m.kind for m in observed_moves(cycles, other)] == ["unrecorded"]
    assert [m.kind for m in observed_moves(cycles, [])] == ["unrecorded"]


def test_replay_report_keeps_real_time_gaps_and_separates_the_operator(tmp_path: object) -> None:
    """A history with an 11-minute gap is reported over its real span with the gap named, the operator's
    unload apart from the leader's moves, and plots over real time with the gap left blank."""
    import io
    from pathlib import Path

    from rich.console import Console

    from balancer.sim.replay import RecordedDecision
    from service.commands.replay import chosen_pairs, compare
    from service.commands.replay_output import _broken, _minutes, print_table, write_plots

    cycles = _gapped(_history(), after=14, gap_ms=11 * STEP_MS)
    _with_operator_unload(cycles, 20, BUNDLE, "b3")
    decided = [RecordedDecision(cycles[19].time_ms + 1, BUNDLE, "b1", "b3", "manual", "manual_unload")]
    pairs = chosen_pairs(["BalancedShedder"], RECORDED)
    c = compare(cycles, _exact_lines(), CONFIG, RECORDED, pairs, 1, lambda _: None, decisions=decided)
    assert c["span_minutes"] == pytest.approx(29 + 11)  # not 30 cycles x 1 minute
    assert [round(g["minutes"]) for g in c["gaps"]] == [12]
    assert c["moves_by_kind"] == {"manual": 1} and c["leader_moves"] == []
    assert [m["bundle"] for m in c["operator_moves"]] == [BUNDLE]
    live = next(r for r in c["runs"] if r["recorded"])
    assert live["quality"]["unloads"] == 0
    xs = _minutes(c)
    assert xs[14] - xs[13] == pytest.approx(12.0)  # real time: the gap is on the x axis
    gx, gy = _broken(xs, live["util_spread"], [(14.0, 26.0)])
    assert len(gx) == len(xs) + 1 and math.isnan(gy[14])
    out = io.StringIO()
    print_table(c, Console(file=out, width=200))
    text = out.getvalue()
    assert "40.0 min" in text and "1 gap: 12.0 min without cycles" in text
    assert "operator: 1 move(s)" in text and BUNDLE in text
    assert "live leader: 0 shedding moves" in text
    pngs = write_plots(c, str(Path(str(tmp_path)) / "plots"))
    assert len(pngs) == 2


def test_the_recorded_pair_replayed_is_labelled_recorded() -> None:
    from service.commands.replay import chosen_pairs, compare

    recorded = StrategyPair("BalancedShedder+LeastResourceUsageWithWeight (recorded)", "BalancedShedder",
                            "LeastResourceUsageWithWeight")  # fmt: skip
    pairs = chosen_pairs(["BalancedShedder"], recorded)
    c = compare(_history(), _exact_lines(), CONFIG, recorded, pairs, 1, lambda _: None)
    same = [r for r in c["runs"] if r.get("recorded_pair")]
    assert same and all("recorded" in r["strategy"] for r in same)


def test_an_orphan_listed_by_nobody_for_a_while_is_still_seen_moving() -> None:
    """A broker leaves: its bundles are in no report until their new owner's, so the owner change shows
    only against the owner they had before that stretch (the demo's leaving broker went unseen)."""
    from balancer.sim.replay import RecordedDecision, observed_moves

    cycles = _history(leaves={"b2": 12})
    for k, c in enumerate(cycles):
        if k < 10:
            rb = c.bundles[BUNDLE]
            c.bundles[BUNDLE] = RecordedBundle("b2", rb.rate_in, rb.rate_out, rb.tp_in, rb.tp_out)
        elif k < 13:
            del c.bundles[BUNDLE]  # b2 is leaving or gone: nobody lists the bundle
    decided = [RecordedDecision(cycles[12].time_ms + 1, BUNDLE, "b2", "b1", "placement", "orphan_assigned")]
    seen = observed_moves(cycles, decided)
    assert [(m.cycle, m.source, m.destination, m.kind) for m in seen] == [(12, "b2", "b1", "orphan")]
    assert [m.kind for m in observed_moves(cycles, None)] == ["orphan"]  # inferred: b2 no longer reports
