"""A plan is carried out, not fired (issue 46): on real ZooKeeper with real agents, a plan of several
moves from one broker is released one move at a time, each only once the previous bundle is served
at its destination (its owner node names it), and the time from unload to served is exported as a
histogram. A leader that loses its session drops what it had queued."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from balancer.cycle import Move
from balancer.explain import explain
from service.api.metrics import PrometheusMetrics
from service.broker.workload import Scenario
from service.leader import jobs as jobs_module
from service.leader.move_queue import MoveRequest
from tests.integration.conftest import Cluster, OwnershipChecker, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "t/paced"
B1, B2, B3 = "b1:8080", "b2:8080", "b3:8080"
MOVES = 4


def _served_histogram(metrics: PrometheusMetrics) -> tuple[float, float]:
    """(count, sum) of the ZooKeeper-native shedding series of the move histogram."""
    count = total = 0.0
    for fam in text_string_to_metric_families(metrics.render().decode()):
        if fam.name != "loadmgr_bundle_move_served_duration_seconds":
            continue
        for s in fam.samples:
            if s.labels.get("mode") == "zookeeper" and s.labels.get("kind") == "shedding":
                if s.name.endswith("_count"):
                    count = s.value
                elif s.name.endswith("_sum"):
                    total = s.value
    return count, total


def test_a_plan_from_one_broker_goes_one_move_at_a_time_each_after_the_previous_is_served(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = fast_config()
    cluster.scenario(Scenario(namespaces={NS: 6}))
    cluster.assign_all(B1)
    for b in (B1, B2, B3):
        cluster.agent(b, config)
    bundles = sorted(cluster.bundles())
    wait_for(
        lambda: set(cluster.owners().values()) == {B1} and len(cluster.owners()) == 6, 20, what="b1 owns all"
    )
    chosen = {b: (B2, B3)[i % 2] for i, b in enumerate(bundles[:MOVES])}
    real = jobs_module.plan_shedding_cycle

    def plan(*a: Any, **kw: Any) -> Any:
        # The shedder's plan, whatever the load: the chosen bundles still on b1 and not just moved,
        # as a re-plan would find them (each cycle replaces what is still queued).
        out = real(*a, **kw)
        load, now = a[0], a[5]
        owners = cluster.owners()
        out.moves = [
            Move(b, B1, dest, explain("overloaded", "the test's plan", subject=b))
            for b, dest in chosen.items()
            if owners.get(b) == B1 and b not in load.recently_unloaded_bundles
        ]
        for m in out.moves:
            load.recently_unloaded_bundles[m.bundle] = now
        return out

    monkeypatch.setattr(jobs_module, "plan_shedding_cycle", plan)
    checker = OwnershipChecker(cluster)
    checker.start()
    metrics = PrometheusMetrics(cluster="test")
    svc = cluster.service("s1:7101", config, metrics=metrics)
    wait_for(svc.is_leader, 15, what="leadership")

    def moved() -> bool:
        return all(cluster.owners().get(b) == d for b, d in chosen.items())

    wait_for(moved, 60, what="every planned move carried out")
    checker.stop()
    assert not checker.violations, checker.violations

    records = {}
    for d in svc.decisions(kind="shedding", limit=1000):
        if d.bundle in chosen and d.state == "served":
            records[d.bundle] = d
    wait_for(
        lambda: (
            len({d.bundle for d in svc.decisions(kind="shedding", limit=1000) if d.state == "served"})
            == MOVES
        ),
        10,
        what="every move seen served",
    )
    served = sorted(
        (d for d in svc.decisions(kind="shedding", limit=1000) if d.bundle in chosen and d.state == "served"),
        key=lambda d: d.released_ms or 0,
    )
    assert [d.bundle for d in served] and len({d.bundle for d in served}) == MOVES
    for d in served:
        assert (
            d.applied and d.planned_ms is not None and d.released_ms is not None and d.served_ms is not None
        )
        assert d.planned_ms <= d.released_ms <= d.served_ms
        assert d.destination == chosen[str(d.bundle)]
    # One unload in flight from b1 at a time: each released only once the one before was served.
    for before, after in itertools.pairwise(served):
        assert after.released_ms is not None and before.served_ms is not None
        assert after.released_ms >= before.served_ms, (before, after)
        # ...and loadBalancerUnloadSpacingSeconds after the one before started (b1 is every source).
        assert after.released_ms - before.released_ms >= 750, (before, after)
    # Those waiting said why (their turn behind the move in flight), and the histogram has each move.
    count, total = _served_histogram(metrics)
    assert count == MOVES
    spans = sum(((d.served_ms or 0) - (d.released_ms or 0)) / 1000 for d in served)
    assert total == pytest.approx(spans, abs=0.01)
    assert svc.jobs.moves_served >= MOVES


def _expire(hosts: str, client: KazooClient) -> None:
    """Expire ``client``'s session from outside, as a long pause or a partition would."""
    sid, password = client.client_id
    twin = KazooClient(hosts=hosts, client_id=(sid, password))
    twin.start()
    twin.stop()
    twin.close()


def test_a_leader_that_loses_its_session_drops_its_queue(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(Scenario(namespaces={NS: 4}))
    cluster.assign_all(B1)
    for b in (B1, B2):
        cluster.agent(b, config)
    wait_for(lambda: len(cluster.owners()) == 4, 20, what="b1 owns all")
    svc = cluster.service("s1:7102", config)
    wait_for(lambda: svc.is_leader() and svc.ready(), 20, what="a ready leader")
    first, *rest = sorted(cluster.bundles())
    why = explain("manual_unload", "a move in flight that nobody carries out", subject=first)
    moves = [
        MoveRequest(b, B1, B2, explain("drain", "held behind the move in flight", subject=b)) for b in rest
    ]
    with svc._lock:
        # b1 has a move in flight that is never served (nothing was written for it): the drain's
        # moves from b1 all wait behind it, still queued when the session goes.
        svc.jobs.moves.track(MoveRequest(first, B1, B2, why), "manual", int(time.time() * 1000))
        svc.jobs.moves.submit(moves, "drain")
        assert svc.jobs.move_tick(config) == 0
    assert len(svc.jobs.moves.queued()) == len(rest) and len(svc.jobs.moves.in_flight()) == 1
    assert {w.reason for w in svc.jobs.moves.waiting().values()} == {"source_busy"}
    # The dry run shows the schedule beside its plan: what is in flight, what else is queued.
    _, schedule = svc.dry_run_schedule()
    assert [f["bundle"] for f in schedule["inFlight"]] == [first] and schedule["queuedOtherKinds"] == len(
        rest
    )
    assert len(svc.jobs.moves.queued()) == len(rest)  # the dry run queued nothing
    _expire(cluster.hosts, svc.store.client)
    wait_for(lambda: len(svc.jobs.moves) == 0, 20, what="the queue dropped with the leadership")
    states = {d.bundle: d.state for d in svc.decisions(kind="drain", limit=100)}
    assert states == dict.fromkeys(rest, "dropped"), states
    assert all(cluster.owners().get(b) == B1 for b in rest)  # nothing was written
