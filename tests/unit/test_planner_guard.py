"""The least-move planner's plan is accepted only if no move goes from a less to a more utilised
broker at decision time, and only if HiGHS finished within its time (issue 49, item 12)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import balancer.shedding.water_fill as wf
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData, TimeAverageMessageData
from balancer.shedding.capacity import View
from balancer.shedding.exact_plan import PlannerBudget
from balancer.shedding.least_move import Plan, Solves, least_move_plan
from balancer.shedding.selection import ResultBuilder

NO_LIMIT = PlannerBudget(time_limit=600.0)


def _view(brokers: dict[str, tuple[float, list[float]]]) -> tuple[LoadData, View]:
    """broker -> (reported utilisation, bundle msg rates); capacity 1 unit a point, so each broker's
    traffic-implied level is its traffic and its report may differ from it (CPU noise)."""
    load = LoadData()
    traffic: dict[str, float] = {}
    for name, (_, rates) in brokers.items():
        local = LocalBrokerData()
        for i, r in enumerate(rates):
            bundle = f"t/{name}/0x{i:08x}_0x{i + 1:08x}"
            local.bundles.add(bundle)
            w = TimeAverageMessageData(max_samples=10, num_samples=10, msg_rate_in=r)
            load.bundle_data[bundle] = BundleData(short_term_data=w, long_term_data=w)
        local.msg_rate_in = sum(rates)
        load.broker_data[name] = BrokerData(local_data=local)
        traffic[name] = sum(rates)
    util = {b: u for b, (u, _) in brokers.items()}
    target = sum(traffic.values()) / len(traffic)
    v = View(util, traffic, dict.fromkeys(util, 1.0), sum(util.values()) / len(util), target, 1.0, 6 * 1024.0)
    return load, v


def _fill(load: LoadData, v: View, tol: float = 1.0) -> ResultBuilder:
    target = v.traffic_target
    sources = [b for b in v.util if v.traffic[b] > target + tol]
    dests = [b for b in v.util if v.traffic[b] < target - tol]
    others = [b for b in v.util if b not in sources and b not in dests]
    out = ResultBuilder("BalancedShedder")
    wf.water_fill(load, v, sources, dests, tol, out, None, others, exact=True, budget=NO_LIMIT)
    return out


clusters = st.lists(
    st.tuples(
        st.floats(-6.0, 6.0),  # the report's noise against the traffic-implied level, points
        st.lists(st.floats(0.2, 12.0), min_size=1, max_size=12),  # bundle rates
    ),
    min_size=3,
    max_size=7,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters)
def test_an_accepted_least_move_plan_never_moves_uphill_at_decision_time(spec: list[Any]) -> None:
    load, v = _view({f"b{i}": (max(0.0, sum(rates) + noise), rates) for i, (noise, rates) in enumerate(spec)})
    out = _fill(load, v)
    if out.notes.get("planner") != "least_move":
        return  # the fill's plan, or none: its own guards, its own tests
    for d in out.decisions:
        s, dest = d.numbers["broker"], d.numbers["destination"]
        assert v.util[s] >= v.util[dest], d
        assert v.implied(s) >= v.implied(dest), d


def test_a_plan_moving_uphill_is_refused_for_the_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    # a 60 % and b 40 % by traffic; b reports more than a (another process's CPU on b).
    load, v = _view({"a": (45.0, [10.0, 10.0, 10.0, 10.0, 10.0, 10.0]), "b": (50.0, [10.0] * 4)})
    uphill = Plan([("a", "t/a/0x00000000_0x00000001", "b", 10.0)], {"a": 50.0, "b": 50.0}, 10.0, 1.0)
    monkeypatch.setattr(wf, "exact_plan", lambda *a, **k: uphill)
    out = _fill(load, v)
    assert out.notes["planner"].startswith("fill: the least-move plan moved uphill")
    assert "a 45.0% -> b 50.0%" in out.notes["planner"]
    assert out.notes["plannerRejectedUphill"] == 1
    assert all(d.numbers["planner"] == "fill" for d in out.decisions)


def test_a_solve_the_time_limit_stopped_gives_no_plan_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import scipy.optimize

    seen: dict[str, Any] = {}

    def stopped(*a: Any, options: dict[str, Any], **k: Any) -> Any:
        seen.update(options)
        return SimpleNamespace(status=1, message="Time limit reached. (HiGHS Status 13: ...)", x=[1.0] * 8)

    monkeypatch.setattr(scipy.optimize, "milp", stopped)
    solves = Solves()
    plan = least_move_plan(
        levels={"a": 60.0, "b": 40.0},
        used={"a": 60.0, "b": 40.0},
        capacity={"a": 1.0, "b": 1.0},
        movable={"a": ([2.0, 9.0, 10.0], ["a/0", "a/1", "a/2"]), "b": ([5.0], ["b/0"])},
        participants=["a", "b"],
        others=[],
        aim=1.15,
        time_limit=0.5,
        solves=solves,
    )
    assert plan is None and solves.timed_out and solves.count == 1
    assert seen["time_limit"] == 0.5 and seen["disp"] is False  # bounded, and HiGHS prints nothing


def test_the_time_limit_is_shared_among_a_cycles_solves_and_reported() -> None:
    load, v = _view({"a": (66.0, [6.0] * 11), "b": (60.0, [6.0] * 10), "c": (30.0, [6.0] * 5)})
    ticks = iter(range(100))
    out = ResultBuilder("BalancedShedder")
    budget = PlannerBudget(time_limit=600.0, clock=lambda: float(next(ticks)))
    wf.water_fill(load, v, ["a", "b"], ["c"], 1.0, out, None, [], exact=True, budget=budget)
    assert out.notes["plannerSeconds"] == 1.0  # one clock reading before the planner, one after
    assert out.notes["plannerSolves"] >= 1
