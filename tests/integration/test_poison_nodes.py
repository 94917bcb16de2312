"""Poison nodes on a real ZooKeeper: nothing a node contains stops a read, a leader job or an agent.

Each payload below once raised out of a read (RecursionError, ValueError, OverflowError,
ZeroDivisionError) or made a phantom broker; the store now skips it, logs it once per version and
counts it by path kind, and the live leader keeps every job green while valid brokers balance.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from balancer.errors import InvalidInput
from balancer.models import BundleData, LocalBrokerData, ResourceUsage
from service.api.metrics import PrometheusMetrics
from service.broker.workload import skewed_scenario
from service.leader.metrics_sink import JOB_NAMES
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "public/default"
FAR = "0xfffffff0_0xffffffff"  # a range no test layout has: poison there blocks no real bundle
DEEP = b"[" * 2048
POISON: dict[str, bytes] = {
    "deep-array": DEEP,
    "deep-object": b'{"a":' * 1500,
    "nan": b'{"msgRateIn": NaN, "broker": "x", "time": NaN}',
    "overflow": b'{"msgRateIn": 1e400, "broker": "x", "time": 1e400}',
    "huge-int": b'{"lastUpdate": ' + b"9" * 400 + b', "broker": "x", "time": ' + b"9" * 400 + b"}",
    "not-utf8": b"\xff\xfe{\x00",
    "not-json": b"{not json",
    "wrong-type": b'{"msgRateIn": "x", "shortTermMsgRateIn": {}, "broker": [1], "longTermData": []}',
    "scalar": b"42",
}


@pytest.fixture
def store(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    s.start()
    yield s
    s.stop()


def _plant(store: ZkStore, bundle_ns: str = "evil/ns") -> list[str]:
    """Every payload under every root the leader and the agents read; returns the paths."""
    paths = []
    for i, (name, raw) in enumerate(POISON.items()):
        rng = f"0x{i:08x}_0x{i + 1:08x}"
        for path in (
            P.broker_path(f"{name}:1"),
            P.bundle_data_path(f"{bundle_ns}/{rng}"),
            P.time_average_path(f"{name}:1"),
            P.quota_path(f"{bundle_ns}/{rng}"),
            P.policies_path(f"evil/{name}"),
            P.ownership_path(f"{bundle_ns}/{rng}"),
            P.assignment_path(f"{bundle_ns}/{rng}"),
        ):
            # Broker nodes ephemeral, so they are parsed (a persistent one is a phantom, see below).
            store.client.create(path, raw, makepath=True, ephemeral=path.startswith(P.BROKERS))
            paths.append(path)
    return paths


def test_every_poison_payload_is_skipped_logged_once_and_counted_by_kind(
    store: ZkStore, caplog: pytest.LogCaptureFixture
) -> None:
    good = LocalBrokerData(web_service_url="http://ok:8080", msg_rate_in=5.0)
    store.register_broker("ok:8080", good)
    layout = store.create_namespace(NS, 2)
    paths = _plant(store)
    store.client.create(P.WORKLOAD, DEEP)
    reads = (
        store.read_brokers,
        store.read_bundle_data,
        store.read_bundle_data_versioned,
        store.read_time_averages,
        store.read_quotas,
        store.read_layouts,
        store.read_owners,
        store.read_assignments,
        store.read_workload,
        lambda: store.read_workload_as(dict),
    )
    caplog.set_level(logging.WARNING, logger="service.zookeeper.session.nodes")
    for read in reads:
        read()  # none raises
    assert set(store.read_brokers()) == {"ok:8080"}
    assert set(store.read_layouts()) == {NS} and store.read_layouts()[NS].value == layout
    assert store.read_owners() == {} and store.read_assignments() == {}
    assert store.read_bundle_data() == {} and store.read_quotas() == {}
    assert store.read_workload() is None
    bad = set(paths) | {P.WORKLOAD}
    assert set(store.malformed) == bad
    lines = len(caplog.records)
    assert lines == min(len(bad), store.malformed_log.burst)  # one per node, then rate-limited
    for read in reads:  # reading the same versions again: no new line, no new count
        read()
    assert len(caplog.records) == lines
    assert all(n == 1 for n in store.malformed.values())
    assert set(store.malformed_log.by_kind) == {
        "brokers",
        "bundle-data",
        "broker-time-average",
        "resource-quota",
        "local-policies",
        "ownership",
        "assignments",
        "workload",
    }
    # A new version of a bad node is news again: counted once more.
    path = P.assignment_path("evil/ns/0x00000000_0x00000001")
    store.client.set(path, b'{"broker": "x", "time": "abc"}')
    store.read_assignments()
    assert store.malformed[path] == 2


def test_assignment_time_variants_and_degenerate_reports(store: ZkStore) -> None:
    """``time`` of "abc", [1], 1e400 or NaN skips the assignment; a limit that rounds to 0 in float32
    means no limit (usage 0) as in Pulsar; a 400-digit lastUpdate is refused before any arithmetic."""
    for i, t in enumerate(['"abc"', "[1]", "1e400", "NaN", "-1", "true", "1.5"]):
        path = P.assignment_path(f"{NS}/0x{i:08x}_0x{i + 1:08x}")
        store.client.create(path, f'{{"broker": "b1:1", "time": {t}}}'.encode(), makepath=True)
    ok = P.assignment_path(f"{NS}/0x10000000_0x20000000")
    store.client.create(ok, b'{"broker": "b1:1", "time": 5, "reason": "r"}', makepath=True)
    assert list(store.read_assignments()) == [f"{NS}/0x10000000_0x20000000"]

    tiny = LocalBrokerData(web_service_url="http://t:1", cpu=ResourceUsage(usage=50.0, limit=1e-50))
    store.register_broker("tiny:1", tiny)
    got = store.read_brokers()["tiny:1"]
    assert got.cpu.percent_usage() == 0.0 and got.max_resource_usage() == 0.0
    doc = json.dumps(tiny.to_json_dict() | {"lastUpdate": 0})
    store.client.create(
        P.broker_path("long:1"),
        doc.replace('"lastUpdate": 0', '"lastUpdate": ' + "9" * 400).encode(),
        ephemeral=True,
    )
    assert "long:1" not in store.read_brokers()
    assert store.malformed[P.broker_path("long:1")] == 1


def test_persistent_broker_nodes_and_reports_without_urls_are_phantoms(store: ZkStore) -> None:
    store.client.create(P.broker_path("phantom:1"), b"{}")
    store.client.create(P.broker_path("a"), b"")  # what `agent --broker-id a/b:1` used to leave
    store.client.create(P.broker_path("nourl:1"), b"{}", ephemeral=True)
    store.register_broker("real:1", LocalBrokerData(web_service_url="http://real:1"))
    assert set(store.read_brokers()) == {"real:1"}
    assert store.malformed_log.by_kind["brokers"] == 3


def test_leader_and_agents_keep_working_among_poison_nodes(cluster: Cluster) -> None:
    """Poison under every path, phantom brokers, a NaN bundle-data node: every job stays green, no
    bundle goes to a phantom, /metrics renders, and the same bad nodes are not logged again."""
    config = fast_config()
    cluster.scenario(skewed_scenario(NS, 6, seed=3))
    _plant(cluster.admin)
    cluster.admin.client.create(P.broker_path("phantom:1"), b"{}")
    live_bundle = next(iter(cluster.bundles()))
    # A NaN in a live bundle's longTermData: once adopted it failed the bundle-data job for ever.
    nan = json.dumps(BundleData.default().to_json_dict()).replace('"msgRateIn": 50.0', '"msgRateIn": NaN')
    cluster.admin.client.create(P.bundle_data_path(live_bundle), nan.encode(), makepath=True)
    # A poison assignment on a live bundle: the leader must replace it, not fail beside it.
    other_bundle = sorted(cluster.bundles())[-1]
    cluster.admin.client.create(P.assignment_path(other_bundle), DEEP, makepath=True)
    for b in ("b1:8080", "b2:8080"):
        cluster.agent(b, config)
    metrics = PrometheusMetrics()
    svc = cluster.service("s1:7003", config, metrics=metrics)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    assert set(cluster.owners().values()) <= {"b1:8080", "b2:8080"}
    cycles = svc.jobs.cycles
    wait_for(lambda: svc.jobs.cycles >= cycles + 2, 20, what="two more shedding cycles")
    # The bundle-data job replaced the NaN node with the leader's own data.
    wait_for(
        lambda: cluster.admin.read_bundle_data().get(live_bundle) is not None, 15, what="NaN node replaced"
    )
    assert svc.job_failures == {}, svc.job_failures
    assert svc.ready(), svc.not_ready_reasons()
    view = svc.view()
    assert set(view.brokers) == {"b1:8080", "b2:8080"}
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    malformed = {
        s.labels["kind"]: s.value
        for s in families["loadmgr_malformed_nodes"].samples
        if s.name.endswith("_total")
    }
    assert malformed["brokers"] >= len(POISON) + 1 and len(malformed) <= 10  # bounded: one series per kind
    failures = [s.value for s in families["loadmgr_job_failures"].samples if s.name.endswith("_total")]
    assert len(failures) == len(JOB_NAMES) and not any(failures)  # one series per job, moves included
    # Agents took bundles and kept reporting through it all.
    for agent in cluster.agents.values():
        assert agent.reports_written > 0 and agent.owned()


def test_a_broker_id_with_a_slash_is_refused_before_any_node_is_written(store: ZkStore) -> None:
    with pytest.raises(InvalidInput, match="broker_id"):
        store.register_broker("a/b:1", LocalBrokerData(web_service_url="http://a:1"))
    assert store.client.exists(P.broker_path("a")) is None


def _malformed_by_kind(metrics: PrometheusMetrics) -> dict[str, float]:
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    return {
        s.labels["kind"]: s.value
        for s in families["loadmgr_malformed_nodes"].samples
        if s.name.endswith("_total")
    }


def test_a_persistent_or_garbage_ownership_node_on_a_live_bundle_is_removed(cluster: Cluster) -> None:
    """Ownership is ephemeral: a persistent node on a live bundle's path (well-formed or not) used to
    make every agent's create fail for ever, so the bundle was never owned again."""
    config = fast_config()
    cluster.scenario(skewed_scenario(NS, 4, seed=5))
    persistent, garbage = sorted(cluster.bundles())[:2]
    doc = {"brokerId": "b1:8080", "httpUrl": "http://b1:8080", "disabled": False}  # names a live broker
    cluster.admin.client.create(P.ownership_path(persistent), json.dumps(doc).encode(), makepath=True)
    cluster.admin.client.create(P.ownership_path(garbage), DEEP, makepath=True)
    for b in ("b1:8080", "b2:8080"):
        cluster.agent(b, config)
    metrics = PrometheusMetrics()
    svc = cluster.service("s1:7003", config, metrics=metrics)
    wait_for(svc.is_leader, 15, what="leadership")
    cycles = svc.jobs.cycles
    # within a few shedding cycles (3 s each): both nodes gone, every bundle owned by a live agent
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 15, what="every bundle owned")
    assert svc.jobs.cycles <= cycles + 4
    for bundle in (persistent, garbage):
        stat = cluster.admin.client.exists(P.ownership_path(bundle))
        assert stat is not None and stat.ephemeralOwner != 0  # an agent's node now
        assert cluster.owners()[bundle] in cluster.agents
    assert svc.jobs.poison_owners_removed == 2
    assert _malformed_by_kind(metrics)["ownership"] >= 2
    assert svc.job_failures == {}, svc.job_failures


