"""Pulsar's isolation policies, failure domains and anti-affinity groups, written in Pulsar 3.x's
shapes on a real ZooKeeper, steer the live leader: an isolated namespace is only ever placed on
and shed to its primaries (its secondary only once too few primaries are up), no other namespace
lands on a primary, and the anti-affinity group's namespaces land in different failure domains."""

from __future__ import annotations

import threading
import time

import pytest

from balancer.bundles import NamespaceBundles, split_bundle_name
from service.api.metrics import PrometheusMetrics
from service.broker.workload import BundleLoad, Scenario
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import Cluster, assign, fast_config, wait_for

pytestmark = pytest.mark.integration

CLUSTER = "test-cluster"
ISO_NS = "iso/ns1"
GROUP_NS = ("aa/ns0", "aa/ns1")
OTHER_NS = "public/default"
PRIMARIES = {"iso-1:8080", "iso-2:8080"}
SECONDARY = "iso-3:8080"
RACK_A = ("shared-1:8080", "shared-2:8080")
RACK_B = ("shared-3:8080", SECONDARY)  # the secondary is shared with everyone else
DOMAIN = {b: "rack-a" for b in RACK_A} | {b: "rack-b" for b in RACK_B}

# As Pulsar 3.x's ObjectMapper writes them (nulls omitted): pulsar-admin clusters create,
# ns-isolation-policy set, create-failure-domain, tenants create, namespaces create and
# set-anti-affinity-group each leave one of these nodes behind.
ISOLATION = {
    "iso-policy": {
        "namespaces": ["iso/.*"],
        "primary": ["iso-[12]"],
        "secondary": ["iso-3"],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "2", "usage_threshold": "100"},
        },
    }
}


def write_pulsar_nodes(admin: ZkStore) -> None:
    cluster = P.join(P.CLUSTERS, CLUSTER)
    admin.put_json(cluster, {"serviceUrl": "http://iso-1:8080", "brokerServiceUrl": "pulsar://iso-1:6650"})
    admin.put_json(P.isolation_policies_path(CLUSTER), ISOLATION)
    for domain, brokers in (("rack-a", RACK_A), ("rack-b", RACK_B)):
        admin.put_json(P.join(P.failure_domains_root(CLUSTER), domain), {"brokers": list(brokers)})
    # A domain node a hand edit broke: reported and skipped, the others still apply.
    admin.put_json(P.join(P.failure_domains_root(CLUSTER), "broken"), {"brokers": "shared-1:8080"})
    for ns, bundles in ((ISO_NS, 4), (GROUP_NS[0], 1), (GROUP_NS[1], 1), (OTHER_NS, 4)):
        tenant = ns.split("/")[0]
        admin.put_json(P.join("/admin/policies", tenant), {"adminRoles": [], "allowedClusters": [CLUSTER]})
        layout = NamespaceBundles.initial(ns, bundles).to_policies()
        admin.put_json(
            P.join("/admin/policies", ns),
            {"bundles": layout, "replication_clusters": [CLUSTER], "deleted": False},
        )
        local: dict[str, object] = {"bundles": layout, "migrated": False}
        if ns in GROUP_NS:
            local["namespaceAntiAffinityGroup"] = "payments"
        admin.put_json(P.policies_path(ns), local)


