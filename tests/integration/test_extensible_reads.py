"""Extensible brokers' ownership from the metadata store (PIP-378's table view) on a real ZooKeeper:
what ``/service_unit_state`` holds becomes loadmgr's owners and each broker's bundles."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from balancer.models import LocalBrokerData, NamespaceBundleStats
from service.pulsar.admin import PulsarAdmin
from service.pulsar.extensible import (
    METADATA_CHANNEL_ROOT,
    ExtensibleReads,
    parse_unit_state,
    read_metadata_channel,
)
from service.zookeeper.metadata.records import Owner
from service.zookeeper.metadata.store import ZkStore


@pytest.fixture
def store(zk_chroot_hosts: str) -> Iterator[ZkStore]:
    s = ZkStore(zk_chroot_hosts, session_timeout_s=5)
    s.start()
    yield s
    s.stop()


def put(store: ZkStore, bundle: str, doc: object) -> None:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    store.client.create(f"{METADATA_CHANNEL_ROOT}/{bundle}", raw, makepath=True)


def test_metadata_table_view_gives_owners_and_each_brokers_bundles(store: ZkStore) -> None:
    a, b, c, d = (f"public/default/0x{i:02x}000000_0x{i + 1:02x}000000" for i in range(4))
    put(store, a, {"state": "Owned", "dstBroker": "b1:8080", "versionId": 3})
    put(store, b, {"state": "Releasing", "dstBroker": "b2:8080", "sourceBroker": "b1:8080"})
    put(store, c, {"state": "Splitting", "sourceBroker": "b2:8080", "versionId": 7})
    put(store, d, b"not json")
    raw = read_metadata_channel(store)
    assert sorted(raw) == sorted([a, b, c, d])
    reads = ExtensibleReads(PulsarAdmin("http://127.0.0.1:9"), client_factory=lambda url: None)
    registry = {
        "b1:8080": LocalBrokerData(web_service_url="http://b1:8080"),
        "b2:8080": LocalBrokerData(web_service_url="http://b2:8080"),
    }
    reads.view(registry)
    reads._apply_units({k: parse_unit_state(v) for k, v in raw.items()}, replace=True, caught_up=True)
    reads._stats["b1:8080"] = {a: NamespaceBundleStats(msg_rate_in=5.0, topics=2)}
    reads._stats_read.update(registry)
    reads._rebuild()
    assert reads.waiting() is None
    brokers, owners = reads.view(registry)
    # A bundle mid-transfer is nobody's; one being split is still its source's; garbage is skipped.
    assert owners == {a: Owner("b1:8080", 0, 3), c: Owner("b2:8080", 0, 7)}
    assert brokers["b1:8080"].bundles == {a} and brokers["b1:8080"].msg_rate_in == 5.0
    assert brokers["b2:8080"].bundles == {c} and brokers["b2:8080"].num_topics == 0
    # Nothing changed: the same report (same lastUpdate), so the leader does not sample it again.
    reads._rebuild()
    assert reads.view(registry)[0]["b1:8080"] is brokers["b1:8080"]
    reads._stats["b1:8080"] = {a: NamespaceBundleStats(msg_rate_in=9.0, topics=2)}
    reads._rebuild()
    assert reads.view(registry)[0]["b1:8080"].msg_rate_in == 9.0
