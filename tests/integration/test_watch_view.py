"""The leader's watch-fed view equals a full re-read of ZooKeeper after random changes.

A synthetic cluster (:mod:`service.demo.synthetic`) of a few thousand bundles, then rounds of what
happens in production: brokers die and join, the real leader code sheds (batched, fenced moves),
reconciles orphans, splits bundles and writes bundle data, agents follow the assignments, the
long-term job merges, reports change, Pulsar's placement policies (isolation policies, failure
domains, anti-affinity groups) are set and changed, and the leader's own session is expired. After
every round the incremental view must equal what ``ZkStore.read_*`` and ``read_placement_policies``
read from scratch; a refresh of an unchanged cluster must read nothing.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from kazoo.client import KazooClient

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import TimeAverageMessageData
from service.demo.synthetic import SyntheticCluster
from service.leader.cluster_view import DecisionLog
from service.leader.executors import ZkExecutor
from service.leader.jobs import LeaderJobs
from service.leader.load_view import LoadView
from service.leader.metrics_sink import NoMetrics
from service.leader.service import make_strategies
from service.leader.stored_bundles import unpack
from service.longterm.merge import merge_long_term
from service.zookeeper import paths as P
from service.zookeeper.metadata.policies import read_placement_policies
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.cache import WatchCache, depth_leaf
from tests.integration.conftest import wait_for

# Small enough that each full re-read to compare with stays near a second (bench/live_scale.py runs
# the same check at 100,000 bundles).
BROKERS, BUNDLES, NAMESPACES = 40, 2000, 20
CONFIG = LoadBalancerConfig.from_dict(
    {
        # ThresholdShedder moves from the hot half on its first cycle (BalancedShedder waits for
        # hit counts), so every round has leader writes to get right.
        "loadBalancerBundleUnloadMinThroughputThreshold": 0.0,
        "loadBalancerMaxNumberOfBundlesInBundleLoadReport": 0,  # write every bundle's data
    }
)


def _differences(view: LoadView, leader: ZkStore, admin: ZkStore) -> list[str]:
    """What the view's cache holds that a full read does not, after one sync (empty: equal)."""
    snap = view.snapshot(leader, 0)
    cache = view.cache_for(leader)
    out: list[str] = []
    if snap.brokers != admin.read_brokers():
        out.append(f"brokers {sorted(snap.brokers)[:3]} vs {sorted(admin.read_brokers())[:3]}")
    layouts = {ns: (got.value.bundle_names, got.version) for ns, got in admin.read_layouts().items()}
    if {ns: (got.value.bundle_names, got.version) for ns, got in snap.layouts.items()} != layouts:
        out.append("layouts")
    owners = admin.read_owners()
    if snap.owners != owners:
        out.append(f"owners: {len(snap.owners)} vs {len(owners)}, {_diff(snap.owners, owners)}")
    assignments = admin.read_assignments()
    if snap.assignments != assignments:
        out.append(f"assignments: {_diff(snap.assignments, assignments)}")
    nodes = admin.read_bundle_data_versioned()
    if cache.bundle_data.versions != {b: got.version for b, got in nodes.items()}:
        full = {b: g.version for b, g in nodes.items()}
        out.append(f"bundle-data versions: {_diff(cache.bundle_data.versions, full)}")
    # Held packed (service.leader.stored_bundles); given back as the BundleData a full read decodes.
    full_data = {b: got.value for b, got in nodes.items() if got.value is not None}
    if {b: unpack(p) for b, p in cache.bundle_data.values.items()} != full_data:
        out.append("bundle-data values")
    policies = cache.policies.current("", sorted(snap.layouts))
    full_policies = read_placement_policies(admin, "", sorted(layouts))
    if policies != full_policies:
        out.append(f"placement policies: {policies} vs {full_policies}")
    return out


def _set_group(admin: ZkStore, namespace: str, group: object) -> None:
    """``pulsar-admin namespaces set-anti-affinity-group``: a field of the namespace's local policies."""
    got = admin.get_json(P.policies_path(namespace))
    assert got is not None
    admin.put_json(
        P.policies_path(namespace), {**got.value, "namespaceAntiAffinityGroup": group}, got.version
    )


