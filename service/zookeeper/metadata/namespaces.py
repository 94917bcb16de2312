"""Namespace administration in ZooKeeper-native mode, writing the nodes a Pulsar broker writes.

``pulsar-admin namespaces create`` leaves ``/admin/policies/<tenant>`` (TenantInfo, if new),
``/admin/policies/<tenant>/<ns>`` (Policies) and ``/admin/local-policies/<tenant>/<ns>``
(LocalPolicies: the bundle layout and ``namespaceAntiAffinityGroup``); ``ns-isolation-policy set``
writes one entry of ``/admin/clusters/<cluster>/namespaceIsolationPolicies``. Writing the same
nodes keeps a standalone cluster operable without kazoo, and the leader reads them as it reads a
Pulsar cluster's (:mod:`service.zookeeper.metadata.policies`). Read-modify-writes are compare-and-set, so
two operators editing at once cannot lose an edit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from balancer.bundles import NamespaceBundles
from balancer.errors import AlreadyExists, InvalidInput, PreconditionFailed, UnknownNamespace
from balancer.placement.context import IsolationPolicy
from service.errors import StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.metadata.policies import parse_anti_affinity_group
from service.zookeeper.metadata.store import ZkStore

TENANTS = P.TENANT_POLICIES
# Pulsar's NamedEntity characters; Java's \w is ASCII-only, and a cluster name becomes a path segment,
# so "." and ".." (relative paths to ZooKeeper) are refused too.
_NAME = re.compile(r"^(?!\.\.?$)[-=:.\w]+$", re.ASCII)


def check_cluster(cluster: str) -> str:
    """A cluster name usable as a ZooKeeper path segment, or InvalidInput naming it."""
    if not isinstance(cluster, str) or not _NAME.match(cluster) or len(cluster) > 256:
        raise InvalidInput("cluster", cluster, "expected a cluster name of letters, digits, -_=:.")
    return cluster


@dataclass(frozen=True)
class NamespaceInfo:
    namespace: str
    bundles: int
    anti_affinity_group: str | None


def check_namespace(namespace: str) -> tuple[str, str]:
    """``tenant/ns`` split in two; anything else is refused naming the value."""
    parts = namespace.split("/")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise InvalidInput(
            "namespace", namespace, "expected <tenant>/<namespace> of letters, digits, -_=:. (not . or ..)"
        )
    return parts[0], parts[1]


class NamespaceAdmin:
    """Create, list, delete namespaces and set their policies on a started :class:`ZkStore`."""

    def __init__(self, store: ZkStore, refuse_writes: str | None = None) -> None:
        """``refuse_writes``: why this instance must not change namespaces (Pulsar mode: they are
        Pulsar's); every write then raises PreconditionFailed with it, before anything is written."""
        self.store = store
        self.refuse_writes = refuse_writes

    def _writable(self) -> None:
        if self.refuse_writes is not None:
            raise PreconditionFailed("mode", "pulsar", self.refuse_writes)

    def create(
        self, namespace: str, bundles: int, cluster: str | None = None, anti_affinity_group: str | None = None
    ) -> NamespaceBundles:
        self._writable()
        tenant, _ = check_namespace(namespace)
        if not 1 <= bundles <= 1024:
            raise InvalidInput("bundles", bundles, "must be between 1 and 1024")
        if self.store.get_json(P.policies_path(namespace)) is not None:
            raise AlreadyExists("namespace", namespace, "already exists")
        clusters = [check_cluster(cluster)] if cluster else []
        layout = NamespaceBundles.initial(namespace, bundles)
        if self.store.get_json(P.join(TENANTS, tenant)) is None:
            self.store.put_json(P.join(TENANTS, tenant), {"adminRoles": [], "allowedClusters": clusters})
        self.store.put_json(
            P.join(TENANTS, namespace),
            {"bundles": layout.to_policies(), "replication_clusters": clusters, "deleted": False},
        )
        local: dict[str, Any] = {"bundles": layout.to_policies(), "migrated": False}
        if anti_affinity_group:
            local["namespaceAntiAffinityGroup"] = anti_affinity_group
        try:
            self.store.put_json(P.policies_path(namespace), local, version=-1)
        except StaleWrite:
            raise AlreadyExists("namespace", namespace, "already exists") from None
        return layout

    def list(self) -> list[NamespaceInfo]:
        out = []
        nodes = self.store.get_many_json([P.policies_path(ns) for ns in self.store.namespaces()])
        for ns in self.store.namespaces():
            got = nodes.get(P.policies_path(ns))
            doc = got.value if got is not None and isinstance(got.value, dict) else {}
            layout = self.store.read_layout(ns)
            group, _ = parse_anti_affinity_group(doc)
            out.append(NamespaceInfo(ns, len(layout.value.ranges) if layout else 0, group))
        return out

    def delete(self, namespace: str) -> None:
        """Remove the namespace's policies, layout, bundle data and leftover assignments; brokers
        release its bundles when the layout is gone."""
        self._writable()
        check_namespace(namespace)
        if self.store.get_json(P.policies_path(namespace)) is None:
            raise UnknownNamespace(namespace)
        self.store.delete(P.policies_path(namespace))
        self.store.delete(P.join(TENANTS, namespace))
        for root in (P.BUNDLE_DATA, P.ASSIGNMENTS, P.RESOURCE_QUOTA):
            self.store.delete(P.join(root, namespace), recursive=True)

    def set_anti_affinity_group(self, namespace: str, group: str | None) -> None:
        """``namespaces set-anti-affinity-group`` (``None``: delete-anti-affinity-group)."""
        self._writable()
        check_namespace(namespace)
        got = self.store.get_json(P.policies_path(namespace))
        if got is None or not isinstance(got.value, dict):
            raise UnknownNamespace(namespace)
        doc = dict(got.value)
        if group:
            doc["namespaceAntiAffinityGroup"] = group
        else:
            doc.pop("namespaceAntiAffinityGroup", None)
        self.store.put_json(P.policies_path(namespace), doc, version=got.version)

    def set_isolation_policy(self, cluster: str, name: str, policy: dict[str, Any]) -> IsolationPolicy:
        """``ns-isolation-policy set``: one entry of the cluster's policies node, validated first."""
        self._writable()
        check_cluster(cluster)
        if not _NAME.match(name):
            raise InvalidInput("policy", name, "a policy name of letters, digits, -_=:.")
        parsed = IsolationPolicy.from_pulsar(name, policy)
        path = P.isolation_policies_path(cluster)
        got = self.store.get_json(path)
        doc = dict(got.value) if got is not None and isinstance(got.value, dict) else {}
        doc[name] = policy
        self.store.put_json(path, doc, version=None if got is None else got.version)
        return parsed

    def isolate(
        self,
        cluster: str,
        name: str,
        namespace: str,
        primary: Sequence[str],
        secondary: Sequence[str],
        min_limit: int,
    ) -> IsolationPolicy:
        """An isolation policy for exactly ``namespace`` (its name as a literal regex)."""
        check_namespace(namespace)
        check_cluster(cluster)
        doc = isolation_policy_doc([re.escape(namespace)], [*primary], [*secondary], min_limit)
        return self.set_isolation_policy(cluster, name, doc)

    def delete_isolation_policy(self, cluster: str, name: str) -> bool:
        self._writable()
        path = P.isolation_policies_path(cluster)
        got = self.store.get_json(path)
        if got is None or not isinstance(got.value, dict) or name not in got.value:
            return False
        doc = {k: v for k, v in got.value.items() if k != name}
        self.store.put_json(path, doc, version=got.version)
        return True


def isolation_policy_doc(
    namespaces: list[str], primary: list[str], secondary: list[str], min_limit: int
) -> dict[str, Any]:
    """NamespaceIsolationData as pulsar-admin writes it (min_available, parameters as strings)."""
    return {
        "namespaces": namespaces,
        "primary": primary,
        "secondary": secondary,
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": str(min_limit), "usage_threshold": "100"},
        },
    }
