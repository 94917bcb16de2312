"""Pulsar's load-balancing records in ZooKeeper: brokers, bundle data, quotas, layouts, ownership.

The session, JSON nodes and compare-and-set are :mod:`service.zookeeper.session.nodes`'s, fencing
:mod:`service.zookeeper.session.fenced`'s; this module knows Pulsar's paths (:mod:`service.zookeeper.paths`)
and the typed records stored under them.

Every read goes through ``parse_node`` (:mod:`service.zookeeper.session.validate` first, then the record's own
checks below), so a node's content can only ever make that node skipped, never raise to the caller.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import NoNodeError

from balancer.bundles import NamespaceBundles
from balancer.errors import InvalidInput
from balancer.models import BundleData, LocalBrokerData, ResourceQuota, TimeAverageBrokerData
from service.errors import StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.metadata.leader_node import epoch_doc
from service.zookeeper.metadata.records import (
    Assignment,
    Owner,
    owner_doc,
    parse_assignment,
    parse_broker_report,
    parse_bundle_data,
    parse_layout,
    parse_owner,
    parse_quota,
    report_size_warning,
)
from service.zookeeper.session.nodes import JsonZk
from service.zookeeper.session.wire import Versioned, json_bytes, translated

# A broker's registration is ephemeral (its session's lifetime is its liveness); a persistent node
# under /loadbalance/brokers belongs to no running broker and must never receive bundles.
V = TypeVar("V")
PHANTOM_REASON = "persistent node: a live broker registers an ephemeral one"
# Likewise ownership: a broker owns a bundle while its session holds the node, so a persistent node
# there is owned by nobody and, left alone, would stop every broker from taking the bundle.
PERSISTENT_OWNER_REASON = "persistent ownership node: an owner holds an ephemeral one"

log = logging.getLogger(__name__)
__all__ = ["Assignment", "Owner", "Versioned", "ZkStore", "translated"]


class ZkStore(JsonZk):
    """Pulsar's records on a :class:`~service.zookeeper.session.nodes.JsonZk` session (owning start, stop)."""

    # ---- brokers ------------------------------------------------------------------------------
    def register_broker(self, broker_id: str, data: LocalBrokerData) -> None:
        """Create the broker's ephemeral node; fails with StaleWrite if another session holds it."""
        if not broker_id or "/" in broker_id:
            # A '/' would first create a persistent parent: a phantom broker nobody removes.
            raise InvalidInput("broker_id", broker_id, "must be one node name (host:port), without '/'")
        path = P.broker_path(broker_id)
        existing = self._stat(path)
        if existing is not None and existing.ephemeralOwner == self.session_id:
            self.put_json(path, data.to_json_dict())
            return
        self.put_json(path, data.to_json_dict(), version=-1, ephemeral=True)

    def write_broker(self, broker_id: str, data: LocalBrokerData) -> None:
        raw = json_bytes(data.to_json_dict())
        warning = report_size_warning(broker_id, len(raw), len(data.last_stats))
        if warning is not None:
            log.warning("%s", warning)
        with translated():
            try:
                self.client.set(P.broker_path(broker_id), raw)
            except NoNodeError:
                raise StaleWrite(f"broker node of {broker_id} is gone") from None

    def broker_ids(self) -> list[str]:
        return self.children(P.BROKERS)

    def read_brokers(self) -> dict[str, LocalBrokerData]:
        """Live brokers' reports, pipelined. Persistent nodes (phantoms) and bad reports are skipped."""
        out: dict[str, LocalBrokerData] = {}
        brokers = self.broker_ids()
        nodes = self.get_many([P.broker_path(b) for b in brokers])
        for broker in brokers:
            path = P.broker_path(broker)
            if path not in nodes:
                continue
            got = self.decode_broker(path, *nodes[path])
            if got is not None:
                out[broker] = got
        return out

    # ---- decoding one node: the reads here and the leader's watch cache share these ----------------
    def decode_broker(self, path: str, raw: bytes, stat: Any) -> LocalBrokerData | None:
        if not getattr(stat, "ephemeralOwner", 0):
            self._malformed(path, PHANTOM_REASON, int(getattr(stat, "mzxid", -1)))
            return None
        got = self.parse_node(path, raw, stat, parse_broker_report)
        return None if got is None else got.value

    def decode_quota(self, path: str, raw: bytes, stat: Any) -> ResourceQuota | None:
        got = self.parse_node(path, raw, stat, parse_quota)
        return None if got is None else got.value

    def decode_bundle_data(self, path: str, raw: bytes, stat: Any) -> BundleData | None:
        got = self.parse_node(path, raw, stat, parse_bundle_data)
        return None if got is None else got.value

    def decode_layout(self, path: str, raw: bytes, stat: Any) -> Versioned[NamespaceBundles] | None:
        namespace = path[len(P.LOCAL_POLICIES) + 1 :]
        return self.parse_node(path, raw, stat, lambda doc: parse_layout(namespace, doc))

    def decode_owner(self, path: str, raw: bytes, stat: Any) -> Owner | None:
        if not getattr(stat, "ephemeralOwner", 0):
            self._malformed(path, PERSISTENT_OWNER_REASON, int(getattr(stat, "mzxid", -1)))
            return None
        got = self.parse_node(path, raw, stat, parse_owner)
        return None if got is None else Owner(got.value, int(stat.ephemeralOwner), int(stat.version))

    def decode_assignment(self, path: str, raw: bytes, stat: Any) -> Versioned[Assignment] | None:
        return self.parse_node(path, raw, stat, parse_assignment)

    def _get(self, path: str) -> tuple[bytes, Any] | None:
        with translated():
            try:
                raw, stat = self.client.get(path)
            except NoNodeError:
                return None
        return raw, stat

    def _stat(self, path: str) -> Any:
        with translated():
            return self.client.exists(path)

    # ---- bundle data, time averages, quotas -------------------------------------------------------
    def read_bundle_data(self) -> dict[str, BundleData]:
        return {b: got.value for b, got in self.read_bundle_data_versioned().items() if got.value is not None}

    def write_bundle_data(self, bundle: str, data: BundleData) -> None:
        self.put_json(P.bundle_data_path(bundle), data.to_json_dict())

    def read_bundle_data_versioned(self) -> dict[str, Versioned[BundleData | None]]:
        """Every bundle-data node with its version. A node that does not parse is counted as malformed
        and kept with value None: its version still lets a compare-and-set writer replace it."""
        out: dict[str, Versioned[BundleData | None]] = {}
        bundles = self.walk_ranges(P.BUNDLE_DATA)
        nodes = self.get_many([P.bundle_data_path(b) for b in bundles])
        for bundle in bundles:
            path = P.bundle_data_path(bundle)
            if path in nodes:
                raw, stat = nodes[path]
                out[bundle] = Versioned(self.decode_bundle_data(path, raw, stat), int(stat.version))
        return out

    def write_bundle_data_cas(
        self, bundle: str, data: BundleData, version: int, fence: Versioned[str] | None = None
    ) -> int:
        """Write only if the node is still at ``version`` (``-1``: must not exist); returns the new
        version. Raises StaleWrite when another writer (the long-term job) got there first, or, with
        ``fence``, when the leader epoch moved on (a replaced leader's late write must not be adopted
        by the new leader as if the long-term job had written it)."""
        path = P.bundle_data_path(bundle)
        if fence is None:
            return self.put_json(path, data.to_json_dict(), version=version)
        tx = self.fenced(fence)
        if version == -1:
            tx.create_json(path, data.to_json_dict())
        else:
            tx.set_json(path, data.to_json_dict(), version)
        tx.commit()
        return version + 1  # a CAS at ``version`` leaves ``version + 1``; a create leaves 0

    def delete_bundle_data(self, bundle: str, fence: Versioned[str] | None = None) -> None:
        """Delete a bundle's data node; with ``fence`` only while that leader epoch holds (a replaced
        leader's late clean-up must not remove what the new leader keeps). Absent is not an error."""
        path = P.bundle_data_path(bundle)
        if fence is None:
            self.delete(path)
            return
        with contextlib.suppress(StaleWrite):  # absent, or the epoch moved on: either way nothing to do
            self.fenced(fence).delete(path).commit()

    def write_time_average(self, broker_id: str, data: TimeAverageBrokerData) -> None:
        self.put_json(P.time_average_path(broker_id), data.to_json_dict())

    def read_time_averages(self) -> dict[str, TimeAverageBrokerData]:
        brokers = self.children(P.TIME_AVERAGE)
        got = self.get_many_models([P.time_average_path(b) for b in brokers], TimeAverageBrokerData)
        return {b: got[P.time_average_path(b)].value for b in brokers if P.time_average_path(b) in got}

    def delete_time_average(self, broker_id: str) -> None:
        self.delete(P.time_average_path(broker_id))

    def read_quotas(self) -> dict[str, ResourceQuota]:
        """Per-bundle quotas at Pulsar 2.8+'s path; a pre-2.8 node counts only where no new one exists."""
        legacy_prefix = P.RESOURCE_QUOTA_LEGACY[len(P.RESOURCE_QUOTA) + 1 :] + "/"
        out: dict[str, ResourceQuota] = {}
        for bundles, path_of in (
            (self.walk_ranges(P.RESOURCE_QUOTA_LEGACY), P.legacy_quota_path),
            # A tenant called "namespace" would be walked twice; the legacy subtree is not a tenant.
            (
                [b for b in self.walk_ranges(P.RESOURCE_QUOTA) if not b.startswith(legacy_prefix)],
                P.quota_path,
            ),
        ):
            nodes = self.get_many([path_of(b) for b in bundles])
            for b in bundles:
                if path_of(b) in nodes:
                    quota = self.decode_quota(path_of(b), *nodes[path_of(b)])
                    if quota is not None:
                        out[b] = quota
        return out

    def write_quota(self, bundle: str, quota: ResourceQuota) -> None:
        self.put_json(P.quota_path(bundle), quota.to_json_dict())

    # ---- namespace layouts ------------------------------------------------------------------------
    def namespaces(self) -> list[str]:
        tenants = self.children(P.LOCAL_POLICIES)
        listed = self._children_many([P.join(P.LOCAL_POLICIES, t) for t in tenants])
        return sorted(f"{tenant}/{ns}" for tenant, names in zip(tenants, listed, strict=True) for ns in names)

    def read_layout(self, namespace: str) -> Versioned[NamespaceBundles] | None:
        path = P.policies_path(namespace)
        got = self._get(path)
        return None if got is None else self.decode_layout(path, *got)

    def read_policies_layout(self, namespace: str) -> Versioned[NamespaceBundles] | None:
        """The layout in a namespace's Policies (``/admin/policies/<tenant>/<ns>``), which Pulsar falls
        back to for a namespace no broker has loaded yet; None when absent or without bundles."""
        path = P.join(P.TENANT_POLICIES, namespace)
        got = self._get(path)
        return None if got is None else self.parse_node(path, *got, lambda doc: parse_layout(namespace, doc))

    def read_layouts(self) -> dict[str, Versioned[NamespaceBundles]]:
        """Every namespace's layout, pipelined; a node without a valid ``bundles`` member is skipped
        as malformed (logged and counted), never silently."""
        namespaces = self.namespaces()
        nodes = self.get_many([P.policies_path(ns) for ns in namespaces])
        out: dict[str, Versioned[NamespaceBundles]] = {}
        for ns in namespaces:
            path = P.policies_path(ns)
            if path not in nodes:
                continue
            got = self.decode_layout(path, *nodes[path])
            if got is not None:
                out[ns] = got
        return out

    def create_namespace(self, namespace: str, num_bundles: int) -> NamespaceBundles:
        """Write a new namespace's initial layout; an existing namespace keeps its layout (returned)."""
        if namespace.count("/") != 1 or not all(namespace.split("/")):
            raise InvalidInput("namespace", namespace, "expected <tenant>/<namespace>")
        layout = NamespaceBundles.initial(namespace, num_bundles)
        try:
            self.put_json(P.policies_path(namespace), {"bundles": layout.to_policies()}, version=-1)
        except StaleWrite:
            got = self.read_layout(namespace)
            if got is None:
                raise
            return got.value
        return layout

    def layout_doc(self, namespace: str, layout: NamespaceBundles) -> dict[str, Any]:
        """The policies document with ``bundles`` replaced, keeping any other member already there."""
        got = self.get_json(P.policies_path(namespace))  # validated: a bad node yields a fresh document
        doc = dict(got.value) if got is not None and isinstance(got.value, dict) else {}
        doc["bundles"] = layout.to_policies()
        return doc

    # ---- ownership and assignments ----------------------------------------------------------------
    def read_owners(self) -> dict[str, Owner]:
        out: dict[str, Owner] = {}
        bundles = self.walk_ranges(P.OWNERSHIP)
        nodes = self.get_many([P.ownership_path(b) for b in bundles])
        for bundle in bundles:
            path = P.ownership_path(bundle)
            if path not in nodes:
                continue
            owner = self.decode_owner(path, *nodes[path])
            if owner is not None:
                out[bundle] = owner
        return out

    def read_owner(self, bundle: str) -> Owner | None:
        path = P.ownership_path(bundle)
        got = self._get(path)
        return None if got is None else self.decode_owner(path, *got)

    def poison_owner_version(self, bundle: str) -> int | None:
        """The version of ``bundle``'s ownership node if it is poison, read now: persistent, or not
        an ownership record. None when there is no node or it is a legitimate (ephemeral, readable)
        owner, which nobody but its own session ever deletes."""
        path = P.ownership_path(bundle)
        got = self._get(path)
        if got is None or self.decode_owner(path, *got) is not None:
            return None
        return int(got[1].version)

    def read_assignment(self, bundle: str) -> Versioned[Assignment] | None:
        path = P.assignment_path(bundle)
        got = self._get(path)
        return None if got is None else self.decode_assignment(path, *got)

    def acquire(
        self, bundle: str, broker_id: str, urls: dict[str, str], assignment_version: int | None = None
    ) -> bool:
        """Create this session's ephemeral ownership node; False if someone already owns the bundle.

        With ``assignment_version`` the create is one transaction with a check that the assignment
        node is still the one read: a broker never takes a bundle the leader has just sent elsewhere,
        which the transaction-log audit of ``bench/soak.py`` relies on. The node: :func:`owner_doc`."""
        doc = owner_doc(broker_id, urls)
        try:
            if assignment_version is None:
                self.put_json(P.ownership_path(bundle), doc, version=-1, ephemeral=True)
            else:
                tx = self.fenced(None).check(P.assignment_path(bundle), assignment_version)
                tx.create_json(P.ownership_path(bundle), doc, ephemeral=True).commit()
            return True
        except StaleWrite:
            return False

    def release(self, bundle: str) -> bool:
        """Delete the ownership node only if this session holds it."""
        path = P.ownership_path(bundle)
        stat = self._stat(path)
        if stat is None or stat.ephemeralOwner != self.session_id:
            return False
        try:
            return self.delete(path, version=stat.version)
        except StaleWrite:
            return False

    def malformed_version(self, path: str, parse: Callable[[Any], Any]) -> int | None:
        """The version of ``path`` if the node exists and ``parse`` refuses it (None otherwise): lets
        the node's sole writer replace a poison node instead of failing to create beside it."""
        with translated():
            try:
                raw, stat = self.client.get(path)
            except NoNodeError:
                return None
        return None if self.parse_node(path, raw, stat, parse) is not None else int(stat.version)

    def read_assignments(self) -> dict[str, Versioned[Assignment]]:
        out: dict[str, Versioned[Assignment]] = {}
        bundles = self.walk_ranges(P.ASSIGNMENTS)
        nodes = self.get_many([P.assignment_path(b) for b in bundles])
        for bundle in bundles:
            path = P.assignment_path(bundle)
            if path not in nodes:
                continue
            got = self.decode_assignment(path, *nodes[path])
            if got is not None:
                out[bundle] = got
        return out

    @staticmethod
    def assignment_doc(a: Assignment) -> dict[str, Any]:
        return {"broker": a.broker, "source": a.source, "reason": a.reason, "time": a.time_ms}

    # ---- leader epoch (fencing) ---------------------------------------------------------------------
    def bump_epoch(self, leader_id: str, election_path: str = P.LEADER) -> Versioned[str]:
        """Called by a new leader before it acts: every write of an older leader fenced on the epoch fails.

        The node says who won and through which election node (so which mode: see
        :func:`service.zookeeper.metadata.leader_node.read_epoch_owner`)."""
        doc = epoch_doc(leader_id, election_path)
        with translated():
            self.client.ensure_path(P.LEADER_EPOCH)
            stat = self.client.set(P.LEADER_EPOCH, doc)
        return Versioned(leader_id, int(stat.version))

    # ---- workload --------------------------------------------------------------------------------------
    def read_workload(self) -> dict[str, Any] | None:
        got = self.get_json(P.WORKLOAD)
        return got.value if got is not None and isinstance(got.value, dict) else None

    def read_workload_as(self, parse: Callable[[Any], V]) -> V | None:
        """The workload through ``parse``; a node ``parse`` refuses is skipped as malformed (None)."""
        with translated():
            try:
                raw, stat = self.client.get(P.WORKLOAD)
            except NoNodeError:
                return None
        got = self.parse_node(P.WORKLOAD, raw, stat, parse)
        return None if got is None else got.value

    def write_workload(self, scenario: dict[str, Any]) -> None:
        self.put_json(P.WORKLOAD, scenario)
