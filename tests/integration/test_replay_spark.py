"""``loadmgr replay`` on a real local Spark over history written by the real sink."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from service.commands import replay as replay_cmd
from service.longterm.replay_extract import extract
from tests.integration.replay_history import (
    BUNDLES,
    CYCLES,
    NAN_BUNDLE_CYCLE,
    STEP_MS,
    T0,
    bundle_name,
    write_history,
)

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.integration, pytest.mark.spark]
END_MS = T0 + (CYCLES + 1) * STEP_MS


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("replay-history")
    write_history(root)
    return root


def test_extraction_keeps_every_valid_row_in_cycle_order(history: Path, spark: Any) -> None:
    got = extract(spark, history.as_uri(), T0, END_MS)
    # the bundle-only cycle at the end is dropped; every other cycle is kept, in time order
    assert [c.time_ms for c in got.cycles] == [T0 + k * STEP_MS for k in range(CYCLES)]
    assert got.bundle_rows == CYCLES * BUNDLES - 1  # the NaN row is skipped
    assert bundle_name(3) not in got.cycles[NAN_BUNDLE_CYCLE].bundles
    assert sorted(got.cycles[9].brokers) == ["b1", "b2", "b3"]
    assert sorted(got.cycles[10].brokers) == ["b1", "b2", "b3", "b4"]
    assert sorted(got.cycles[30].brokers) == ["b1", "b3", "b4"]
    assert got.cycles[0].bundles[bundle_name(0)].owner == "b2"
    assert got.cycles[31].bundles[bundle_name(0)].owner == "b3"  # b2 left at cycle 30
    b1 = got.cycles[12].brokers["b1"]
    assert b1.msg_rate == pytest.approx(
        sum(r.rate for r in got.cycles[12].bundles.values() if r.owner == "b1")
    )
    # CPU = 5 + msg/s / 1000 plus noise: the learned lines find it where traffic varied; b4 never
    # carried any, so its line is flat (the replay puts it on the fleet's median line)
    assert got.lines["b4"].slope == 0.0
    for line in (got.lines[b] for b in ("b1", "b2", "b3")):
        assert line.slope == pytest.approx(1000.0, rel=0.05)
        assert line.intercept is not None and -line.intercept / line.slope == pytest.approx(5.0, abs=1.0)
    # a range holding a single cycle is not a history to replay
    from service.longterm.input import EmptyHistory

    with pytest.raises(EmptyHistory, match="at least two"):
        extract(spark, history.as_uri(), T0, T0 + 1)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    replay_cmd.register(parser.add_subparsers())
    return parser.parse_args(["replay", *argv])


def test_replay_command_compares_strategies_with_the_live_leader(
    history: Path, spark: Any, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "replay.json"
    args = _args(
        "--history", str(history), "--from", "2024-03-09T16:00:00Z", "--to", "2024-03-09T17:00:00Z",
        "--json", str(out), "--plots", str(tmp_path / "plots"),
    )  # fmt: skip
    assert replay_cmd.run(replay_cmd.options_from_args(args), spark) == 0
    text = capsys.readouterr().out
    c = json.loads(out.read_text())
    assert c["recorded_strategy"] == "ThresholdShedder+LeastResourceUsageWithWeight (recorded)"
    assert "_loadmgr.json" in c["config_source"]
    labels = [r["strategy"] for r in c["runs"]]
    # the recorded pair is a default one: it runs once, labelled as the recorded pair replayed
    assert labels == [
        "live leader (recorded)", "Threshold+LRUW (recorded pair)", "Uniform+LLTMR", "Overload+LLTMR",
        "AvgShedder", "BalancedShedder",
    ]  # fmt: skip
    assert [r["strategy"] for r in c["runs"] if r.get("recorded_pair")] == ["Threshold+LRUW (recorded pair)"]
    live = c["runs"][0]["quality"]
    assert live["unloads"] == 6  # the leader's recorded moves, b1 -> b3
    # this history predates recorded decisions: their kinds are inferred, and the output says so
    assert c["decisions_recorded"] is False and c["moves_by_kind"]["shedding"] == 6
    assert "inferred: this history records no decision kinds" in text
    assert c["interval_minutes"] == STEP_MS / 60_000
    for label in labels:
        assert label in text
    assert "independent of its owner" in text
    # the model alone follows the recorded CPU to within its noise; the replayed decisions add to that
    assert set(c["model_error"]) == {"b1", "b2", "b3", "b4"}
    assert all(e["mean_abs"] < 1.0 for e in c["model_error"].values())
    assert set(c["recorded_replay_error"]) == {"b1", "b2", "b3", "b4"}
    assert all(e["samples"] > 0 for e in c["recorded_replay_error"].values())
    pngs = sorted((tmp_path / "plots").glob("*.png"))
    assert len(pngs) == len(labels) - 1


def test_bad_arguments_and_empty_ranges_are_one_line_errors(history: Path, capsys: Any) -> None:
    rc = replay_cmd._run(_args("--history", str(history), "--from", "2024-03-10", "--to", "2024-03-09"))
    assert rc == replay_cmd.EXIT_BAD_ARGS
    assert "--from" in capsys.readouterr().err
    rc = replay_cmd._run(_args("--history", str(history), "--strategy", "Bogus"))
    assert rc == replay_cmd.EXIT_BAD_ARGS
    assert "Bogus" in capsys.readouterr().err
    rc = replay_cmd._run(
        _args("--history", str(history), "--set", "loadBalancerSheddingGracePeriodMinutes=x")
    )
    assert rc == replay_cmd.EXIT_BAD_ARGS
    assert "loadBalancerSheddingGracePeriodMinutes" in capsys.readouterr().err
