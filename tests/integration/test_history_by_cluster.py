"""Issue 49, item 4 on a real ZooKeeper: a Pulsar-mode instance without --cluster names its history
directory by the only cluster under /admin/clusters, and refuses when it cannot tell which."""

from __future__ import annotations

from kazoo.client import KazooClient

from balancer.errors import ConfigError
from service.commands.serve_history import history_location
from service.settings import Settings


def _settings(hosts: str) -> Settings:
    return Settings(
        mode="pulsar", zk_hosts=hosts, history_uri="/tmp/h", pulsar_admin_url="http://127.0.0.1:8080"
    )


def test_the_history_directory_is_named_by_the_cluster_found_in_zookeeper(
    zk_chroot_hosts: str, zk_client_factory: object
) -> None:
    client: KazooClient = zk_client_factory()  # type: ignore[operator]
    client.ensure_path("/admin/clusters/global")  # Pulsar's pseudo-cluster: not a candidate
    client.ensure_path("/admin/clusters/pulsar-a")
    assert history_location(_settings(zk_chroot_hosts)) == ("/tmp/h/pulsar-a", "pulsar-a")
    client.ensure_path("/admin/clusters/pulsar-b")
    try:
        history_location(_settings(zk_chroot_hosts))
    except ConfigError as e:
        assert "--cluster" in str(e)
    else:
        raise AssertionError("two clusters and no --cluster: the history's name cannot be told")
