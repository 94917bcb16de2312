"""Pulsar's configuration store on another ZooKeeper than the local metadata store: isolation
policies, failure domains and namespace Policies are read from it (``configuration_store``), and
nothing of them is taken from the local store. Two chroots of the real test ZooKeeper stand for the
two stores (separate connection strings, separate sessions)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from balancer.bundles import NamespaceBundles
from service.leader.load_view import LoadView
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from tests.integration.conftest import wait_for
from tests.integration.test_policies_live import CLUSTER, ISO_NS, write_pulsar_nodes

pytestmark = pytest.mark.integration


@pytest.fixture
def config_hosts(zk_hosts: str, _zk_admin: KazooClient) -> Iterator[str]:
    chroot = f"/cfg-{uuid.uuid4().hex}"
    _zk_admin.ensure_path(chroot)
    try:
        yield f"{zk_hosts}{chroot}"
    finally:
        with contextlib.suppress(Exception):
            _zk_admin.delete(chroot, recursive=True)


def test_policies_and_layouts_come_from_the_configuration_store(
    zk_chroot_hosts: str, config_hosts: str
) -> None:
    local = ZkStore(zk_chroot_hosts, session_timeout_s=10)
    config = ZkStore(config_hosts, session_timeout_s=10)
    local.start()
    config.start()
    try:
        write_pulsar_nodes(config)  # isolation policy, failure domains, tenants and namespace Policies
        only_in_config = "cfgonly/ns"
        config.put_json(
            P.join(P.TENANT_POLICIES, only_in_config),
            {"bundles": NamespaceBundles.initial(only_in_config, 2).to_policies()},
        )
        # A decoy in the local store: a configuration-store reader must not see it.
        local.put_json(P.join(P.CLUSTERS, "decoy"), {"serviceUrl": "http://x:8080"})
        view = LoadView(cluster=CLUSTER, config_store=config)
        snap = view.snapshot(local, 0, bundle_data=True)
        assert [p.name for p in snap.policies.isolation_policies] == ["iso-policy"]
        assert snap.policies.failure_domains.get("shared-1:8080") == "rack-a"
        assert only_in_config in snap.layouts and len(snap.layouts[only_in_config].value.ranges) == 2
        assert ISO_NS in snap.layouts
        # The same LoadView without a configuration store reads the local one: none of it is there.
        plain = LoadView(cluster=CLUSTER).snapshot(local, 0, bundle_data=True)
        assert plain.policies.isolation_policies == [] and only_in_config not in plain.layouts
        # A change in the configuration store reaches the next snapshot through its watches.
        config.client.delete(P.join(P.TENANT_POLICIES, only_in_config))
        wait_for(
            lambda: only_in_config not in view.snapshot(local, 1, bundle_data=True).layouts,
            30,
            what="the deletion seen through the configuration store's watch",
        )
    finally:
        local.stop()
        config.stop()
