"""Pins BalancedShedder's decisions on a few simulated runs to a recorded fixture.

``fixtures/balanced_decisions.json`` was written by the strategy's code as it stood before the
shedding speed work, so a change meant to be a pure optimisation must reproduce it exactly: every
unload with its source and bound destination in order, the summary numbers, the per-broker hit
counters, capacity estimates and settling marks after each call, and every move the cycle made.
A deliberate change of behaviour regenerates it with
``.venv/bin/python -m tests.unit.test_balanced_decisions`` and says why in the commit.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData
from balancer.shedding.balanced import BalancedShedder
from balancer.shedding.base import SheddingResult
from balancer.sim.engine import PAIRS, Simulation
from service.commands.scenario_files import load_scenario

TIME_LIMIT_KEY = "loadBalancerBalancedShedderPlannerTimeLimitSeconds"
FIXTURE = Path(__file__).parent / "fixtures" / "balanced_decisions.json"
# (scenario, scale, cycles): small versions that still make the strategy trigger, water-fill,
# learn capacities, settle and refill restarted brokers.
RUNS: list[tuple[str, float, int]] = [
    ("hot_bundle", 1.0, 30),
    ("scale_out", 0.2, 8),
    ("heterogeneous", 0.5, 16),
    ("seed_80_80_20", 1.0, 10),
    ("rolling_restart", 0.5, 30),
    ("cpu_spike", 0.5, 25),
]


# How the planner ran, not what was decided: its solve count and (with a clock) its time.
DIAGNOSTIC = {"plannerSolves", "plannerSeconds"}


def _call_record(s: BalancedShedder, result: SheddingResult) -> dict[str, Any]:
    return {
        "unloads": [[src, b, result.destinations.get(b)] for src, b in result.bundles()],
        "summary": {
            k: v
            for k, v in result.summary.numbers.items()
            if isinstance(v, (int, float, str)) and k not in DIAGNOSTIC
        },
        "reasons": sorted(Counter(e.reason for e in result.brokers.values()).items()),
        "hits": sorted(s.hits.items()),
        "capacity": sorted(s.capacity.items()),
        "outliers": sorted(s.outliers.items()),
        "touched": sorted(s.touched.items()),
    }


def record(name: str, scale: float, cycles: int) -> dict[str, Any]:
    # The planner's wall-clock limit beyond reach: a loaded machine must not change what is recorded.
    pair = PAIRS["BalancedShedder"]
    pair = dataclasses.replace(pair, config={**pair.config, TIME_LIMIT_KEY: 600.0})
    sim = Simulation(load_scenario(name, scale=scale, cycles=cycles), pair, 1)
    shedder = sim.shedder
    assert isinstance(shedder, BalancedShedder)
    calls: list[dict[str, Any]] = []
    find = shedder.find_bundles_for_unloading

    def recording(load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        result = find(load, config)
        calls.append(_call_record(shedder, result))
        return result

    shedder.find_bundles_for_unloading = recording  # type: ignore[method-assign]
    result = sim.run()
    moves = [[m.cycle, m.bundle, m.source, m.destination] for m in result.moves]
    return {"scenario": name, "scale": scale, "cycles": cycles, "calls": calls, "moves": moves}


def _normalised(data: Any) -> Any:
    """Tuples become lists, as in the JSON fixture."""
    return json.loads(json.dumps(data))


@pytest.mark.parametrize(("name", "scale", "cycles"), RUNS, ids=[r[0] for r in RUNS])
def test_decisions_match_the_recorded_fixture(name: str, scale: float, cycles: int) -> None:
    expected = json.loads(FIXTURE.read_text())[name]
    got = _normalised(record(name, scale, cycles))
    assert got["moves"] == expected["moves"]
    assert len(got["calls"]) == len(expected["calls"])
    for k, (g, e) in enumerate(zip(got["calls"], expected["calls"], strict=True)):
        assert g == e, f"{name}: shedding call {k} differs"


def test_fixture_covers_real_work() -> None:
    data = json.loads(FIXTURE.read_text())
    assert set(data) == {r[0] for r in RUNS}
    assert sum(len(data[n]["moves"]) for n in data) > 100
    assert all(data[n]["moves"] for n in data if n != "cpu_spike")


if __name__ == "__main__":
    data = {r[0]: record(*r) for r in RUNS}
    FIXTURE.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size:,} bytes)", file=sys.stderr)