def test_an_ephemeral_well_formed_owner_node_is_never_removed(cluster: Cluster) -> None:
    """The leader does not own ownership nodes: a live session's readable node stays, even one the
    leader would rather see elsewhere (no assignment names it) or one naming an unregistered broker."""
    config = fast_config()
    cluster.scenario(skewed_scenario(NS, 4, seed=5))
    held, ghost = sorted(cluster.bundles())[:2]
    urls = {"httpUrl": "http://b3:8080", "nativeUrl": "pulsar://b3:6650"}
    broker = ZkStore(cluster.hosts, session_timeout_s=10)  # a live broker session, no agent loop
    broker.start()
    try:
        broker.register_broker("b3:8080", LocalBrokerData(web_service_url="http://b3:8080"))
        assert broker.acquire(held, "b3:8080", urls)
        assert broker.acquire(ghost, "gone:1", urls)  # ephemeral, well-formed, names no live broker
        before = {b: cluster.admin.client.exists(P.ownership_path(b)) for b in (held, ghost)}
        assert all(broker.poison_owner_version(b) is None for b in (held, ghost))
        cluster.agent("b1:8080", config)
        svc = cluster.service("s1:7003", config)
        wait_for(svc.is_leader, 15, what="leadership")
        cycles = svc.jobs.cycles
        wait_for(lambda: svc.jobs.cycles >= cycles + 3, 20, what="three shedding cycles")
        for bundle, stat in before.items():
            now = cluster.admin.client.exists(P.ownership_path(bundle))
            assert now is not None and (now.czxid, now.ephemeralOwner) == (stat.czxid, broker.session_id)
        assert svc.jobs.poison_owners_removed == 0
        assert svc.job_failures == {}, svc.job_failures
    finally:
        broker.stop()
