"""Where ``loadmgr serve`` records its history, and whose it is.

In Pulsar mode the history directory is named by the cluster (``<LOADMGR_HISTORY_URI>/<clusterName>``,
e.g. ``./var/history/pulsar-a``): a Pulsar-mode instance started from a checkout whose demo records to
``./var/history`` must never append one system's rows to the other's, nor overwrite its recorded config,
or a replay would mix the two. Whatever the mode, the recorded config (``_loadmgr.json``) names its
cluster, and an instance refuses a history that another named cluster wrote.
"""

from __future__ import annotations

import contextlib
import re

from balancer.errors import ConfigError
from service.settings import Settings

# The datasets a history root holds: a cluster's directory must not be taken for one of them.
DATASETS = frozenset({"bundles", "brokers", "cycles", "decisions"})
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
CLUSTER_READ_TIMEOUT_S = 5.0
CLUSTERS_SESSION_S = 10.0


def cluster_dir_name(cluster: str) -> str:
    """A directory name for ``cluster``: Pulsar's names are already safe; anything else is made so."""
    name = _SAFE.sub("_", cluster.strip()).strip(".") or "cluster"
    return f"cluster-{name}" if name in DATASETS else name


def pulsar_cluster_name(settings: Settings) -> str | None:
    """``--cluster`` (LOADMGR_CLUSTER), else the only cluster under ``/admin/clusters`` of the
    configuration store (the local ZooKeeper unless another is named); None when it cannot be told."""
    if settings.cluster:
        return settings.cluster
    from kazoo.exceptions import KazooException

    from service.zookeeper.metadata.policies import only_cluster
    from service.zookeeper.paths import CLUSTERS
    from service.zookeeper.session.client import new_client
    from service.zookeeper.session.security import ZkSecurity

    hosts = settings.configuration_store or settings.zk_hosts + (settings.zk_chroot or "")
    client = new_client(hosts, ZkSecurity.from_settings(settings), CLUSTERS_SESSION_S)
    try:
        client.start(timeout=CLUSTER_READ_TIMEOUT_S)
        return only_cluster(client.get_children(CLUSTERS)) if client.exists(CLUSTERS) else None
    except (KazooException, OSError):
        return None  # serve's own start says what is wrong with ZooKeeper, in one line
    finally:
        with contextlib.suppress(Exception):
            client.stop()
            client.close()


def history_location(settings: Settings) -> tuple[str, str | None]:
    """(the history URI this instance appends to, the cluster it records). Pulsar mode: a directory
    named by the cluster under ``history_uri``; ConfigError when the cluster cannot be told."""
    if not settings.pulsar_mode:
        return settings.history_uri, settings.cluster or None
    cluster = pulsar_cluster_name(settings)
    if not cluster:
        if not settings.history_enabled:
            return settings.history_uri, None
        raise ConfigError(
            "--cluster",
            settings.cluster,
            "cannot tell which Pulsar cluster this is (no single cluster under /admin/clusters): "
            "name it with --cluster or LOADMGR_CLUSTER (its history directory is named after it)",
        )
    return f"{settings.history_uri.rstrip('/')}/{cluster_dir_name(cluster)}", cluster


def check_history_owner(uri: str, cluster: str | None) -> None:
    """ConfigError when the history at ``uri`` was recorded for another named cluster."""
    from service.longterm.history_meta import read_meta

    doc, _ = read_meta(uri)
    recorded = doc.get("cluster") if doc is not None else None
    if cluster and isinstance(recorded, str) and recorded and recorded != cluster:
        raise ConfigError(
            "history_uri",
            uri,
            f"holds the history of cluster {recorded!r}, not {cluster!r}: give this cluster its own "
            "directory (LOADMGR_HISTORY_URI) so a replay never mixes two systems",
        )