def _change_policies(
    admin: ZkStore, rng: random.Random, brokers: list[str], namespaces: list[str], step: int
) -> None:
    """One round of policy edits, in Pulsar 3.x's node shapes; each step changes every source."""
    cluster, domains = "scale-cluster", P.failure_domains_root("scale-cluster")
    if step == 0:
        admin.put_json(P.join(P.CLUSTERS, cluster), {"serviceUrl": "http://x:8080"})
        admin.put_json(P.join(P.CLUSTERS, "global"), {})  # Pulsar's pseudo-cluster: not a second one
    picked = rng.sample(brokers, 6)
    isolation = {
        "iso": {
            "namespaces": [f"{namespaces[step]}"],
            "primary": [picked[0].split(":")[0]],
            "secondary": [],
            "auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": "1"}},
        },
        "bad": {"namespaces": ["("], "primary": []},  # reported, the other policy still applies
    }
    admin.put_json(P.isolation_policies_path(cluster), isolation)
    admin.put_json(P.join(domains, "rack-a"), {"brokers": picked[1:3]})
    admin.put_json(P.join(domains, f"rack-b{step}"), {"brokers": picked[3:5]})
    if step > 0:
        admin.delete(P.join(domains, f"rack-b{step - 1}"))
    admin.put_json(P.join(domains, "broken"), {"brokers": picked[5]})
    for ns in rng.sample(namespaces, 3):
        _set_group(admin, ns, rng.choice(["payments", "orders", " ", None, 5]))


def _diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return f"{len(keys)} differ, e.g. {[(k, a.get(k), b.get(k)) for k in keys[:2]]}"


def _assert_equal(view: LoadView, leader: ZkStore, admin: ZkStore, what: str) -> None:
    # Watch events of other sessions' writes arrive asynchronously: equal once they are in.
    time.sleep(0.3)
    try:
        wait_for(lambda: not _differences(view, leader, admin), 20, 0.5, what)
    except AssertionError:
        raise AssertionError(f"after {what}: {_differences(view, leader, admin)}") from None


def _expire(store: ZkStore, hosts: str) -> None:
    """Expire ``store``'s session from outside, as a long GC pause or partition would."""
    old = store.session_id
    sid, password = store.client.client_id
    twin = KazooClient(hosts=hosts, client_id=(sid, password))
    twin.start()
    twin.stop()
    twin.close()
    wait_for(lambda: store.connected and store.session_id not in (None, old), 30, what="a new session")


def test_incremental_view_equals_full_read_after_random_changes(zk_chroot_hosts: str) -> None:
    rng = random.Random(7)
    cluster = SyntheticCluster(zk_chroot_hosts, BROKERS, BUNDLES, NAMESPACES, brokers_per_session=5)
    leader = ZkStore(zk_chroot_hosts, session_timeout_s=4.0)
    leader.start()
    try:
        cluster.populate()
        fence = leader.bump_epoch("leader")
        view = LoadView()
        executor = ZkExecutor(leader, lambda: fence)
        jobs = LeaderJobs(
            leader, executor, executor, view, DecisionLog(100), NoMetrics(), None,
            lambda: True, lambda: None, random.Random(1),
        )  # fmt: skip
        shedder, placement = make_strategies(CONFIG)
        strategies = (shedder, placement)

        view.refresh(leader, int(time.time() * 1000), strategies)
        assert view.cache is not None
        first = view.cache.last_stats
        assert first["owners"].full and first["owners"].data_read == BUNDLES
        _assert_equal(view, leader, cluster.admin, "the first full sync")

        # A refresh with nothing changed reads nothing at all.
        view.refresh(leader, int(time.time() * 1000), strategies)
        steady = view.cache.last_stats
        assert sum(s.data_read + s.children_read + s.stats_read for s in steady.values()) == 0, steady
        assert view.ctx.failure_domains == {} and view.ctx.anti_affinity_groups == {}

        moved = 0
        for rnd in range(2):  # the session expiry comes in the second
            # Brokers die (their session ends) and new ones join.
            cluster.kill_group(rng.choice(cluster.groups[1:]))
            cluster.add_brokers(5)
            _assert_equal(view, leader, cluster.admin, f"round {rnd}: brokers died and joined")

            # The leader sheds and places orphans; the agents follow; the leader writes bundle data.
            plan = jobs.shedding_cycle(CONFIG, shedder, placement)
            assert plan is not None
            moved += len(plan.moves)
            # The cycle says where its time went; writing happened, with the lock let go.
            assert set(jobs.last_phases) == {"refresh", "reconcile", "decide", "write", "record"}
            assert all(v >= 0 for v in jobs.last_phases.values())
            assert not plan.moves or jobs.last_phases["write"] > 0
            cluster.follow_assignments()
            jobs.write_bundle_data(CONFIG, shedder, placement)
            _assert_equal(view, leader, cluster.admin, f"round {rnd}: moves and bundle data")

            # Splits, long-term merges and report changes.
            snap = view.refresh(leader, int(time.time() * 1000), strategies)
            for bundle in rng.sample(sorted(snap.owners), 3):
                why = explain("manual_split", f"test split of {bundle}", subject=bundle)
                jobs.split(bundle, "range_equally_divide", None, CONFIG, snap, why)
            merged = rng.sample(sorted(cluster.admin.read_bundle_data_versioned()), 50)
            window = TimeAverageMessageData(msg_rate_in=1234.0, num_samples=1000)
            assert merge_long_term(cluster.admin.client, dict.fromkeys(merged, window), set(merged)).updated
            cluster.follow_assignments()
            cluster.write_reports(rng.sample(sorted(cluster.group_of), 5))
            _assert_equal(view, leader, cluster.admin, f"round {rnd}: splits, merges, reports")

            # Placement policies set, then changed: isolation, failure domains, anti-affinity groups.
            _change_policies(cluster.admin, rng, sorted(cluster.group_of), cluster.namespaces, rnd)
            _assert_equal(view, leader, cluster.admin, f"round {rnd}: placement policies")
            view.refresh(leader, int(time.time() * 1000), strategies)
            full = read_placement_policies(cluster.admin, "", sorted(cluster.admin.read_layouts()))
            assert full.cluster == "scale-cluster" and full.failure_domains and full.isolation_policies
            assert (view.ctx.failure_domains, view.ctx.anti_affinity_groups) == (
                full.failure_domains,
                full.anti_affinity_groups,
            )
            assert view.ctx.isolation_policies == full.isolation_policies
            view.refresh(leader, int(time.time() * 1000), strategies)
            steady = view.cache.last_stats  # policies unchanged since: none of their nodes read
            assert sum(s.data_read + s.children_read + s.stats_read for s in steady.values()) == 0, steady

            if rnd == 1:
                resyncs = view.cache.watch.resyncs
                _expire(leader, zk_chroot_hosts)
                cluster.write_reports(rng.sample(sorted(cluster.group_of), 5))
                _assert_equal(view, leader, cluster.admin, "a forced session expiry")
                assert view.cache.watch.resyncs > resyncs  # the gap was healed by a full re-read
        assert moved > 0  # the rounds did exercise the leader's own writes
    finally:
        leader.stop()
        cluster.close()


