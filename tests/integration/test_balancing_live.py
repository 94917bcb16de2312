"""A skewed simulated load is balanced live: bundles move, ownership and reports follow, and the
decision log explains each move. A malformed report is skipped and counted; the leader goes on."""

from __future__ import annotations

import pytest

from service.broker.workload import skewed_scenario
from service.zookeeper import paths as P
from tests.integration.conftest import Cluster, OwnershipChecker, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "public/default"
BROKERS = ("b1:8080", "b2:8080", "b3:8080")


def test_skewed_load_is_shed_and_moves_show_everywhere(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(skewed_scenario(NS, 8, seed=7, cpu_percent_per_kmsg=4.0))
    cluster.assign_all("b1:8080")  # every bundle starts on one broker
    checker = OwnershipChecker(cluster)
    checker.start()
    for b in BROKERS:
        cluster.agent(b, config)
    wait_for(
        lambda: len(cluster.owners()) == 8 and set(cluster.owners().values()) == {"b1:8080"},
        15,
        what="b1 owns all eight bundles",
    )
    wait_for(lambda: len(cluster.admin.read_brokers()["b1:8080"].bundles) == 8, 10, what="b1's report")
    before = cluster.admin.read_brokers()
    hot = before["b1:8080"].cpu.percent_usage()
    assert hot > 3 * before["b2:8080"].cpu.percent_usage()

    svc = cluster.service("s1:7001", config)
    wait_for(svc.is_leader, 15, what="leadership")
    # A move is logged when planned (state "planned"), then written when the disruption budget lets it.
    wait_for(
        lambda: any(d.kind == "shedding" and d.applied for d in svc.decisions()),
        20,
        what="a shedding move written",
    )
    moves = [d for d in svc.decisions(kind="shedding") if d.applied]
    assert moves, "the shedding decision was not applied"
    first = moves[-1]
    assert first.source == "b1:8080" and first.destination in ("b2:8080", "b3:8080")
    assert first.explanation["reason"] and first.explanation["message"]
    assert first.explanation["numbers"]["leaderEpoch"] is not None

    # The move shows in ownership, then in both brokers' next reports.
    wait_for(lambda: cluster.owners().get(first.bundle) == first.destination, 10, what="ownership moved")

    def reported() -> bool:
        r = cluster.admin.read_brokers()
        return first.bundle in r[first.destination].bundles and first.bundle not in r["b1:8080"].bundles

    wait_for(reported, 10, what="reports show the move")
    after = cluster.admin.read_brokers()
    assert after["b1:8080"].cpu.percent_usage() < hot
    assert len({o for o in cluster.owners().values()}) >= 2
    # Nothing is left unowned. Not a snapshot: the leader goes on shedding, and a bundle in a later
    # move is unowned between its old owner's release and its new owner's next ownership poll.
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 10, what="every bundle owned")
    checker.stop()
    assert checker.samples >= 5 and not checker.violations, checker.violations


def test_malformed_report_is_skipped_and_counted(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(skewed_scenario(NS, 4, seed=3))
    for b in BROKERS[:2]:
        cluster.agent(b, config)
    seen: list[str] = []

    class Sink:
        def __getattr__(self, name: str):  # every other MetricsSink method is a no-op
            return lambda *a, **k: None

        def malformed_node(self, kind: str) -> None:
            seen.append(kind)

    svc = cluster.service("s1:7002", config, metrics=Sink())
    cluster.admin.client.create(P.broker_path("garbage:1"), b"{not json")
    cluster.admin.client.create(P.broker_path("wrongshape:1"), b'{"cpu": "lots"}')
    wait_for(svc.is_leader, 15, what="leadership")
    # The leader goes on: it places every bundle on the two real brokers and keeps cycling.
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 15, what="all bundles owned")
    assert set(cluster.owners().values()) <= {"b1:8080", "b2:8080"}
    cycles = svc.jobs.cycles
    wait_for(lambda: svc.jobs.cycles >= cycles + 2, 15, what="two more shedding cycles")
    view = svc.view()
    assert "garbage:1" not in view.brokers and "wrongshape:1" not in view.brokers
    assert seen == ["brokers", "brokers"]  # once per node version, labelled by kind, not by id
    assert view.malformed[P.broker_path("garbage:1")] >= 1
