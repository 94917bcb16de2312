"""ZkStore on a real ZooKeeper: Pulsar's paths, typed round trips, compare-and-set, exclusive
ownership, fencing on the leader epoch, malformed nodes skipped and counted, and the chroot."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from balancer.models import BundleData, LocalBrokerData, ResourceQuota, TimeAverageBrokerData
from service.errors import StaleWrite, StoreUnavailable
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session import nodes as zk_json

pytestmark = pytest.mark.integration

BUNDLE = "public/default/0x00000000_0x40000000"


@pytest.fixture
def store(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def other(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    s.start()
    yield s
    s.stop()


def test_broker_reports_round_trip_and_malformed_ones_are_skipped(store: ZkStore) -> None:
    seen: list[str] = []
    store._on_malformed = lambda path, reason: seen.append(path)
    data = LocalBrokerData(web_service_url="http://b1:8080", msg_rate_in=12.5, bundles={BUNDLE})
    store.register_broker("b1:8080", data)
    store.client.create(P.broker_path("bad:1"), b"\x00\xffnot json")
    store.client.create(P.broker_path("shape:1"), b'{"msgRateIn": "fast"}')
    got = store.read_brokers()
    assert set(got) == {"b1:8080"}
    assert got["b1:8080"].msg_rate_in == 12.5 and got["b1:8080"].bundles == {BUNDLE}
    assert store.malformed[P.broker_path("bad:1")] == 1 and store.malformed[P.broker_path("shape:1")] == 1
    assert set(seen) == {P.broker_path("bad:1"), P.broker_path("shape:1")}
    assert store.client.exists(P.broker_path("b1:8080")).ephemeralOwner == store.session_id


def test_broker_id_taken_by_another_session_is_refused(store: ZkStore, other: ZkStore) -> None:
    store.register_broker("b1:8080", LocalBrokerData())
    with pytest.raises(StaleWrite):
        other.register_broker("b1:8080", LocalBrokerData())


def test_pre_2_8_quota_nodes_are_read_where_no_new_one_exists(store: ZkStore) -> None:
    old, both = "t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"
    for bundle, rate in ((old, 1.0), (both, 2.0)):
        store.put_json(P.legacy_quota_path(bundle), ResourceQuota(msg_rate_in=rate).to_json_dict())
    store.write_quota(both, ResourceQuota(msg_rate_in=5.0))
    store.put_json(P.RESOURCE_QUOTA_DEFAULT, ResourceQuota(msg_rate_in=9.0).to_json_dict())  # not a bundle
    quotas = store.read_quotas()
    assert {b: q.msg_rate_in for b, q in quotas.items()} == {old: 1.0, both: 5.0}


def test_bundle_data_quota_and_time_average_use_pulsars_paths(store: ZkStore) -> None:
    bd = BundleData.default()
    bd.topics = 7
    store.write_bundle_data(BUNDLE, bd)
    store.write_quota(BUNDLE, ResourceQuota(msg_rate_in=3.0))
    store.write_time_average("b1:8080", TimeAverageBrokerData(short_term_msg_rate_in=4.0))
    assert store.client.exists(f"/loadbalance/bundle-data/{BUNDLE}") is not None
    assert store.client.exists(f"/loadbalance/resource-quota/{BUNDLE}") is not None  # Pulsar 2.8+
    assert store.read_bundle_data()[BUNDLE].topics == 7
    assert store.read_quotas()[BUNDLE].msg_rate_in == 3.0
    assert store.read_time_averages()["b1:8080"].short_term_msg_rate_in == 4.0
    store.delete_bundle_data(BUNDLE)
    assert store.read_bundle_data() == {}


def test_layout_writes_are_compare_and_set(store: ZkStore, other: ZkStore) -> None:
    layout = store.create_namespace("public/default", 4)
    assert store.create_namespace("public/default", 8) == layout  # existing layout kept
    got = store.read_layout("public/default")
    assert got is not None and got.value.bundle_names[0] == BUNDLE
    doc = store.layout_doc("public/default", layout.split(layout.ranges[0], [0x20000000]))
    other.put_json(P.policies_path("public/default"), doc, version=got.version)
    with pytest.raises(StaleWrite):
        store.put_json(P.policies_path("public/default"), doc, version=got.version)
    assert len(store.read_layouts()["public/default"].value.ranges) == 5


def test_ownership_is_exclusive_and_only_the_holder_releases(store: ZkStore, other: ZkStore) -> None:
    urls = {"httpUrl": "http://b1:8080"}
    assert store.acquire(BUNDLE, "b1:8080", urls)
    assert not other.acquire(BUNDLE, "b2:8080", {"httpUrl": "http://b2:8080"})
    assert not other.release(BUNDLE)
    owner = store.read_owners()[BUNDLE]
    assert owner.broker == "b1:8080" and owner.session_id == store.session_id
    assert store.release(BUNDLE)
    assert other.acquire(BUNDLE, "b2:8080", {"httpUrl": "http://b2:8080"})
    # A Pulsar broker's node names only URLs: the owner is the web address.
    store.client.create(
        P.ownership_path("t/ns/0x00000000_0xffffffff"),
        b'{"httpUrl":"http://b9:8080"}',
        ephemeral=True,
        makepath=True,
    )
    assert store.read_owners()["t/ns/0x00000000_0xffffffff"].broker == "b9:8080"


def test_owner_session_end_frees_its_bundles(store: ZkStore, zk_chroot_hosts: str) -> None:
    dying = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    dying.start()
    assert dying.acquire(BUNDLE, "b1:8080", {})
    assert BUNDLE in store.read_owners()
    dying.stop()
    assert BUNDLE not in store.read_owners()


def test_writes_fenced_on_an_old_leader_epoch_fail(store: ZkStore, other: ZkStore) -> None:
    old = store.bump_epoch("s1")
    store.fenced(old).upsert_json(P.assignment_path(BUNDLE), {"broker": "b1"}).commit()
    other.bump_epoch("s2")
    with pytest.raises(StaleWrite):
        store.fenced(old).upsert_json(P.assignment_path(BUNDLE), {"broker": "b2"}).commit()
    assigned = store.read_assignments()[BUNDLE]
    assert assigned.value.broker == "b1"


def test_bundle_data_write_is_compare_and_set_and_fenced_on_the_epoch(store: ZkStore, other: ZkStore) -> None:
    old = store.bump_epoch("s1")
    first = BundleData.default()
    assert store.write_bundle_data_cas(BUNDLE, first, -1, old) == 0
    with pytest.raises(StaleWrite):  # must not exist any more
        store.write_bundle_data_cas(BUNDLE, first, -1, old)
    second = BundleData.default()
    second.long_term_data.msg_rate_in = 42.0
    assert store.write_bundle_data_cas(BUNDLE, second, 0, old) == 1
    assert store.client.get(P.bundle_data_path(BUNDLE))[1].version == 1
    new = other.bump_epoch("s2")
    late = BundleData.default()
    late.long_term_data.msg_rate_in = 7.0
    with pytest.raises(StaleWrite):  # the replaced leader's late write is refused
        store.write_bundle_data_cas(BUNDLE, late, 1, old)
    assert store.read_bundle_data()[BUNDLE].long_term_data.msg_rate_in == 42.0
    assert other.write_bundle_data_cas(BUNDLE, late, 1, new) == 2
    assert store.read_bundle_data()[BUNDLE].long_term_data.msg_rate_in == 7.0


def test_chroot_confines_every_path(zk_hosts: str) -> None:
    chroot = f"/c-{uuid.uuid4().hex}"
    admin = KazooClient(hosts=zk_hosts)
    admin.start()
    try:
        admin.ensure_path(chroot)
        s = ZkStore(zk_hosts, chroot=chroot, session_timeout_s=5)
        s.start()
        s.register_broker("b1:8080", LocalBrokerData())
        assert admin.exists(f"{chroot}/loadbalance/brokers/b1:8080") is not None
        s.stop()
    finally:
        admin.delete(chroot, recursive=True)
        admin.stop()


def test_unreachable_zookeeper_is_store_unavailable() -> None:
    s = ZkStore("127.0.0.1:1", session_timeout_s=2)
    with pytest.raises(StoreUnavailable):
        s.start(timeout_s=1.5)


def test_pipelined_reads_cover_more_than_one_batch_and_skip_malformed_nodes(
    store: ZkStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zk_json, "PIPELINE", 8)  # small batches: the same code path with few nodes
    count = 8 * 2 + 7  # three batches, the last one partial
    width = 2**32 // count
    names = [f"t/ns/0x{i * width:08x}_0x{(i + 1) * width:08x}" for i in range(count)]
    writes = []
    for root in (P.bundle_data_path("t/ns"), P.quota_path("t/ns"), P.assignment_path("t/ns")):
        store.client.ensure_path(root)
    for i, name in enumerate(names):
        bd = BundleData.default()
        bd.short_term_data.msg_rate_in = float(i)
        docs = {
            P.bundle_data_path(name): bd.to_json_dict(),
            P.quota_path(name): ResourceQuota(msg_rate_in=float(i)).to_json_dict(),
            P.assignment_path(name): {"broker": f"b{i % 3}", "reason": "r", "time": i},
        }
        writes += [store.client.create_async(path, json.dumps(doc).encode()) for path, doc in docs.items()]
    for w in writes:
        w.get(timeout=30)
    store.put_json(P.bundle_data_path(names[5]), BundleData.default().to_json_dict())  # version 1
    store.client.set(P.bundle_data_path(names[9]), b"{not json")
    store.client.set(P.quota_path(names[11]), b'{"msgRateIn": "fast"}')
    store.client.set(P.assignment_path(names[13]), b'{"source": "b1"}')

    data = store.read_bundle_data_versioned()
    assert set(data) == set(names)
    assert data[names[9]].value is None and store.malformed[P.bundle_data_path(names[9])] == 1
    assert data[names[5]].version == 1 and data[names[4]].version == 0
    assert all(
        data[n].value.short_term_data.msg_rate_in == i
        for i, n in enumerate(names)
        if n not in {names[5], names[9]}
    )  # type: ignore[union-attr]
    quotas = store.read_quotas()
    assert set(quotas) == set(names) - {names[11]} and quotas[names[-1]].msg_rate_in == count - 1
    assignments = store.read_assignments()
    assert set(assignments) == set(names) - {names[13]}
    assert assignments[names[-1]].value.broker == f"b{(count - 1) % 3}"
    assert {store.malformed[P.quota_path(names[11])], store.malformed[P.assignment_path(names[13])]} == {1}