def test_any_subtree_is_followed_and_own_writes_are_not_read_back(zk_chroot_hosts: str) -> None:
    """The cache is generic (e.g. namespace policies for isolation rules); it reads only changes."""
    store, other = ZkStore(zk_chroot_hosts), ZkStore(zk_chroot_hosts)
    store.start()
    other.start()
    try:
        root = "/admin/policies"
        cache = WatchCache(store)
        tree = cache.tree("policies", root, lambda _p, raw, _s: json.loads(raw), depth_leaf(2), 2)
        store.put_json(f"{root}/t/ns1", {"a": 1})
        assert cache.sync()["policies"].full and tree.values == {"t/ns1": {"a": 1}}
        assert cache.sync()["policies"].data_read == 0  # nothing changed: nothing read
        mark = tree.mark()
        assert tree.changes_since(None) is None and tree.changes_since(mark) == set()

        other.put_json(f"{root}/t/ns1", {"a": 2})
        other.put_json(f"{root}/u/ns9", {"b": 1})
        wait_for(lambda: cache.sync() and tree.values == {"t/ns1": {"a": 2}, "u/ns9": {"b": 1}}, 10)
        other.delete(f"{root}/u/ns9")
        wait_for(lambda: cache.sync() and tree.values == {"t/ns1": {"a": 2}}, 10)
        assert tree.changes_since(mark) == {"t/ns1", "u/ns9"}  # the journal: changed, created, deleted
        assert tree.changes_since(mark, upto=mark) == set()

        before_write = tree.mark()
        version = store.put_json(f"{root}/t/ns1", {"a": 3})
        tree.note_written("t/ns1", {"a": 3}, version)
        time.sleep(0.5)  # the write's own watch event arrives
        st = cache.sync()["policies"]
        assert (st.stats_read, st.data_read) == (1, 0)  # re-armed by one exists, data not read back

        assert tree.changes_since(before_write) == {"t/ns1"}  # own writes are journalled too
        cache._on_state("SUSPENDED")  # a connection gap: the next sync reads everything again
        assert cache.sync()["policies"].full and tree.values == {"t/ns1": {"a": 3}}
        assert tree.changes_since(mark) is None  # a new generation: users look at every leaf
    finally:
        store.stop()
        other.stop()
