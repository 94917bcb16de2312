"""Pulsar's placement policies as a Pulsar broker writes them, read into the placement context.

Three sources, each in Pulsar 3.x's own shape (what ``pulsar-admin`` writes through a broker):

* namespace isolation policies: one node ``/admin/clusters/<cluster>/namespaceIsolationPolicies``
  holding ``{"<policy>": NamespaceIsolationData}`` (``namespaces``/``primary``/``secondary`` regex
  lists, ``auto_failover_policy.parameters.min_limit``), as ``NamespaceIsolationPolicies``;
* failure domains: ``/admin/clusters/<cluster>/failureDomain/<domain>`` = ``{"brokers": [...]}``
  (broker ids as in ``/loadbalance/brokers``), which ``ModularLoadManagerImpl`` inverts into its
  broker -> domain map (a broker listed twice keeps the last domain read, as the Java map does);
* anti-affinity groups: ``namespaceAntiAffinityGroup`` of ``LocalPolicies`` at
  ``/admin/local-policies/<tenant>/<ns>`` (the node that also holds the bundle layout).

The leader follows all three through its watch cache (:class:`PolicyTrees`): read once, then only
the nodes that changed, so a refresh of an unchanged cluster reads none of them;
:func:`read_placement_policies` reads them all directly, the same result from scratch.

Nothing read here may stop a leader cycle: a node that does not parse is reported through the
store's malformed-node hook (once per version read), named with the field and value, and left out,
so one bad policy costs that policy only. The cluster is the configured one (Pulsar's
``clusterName``) or, when none is configured, the only cluster under ``/admin/clusters``; with
several and none configured nothing cluster-level is applied (the choice would be a guess), which
is logged once per refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import InvalidInput
from balancer.placement.context import IsolationPolicy, PlacementContext
from service.zookeeper import paths as P
from service.zookeeper.session.cache import WatchCache, WatchedTree, depth_leaf
from service.zookeeper.session.nodes import JsonZk

log = logging.getLogger(__name__)

# Pulsar (before 2.8) kept a pseudo-cluster "global" for global namespaces; it has no brokers.
PSEUDO_CLUSTERS = frozenset({"global"})
# The last path elements of P.isolation_policies_path and P.failure_domains_root.
ISOLATION_NODE = "namespaceIsolationPolicies"
DOMAINS_DIR = "failureDomain"


@dataclass
class PlacementPolicies:
    """What one read found; :meth:`apply_to` puts it into a :class:`PlacementContext`."""

    cluster: str | None = None
    isolation_policies: list[IsolationPolicy] = field(default_factory=list)
    failure_domains: dict[str, str] = field(default_factory=dict)  # broker id -> domain
    anti_affinity_groups: dict[str, str] = field(default_factory=dict)  # namespace -> group

    def apply_to(self, ctx: PlacementContext) -> None:
        ctx.isolation_policies = list(self.isolation_policies)
        ctx.failure_domains = dict(self.failure_domains)
        ctx.anti_affinity_groups = dict(self.anti_affinity_groups)


def resolve_cluster(store: JsonZk, configured: str) -> str | None:
    """The configured cluster, else the only real cluster under ``/admin/clusters`` (None if not one)."""
    return configured or only_cluster(store.children(P.CLUSTERS))


def only_cluster(names: Iterable[str]) -> str | None:
    """The one real cluster among the children of ``/admin/clusters`` (None, and a warning, if several)."""
    clusters = [c for c in names if c not in PSEUDO_CLUSTERS]
    if len(clusters) == 1:
        return clusters[0]
    if clusters:
        log.warning(
            "%d clusters under %s and no cluster configured (LOADMGR_CLUSTER): "
            "isolation policies and failure domains are not applied",
            len(clusters),
            P.CLUSTERS,
        )
    return None


def parse_isolation_policies(doc: Any) -> tuple[list[IsolationPolicy], list[str]]:
    """Policies of a ``namespaceIsolationPolicies`` node, in name order, and one error per bad policy."""
    if not isinstance(doc, dict):
        return [], [f"expected a JSON object of policies, got {type(doc).__name__}"]
    out: list[IsolationPolicy] = []
    errors: list[str] = []
    for name in sorted(doc):
        data = doc[name]
        if not isinstance(data, dict):
            errors.append(f"policy {name!r}: expected an object, got {data!r}")
            continue
        try:
            out.append(IsolationPolicy.from_pulsar(name, data))
        except InvalidInput as e:
            errors.append(str(e))
    return out, errors


def parse_failure_domain(doc: Any) -> tuple[list[str], str | None]:
    """The broker ids of one ``failureDomain/<domain>`` node, or an error naming the bad value."""
    brokers = doc.get("brokers") if isinstance(doc, dict) else None
    if not isinstance(brokers, list) or not all(isinstance(b, str) for b in brokers):
        return [], f"brokers: expected a list of broker ids, got {brokers!r}"
    return list(brokers), None


def parse_anti_affinity_group(doc: Any) -> tuple[str | None, str | None]:
    """``namespaceAntiAffinityGroup`` of a LocalPolicies node (None when unset or blank, as Pulsar's
    ``StringUtils.isBlank`` check treats it), or an error naming the bad value."""
    if not isinstance(doc, dict):
        return None, None  # the layout reader reports a bad local-policies node; not counted twice
    group = doc.get("namespaceAntiAffinityGroup")
    if group is None:
        return None, None
    if not isinstance(group, str):
        return None, f"namespaceAntiAffinityGroup: expected a string, got {group!r}"
    return (group if group.strip() else None), None


def cluster_leaf(rel: str) -> bool:
    """Below ``/admin/clusters``: ``<cluster>/namespaceIsolationPolicies`` and each
    ``<cluster>/failureDomain/<domain>`` are the nodes read; the rest are directories or ignored."""
    parts = rel.split("/")
    return (len(parts) == 2 and parts[1] == ISOLATION_NODE) or (len(parts) == 3 and parts[1] == DOMAINS_DIR)


class PolicyTrees:
    """The policy nodes in ``watch``: every node decoded once per version, its errors reported then."""

    def __init__(self, store: JsonZk, watch: WatchCache, config_watch: WatchCache | None = None) -> None:
        self.store = store
        # list[IsolationPolicy] for an isolation node, list[str] (broker ids) for a failure domain.
        # Pulsar keeps both in its configuration store, which may be another ZooKeeper.
        self.clusters: WatchedTree[list[Any]] = (config_watch or watch).tree(
            "cluster-policies", P.CLUSTERS, self._decode_cluster_node, cluster_leaf, 3
        )
        # The layouts' nodes, followed a second time for the one field placement needs from them.
        self.groups: WatchedTree[str] = watch.tree(
            "anti-affinity", P.LOCAL_POLICIES, self._decode_group, depth_leaf(2), 2
        )

    def current(self, configured: str, namespaces: Iterable[str]) -> PlacementPolicies:
        """What :func:`read_placement_policies` would read now, from the trees (the caller synced them)."""
        found = PlacementPolicies(cluster=configured or only_cluster(self.clusters.names()))
        if found.cluster is not None:
            values = self.clusters.values
            found.isolation_policies = list(values.get(f"{found.cluster}/{ISOLATION_NODE}", []))
            domains = f"{found.cluster}/{DOMAINS_DIR}"
            for domain in self.clusters.names(domains):
                for broker in values.get(f"{domains}/{domain}", []):
                    found.failure_domains[broker] = domain
        groups = self.groups.values
        found.anti_affinity_groups = {ns: groups[ns] for ns in namespaces if ns in groups}
        return found

    # Parse errors are reported without the node's version (as :func:`read_placement_policies` does):
    # a version marked bad would be skipped by every other reader of the node, and the local-policies
    # node also holds the namespace's bundle layout. Decoding runs once per version read anyway.
    def _decode_cluster_node(self, path: str, raw: bytes, stat: Any) -> list[Any] | None:
        got = self.store.parse_node(path, raw, stat, lambda doc: doc)
        if got is None:
            return None
        if path.endswith("/" + ISOLATION_NODE):
            policies, errors = parse_isolation_policies(got.value)
            for err in errors:  # one bad policy costs itself only: the others are kept
                self.store._malformed(path, err)
            return policies
        brokers, error = parse_failure_domain(got.value)
        if error is not None:
            self.store._malformed(path, error)
            return None
        return brokers

    def _decode_group(self, path: str, raw: bytes, stat: Any) -> str | None:
        got = self.store.parse_node(path, raw, stat, lambda doc: doc)
        if got is None:
            return None
        group, error = parse_anti_affinity_group(got.value)
        if error is not None:
            self.store._malformed(path, error)
        return group


def read_placement_policies(store: JsonZk, cluster: str, namespaces: list[str]) -> PlacementPolicies:
    """One read of the isolation policies, failure domains and anti-affinity groups.

    ``cluster`` is the configured cluster name ("" to discover it); ``namespaces`` are the
    ``tenant/ns`` names whose local policies to read (the leader's layouts already list them).
    """
    found = PlacementPolicies(cluster=resolve_cluster(store, cluster))
    errors: list[tuple[str, str]] = []
    if found.cluster is not None:
        path = P.isolation_policies_path(found.cluster)
        got = store.get_json(path)
        if got is not None and got.value is not None:
            found.isolation_policies, bad = parse_isolation_policies(got.value)
            errors += [(path, e) for e in bad]
        root = P.failure_domains_root(found.cluster)
        domains = store.children(root)
        nodes = store.get_many_json([P.join(root, d) for d in domains])
        for domain in domains:
            node = nodes.get(P.join(root, domain))
            if node is None:
                continue
            brokers, err = parse_failure_domain(node.value)
            if err is not None:
                errors.append((P.join(root, domain), err))
            for broker in brokers:
                found.failure_domains[broker] = domain
    paths = {P.policies_path(ns): ns for ns in namespaces}
    for path, node in store.get_many_json(list(paths)).items():
        group, err = parse_anti_affinity_group(node.value)
        if err is not None:
            errors.append((path, err))
        elif group is not None:
            found.anti_affinity_groups[paths[path]] = group
    for path, reason in errors:
        # The store's own hook: counted in ``store.malformed`` and told to the service's metrics.
        store._malformed(path, reason)
    return found
