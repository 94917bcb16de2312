"""Split as Pulsar does it, live in ZooKeeper-native mode: a manual split keeps the children with
the parent's owner unless asked to unload (``split-bundle -u``); with the unload the children are
placed afresh. A single-broker cluster never auto-splits; with a second broker the automatic split
runs, unloads its children as ``loadBalancerAutoUnloadSplitBundlesEnabled`` asks, and counts in
``pulsar_lb_bundles_split_total``."""

from __future__ import annotations

import pytest

from balancer.bundles import split_bundle_name
from service.api.metrics import PrometheusMetrics
from service.broker.workload import Scenario
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "public/default"


def _children(cluster: Cluster, parent: str) -> list[str]:
    ns, rng = split_bundle_name(parent)
    return [
        b
        for b in cluster.bundles()
        if split_bundle_name(b)[0] == ns and rng.lower <= split_bundle_name(b)[1].lower < rng.upper
    ]


def test_manual_split_unloads_only_when_asked(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(Scenario(seed=1, namespaces={NS: 2}))
    cluster.assign_all("b1:8080")
    for b in ("b1:8080", "b2:8080"):
        cluster.agent(b, config)
    svc = cluster.service("s1:7201", config)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: set(cluster.owners().values()) == {"b1:8080"} and len(cluster.owners()) == 2, 15)
    first, second = sorted(cluster.bundles())

    # The namespace's Policies node, as pulsar-admin namespaces create leaves it.
    layout = cluster.admin.read_layout(NS)
    assert layout is not None
    cluster.admin.put_json(f"/admin/policies/{NS}", {"bundles": layout.value.to_policies(), "deleted": False})
    svc.split(first, "range_equally_divide")  # pulsar-admin namespaces split-bundle (no -u)
    kids = _children(cluster, first)
    policies = cluster.admin.get_json(f"/admin/policies/{NS}").value
    assert policies["bundles"]["numBundles"] == 3 and policies["deleted"] is False  # kept in step
    assert len(kids) == 2 and first not in cluster.bundles()
    assignments = cluster.admin.read_assignments()
    assert {assignments[k].value.broker for k in kids} == {"b1:8080"}
    assert {assignments[k].value.reason for k in kids} == {f"split of {first}"}
    wait_for(lambda: all(cluster.owners().get(k) == "b1:8080" for k in kids), 10, what="children kept")

    record = svc.split(second, "range_equally_divide", unload=True)  # split-bundle -u
    assert record.explanation["numbers"]["unload"] is True
    kids = _children(cluster, second)
    assignments = cluster.admin.read_assignments()
    # Not handed to the parent's owner by the split: each child went through placement.
    assert {assignments[k].value.reason for k in kids} == {"new_bundle_assigned"}
    placed = {d.bundle for d in svc.decisions(kind="placement")}
    assert set(kids) <= placed
    wait_for(lambda: all(k in cluster.owners() for k in kids), 10, what="unloaded children owned again")


def test_auto_split_needs_two_brokers_and_counts_in_pulsars_metric(cluster: Cluster) -> None:
    # Every bundle has 4 topics (the workload's default) > 2: all are hot by Pulsar's topic limit.
    config = fast_config(
        loadBalancerAutoBundleSplitEnabled=True,
        loadBalancerNamespaceBundleMaxTopics=2,
        loadBalancerNamespaceMaximumBundles=4,
    )
    cluster.scenario(Scenario(seed=1, namespaces={NS: 2}))
    cluster.agent("b1:8080", config)
    metrics = PrometheusMetrics(cluster="c1")
    svc = cluster.service("s1:7202", config, metrics=metrics)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: len(cluster.owners()) == 2, 15, what="both bundles owned")
    wait_for(lambda: svc.jobs.cycles >= 3, 20, what="three cycles with one broker")
    assert len(cluster.bundles()) == 2  # Pulsar's checkNamespaceBundleSplit: knownBrokers <= 1
    split = {"cluster": "c1", "metric": "bundlesSplit"}
    assert metrics.registry.get_sample_value("pulsar_lb_bundles_split_total", split) == 0

    cluster.agent("b2:8080", config)
    wait_for(lambda: len(cluster.bundles()) == 4, 20, what="the automatic split")
    # Counted when the split job ends, as Pulsar's updateBundleSplitMetrics after its loop.
    wait_for(
        lambda: metrics.registry.get_sample_value("pulsar_lb_bundles_split_total", split) == 2,
        10,
        what="the split counter",
    )
    auto = [d for d in svc.decisions(kind="split")]
    assert len(auto) == 2
    # Auto-unload is on by default and another broker can take the children: unloaded, re-placed.
    assert all(d.explanation["numbers"]["unload"] is True for d in auto)
    assert all(d.explanation["numbers"]["unloadReason"] == "split_unload" for d in auto)
    wait_for(lambda: len(cluster.owners()) == 4, 15, what="children owned")