class Watch(threading.Thread):
    """Samples ownership all through the test and records every placement that breaks a policy."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True)
        self.cluster, self.violations, self.samples = cluster, set[str](), 0
        self.allowed_iso = set(PRIMARIES)
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                owners = self.cluster.owners()
            except Exception:
                time.sleep(0.05)
                continue
            for bundle, broker in owners.items():
                ns = split_bundle_name(bundle)[0]
                if ns == ISO_NS and broker not in self.allowed_iso:
                    self.violations.add(f"{bundle} (isolated) on {broker}")
                if ns != ISO_NS and broker in PRIMARIES:
                    self.violations.add(f"{bundle} (not isolated) on primary {broker}")
            self.samples += 1
            time.sleep(0.05)

    def settle(self, what: str) -> None:
        """Wait for two fresh samples, so the state of each phase is checked however slow the machine."""
        start = self.samples
        wait_for(lambda: self.samples >= start + 2, 10, what=f"the watch to sample {what}")

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def test_isolation_and_anti_affinity_hold_live(cluster: Cluster) -> None:
    config = fast_config(failureDomainsEnabled=True)
    write_pulsar_nodes(cluster.admin)
    hot = BundleLoad(msg_rate_in=1500, msg_rate_out=1500, throughput_in=1_500_000, throughput_out=1_500_000)
    iso_bundles = NamespaceBundles.initial(ISO_NS, 4).bundle_names
    cluster.scenario(
        Scenario(
            seed=1,
            namespaces={ISO_NS: 4, GROUP_NS[0]: 1, GROUP_NS[1]: 1, OTHER_NS: 4},
            bundles=dict.fromkeys(iso_bundles, hot),
            cpu_percent_per_kmsg=4.0,
        )
    )
    for b in iso_bundles:  # every isolated bundle starts on iso-1, which makes it the hot broker
        assign(cluster.admin, b, "iso-1:8080")
    watch = Watch(cluster)
    watch.start()
    for b in (*PRIMARIES, *RACK_A, *RACK_B):
        cluster.agent(b, config)
    # Every broker up before the leader starts: with a primary missing, min_limit 2 would let the
    # isolated namespace use its secondary from the start.
    wait_for(lambda: len(cluster.admin.read_brokers()) == 6, 15, what="six broker reports")
    metrics = PrometheusMetrics(cluster=CLUSTER)
    # Pulsar's own cluster data is here (as a Pulsar cluster's ZooKeeper holds it): running loadmgr's
    # agents on it takes the mode asked for by name (serve refuses it otherwise, issue 49).
    svc = cluster.service("s1:7101", config, settings_kw={"mode": "zookeeper"}, metrics=metrics)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    watch.settle("the first placement")

    # Anti-affinity across failure domains: the two group namespaces sit in different racks.
    owners = cluster.owners()
    group_owners = [owners[NamespaceBundles.initial(ns, 1).bundle_names[0]] for ns in GROUP_NS]
    assert {DOMAIN[b] for b in group_owners} == {"rack-a", "rack-b"}, group_owners

    # The leader read the policies from Pulsar's nodes (cluster found by itself) and the bad domain
    # node was reported, not fatal.
    ctx = svc.jobs.view.ctx
    assert [p.name for p in ctx.isolation_policies] == ["iso-policy"]
    assert ctx.failure_domains == DOMAIN
    assert ctx.anti_affinity_groups == dict.fromkeys(GROUP_NS, "payments")
    assert svc.store.malformed[P.join(P.failure_domains_root(CLUSTER), "broken")] >= 1

    # Shedding the hot primary: its bundles go to the other primary, never to the idler shared brokers.
    def iso_moves() -> list[str]:
        return [
            d.destination or ""
            for d in svc.decisions(kind="shedding")
            if d.applied and d.bundle and d.bundle.startswith(ISO_NS + "/")
        ]

    wait_for(lambda: iso_moves(), 30, what="a shedding move of an isolated bundle")
    assert set(iso_moves()) == {"iso-2:8080"}
    watch.settle("after shedding")
    # Pulsar's leader counters moved with the unloads, under Pulsar's names and labels.
    # They count a cycle's unloads once the cycle has recorded them all (its moves show in the
    # decisions as each is recorded, before the cycle ends).
    unloading = {"cluster": CLUSTER, "metric": "bundleUnloading"}
    for name in ("pulsar_lb_unload_bundle_total", "pulsar_lb_unload_broker_total"):
        wait_for(
            lambda name=name: (metrics.registry.get_sample_value(name, unloading) or 0) >= 1,
            10,
            what=f"{name} counting the cycle's unloads",
        )

    # Too few primaries (min_limit 2): iso-2 dies, so its isolated bundles may use the secondary,
    # still never a shared broker.
    watch.allowed_iso = PRIMARIES | {SECONDARY}
    wait_for(lambda: "iso-2:8080" in cluster.owners().values(), 10, what="iso-2 serving the moved bundle")
    lost = [b for b, o in cluster.owners().items() if o == "iso-2:8080"]
    agent = cluster.agents.pop("iso-2:8080")
    agent.stop(release=False)
    agent.store.stop()
    wait_for(
        lambda: all(cluster.owners().get(b) in {"iso-1:8080", SECONDARY} for b in lost),
        25,
        what="iso-2's bundles re-placed",
    )
    watch.settle("after the failover to the secondary")
    watch.stop()
    assert not watch.violations, sorted(watch.violations)
