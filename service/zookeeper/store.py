"""Pulsar's load-balancing records in ZooKeeper: brokers, bundle data, quotas, layouts, ownership.

The session, JSON nodes, compare-and-set and fencing are :mod:`service.zookeeper.nodes`'s; this module knows
Pulsar's paths (:mod:`service.zookeeper.paths`) and the typed records stored under them.

Every read goes through ``parse_node`` (:mod:`service.zookeeper.validate` first, then the record's own
checks below), so a node's content can only ever make that node skipped, never raise to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kazoo.exceptions import NoNodeError

from balancer.bundles import NamespaceBundles
from balancer.errors import InvalidInput
from balancer.models import BundleData, LocalBrokerData, ResourceQuota, TimeAverageBrokerData
from service.errors import StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.nodes import Fenced, JsonZk, Versioned, json_bytes, translated
from service.zookeeper.validate import JAVA_LONG_MAX, BadNode, finite_number

# A broker's registration is ephemeral (its session's lifetime is its liveness); a persistent node
# under /loadbalance/brokers belongs to no running broker and must never receive bundles.
V = TypeVar("V")
PHANTOM_REASON = "persistent node: a live broker registers an ephemeral one"

__all__ = ["Assignment", "Fenced", "Owner", "Versioned", "ZkStore", "translated"]


@dataclass(frozen=True)
class Owner:
    """Who owns a bundle: the broker id, and the ZooKeeper session holding the ephemeral node."""

    broker: str
    session_id: int
    version: int


@dataclass(frozen=True)
class Assignment:
    """The leader's intent for a bundle: which broker should own it, and why."""

    broker: str
    source: str | None
    reason: str
    time_ms: int


class ZkStore(JsonZk):
    """Pulsar's records on a :class:`~service.zookeeper.nodes.JsonZk` session (which owns start and stop)."""

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
        with translated():
            try:
                self.client.set(P.broker_path(broker_id), json_bytes(data.to_json_dict()))
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
            raw, stat = nodes[path]
            if not getattr(stat, "ephemeralOwner", 0):
                self._malformed(path, PHANTOM_REASON, int(getattr(stat, "mzxid", -1)))
                continue
            got = self.parse_node(path, raw, stat, parse_broker_report)
            if got is not None:
                out[broker] = got.value
        return out

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
                got = self.parse_node(path, raw, stat, parse_bundle_data)
                out[bundle] = Versioned(None if got is None else got.value, int(stat.version))
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

    def delete_bundle_data(self, bundle: str) -> None:
        self.delete(P.bundle_data_path(bundle))

    def write_time_average(self, broker_id: str, data: TimeAverageBrokerData) -> None:
        self.put_json(P.time_average_path(broker_id), data.to_json_dict())

    def read_time_averages(self) -> dict[str, TimeAverageBrokerData]:
        brokers = self.children(P.TIME_AVERAGE)
        got = self.get_many_models([P.time_average_path(b) for b in brokers], TimeAverageBrokerData)
        return {b: got[P.time_average_path(b)].value for b in brokers if P.time_average_path(b) in got}

    def delete_time_average(self, broker_id: str) -> None:
        self.delete(P.time_average_path(broker_id))

    def read_quotas(self) -> dict[str, ResourceQuota]:
        bundles = self.walk_ranges(P.RESOURCE_QUOTA_BUNDLES)
        got = self.get_many_models([P.quota_path(b) for b in bundles], ResourceQuota)
        return {b: got[P.quota_path(b)].value for b in bundles if P.quota_path(b) in got}

    def write_quota(self, bundle: str, quota: ResourceQuota) -> None:
        self.put_json(P.quota_path(bundle), quota.to_json_dict())

    # ---- namespace layouts ------------------------------------------------------------------------
    def namespaces(self) -> list[str]:
        tenants = self.children(P.LOCAL_POLICIES)
        listed = self._children_many([P.join(P.LOCAL_POLICIES, t) for t in tenants])
        return sorted(f"{tenant}/{ns}" for tenant, names in zip(tenants, listed, strict=True) for ns in names)

    def read_layout(self, namespace: str) -> Versioned[NamespaceBundles] | None:
        path = P.policies_path(namespace)
        with translated():
            try:
                raw, stat = self.client.get(path)
            except NoNodeError:
                return None
        return self.parse_node(path, raw, stat, lambda doc: parse_layout(namespace, doc))

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
            raw, stat = nodes[path]
            got = self.parse_node(path, raw, stat, lambda doc, ns=ns: parse_layout(ns, doc))  # type: ignore[misc]
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
            raw, stat = nodes[path]
            got = self.parse_node(path, raw, stat, parse_owner)
            if got is not None:
                out[bundle] = Owner(got.value, int(stat.ephemeralOwner), int(stat.version))
        return out

    def acquire(self, bundle: str, broker_id: str, urls: dict[str, str]) -> bool:
        """Create this session's ephemeral ownership node; False if someone already owns the bundle."""
        doc = {"brokerId": broker_id, "disabled": False, "advertisedListeners": {}, **urls}
        try:
            self.put_json(P.ownership_path(bundle), doc, version=-1, ephemeral=True)
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
            raw, stat = nodes[path]
            got = self.parse_node(path, raw, stat, parse_assignment)
            if got is not None:
                out[bundle] = got
        return out

    @staticmethod
    def assignment_doc(a: Assignment) -> dict[str, Any]:
        return {"broker": a.broker, "source": a.source, "reason": a.reason, "time": a.time_ms}

    # ---- leader epoch (fencing) ---------------------------------------------------------------------
    def bump_epoch(self, leader_id: str) -> Versioned[str]:
        """Called by a new leader before it acts: every write of an older leader fenced on the epoch fails."""
        with translated():
            self.client.ensure_path(P.LEADER_EPOCH)
            stat = self.client.set(P.LEADER_EPOCH, leader_id.encode())
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


# ---- record checks: each raises (BadNode, pydantic's ValidationError) on a bad document -------------
# A float32's largest value: Pulsar computes resource percentages in float, so a usage or limit
# beyond it is no number a broker can have measured.
F32_MAX = 3.4028234663852886e38
RATES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")


def parse_broker_report(doc: Any) -> LocalBrokerData:
    """LocalBrokerData with Pulsar's checks: a JSON object, finite resource numbers within float range."""
    if not isinstance(doc, dict):
        raise BadNode(f"load report is a JSON {type(doc).__name__}, not an object")
    data = LocalBrokerData.model_validate(doc)
    if not (
        data.web_service_url
        or data.web_service_url_tls
        or data.pulsar_service_url
        or data.pulsar_service_url_tls
    ):
        # A broker publishes where it serves; a report naming no URL (``{}``) is nobody to send bundles to.
        raise BadNode("load report names no webServiceUrl or pulsarServiceUrl")
    for name in ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out"):
        res = getattr(data, name)
        finite_number(res.usage, f"{name}.usage", -F32_MAX, F32_MAX)
        finite_number(res.limit, f"{name}.limit", -F32_MAX, F32_MAX)
    # Rates are bounded well inside double range: the leader sums and averages thousands of them,
    # and a sum that overflows to Infinity would poison every bundle-data node it reaches.
    for name in RATES:
        finite_number(getattr(data, name), name, 0.0, F32_MAX)
    for bundle, stats in data.last_stats.items():
        for name in RATES:
            finite_number(getattr(stats, name), f"lastStats.{bundle[:80]}.{name}", 0.0, F32_MAX)
    if not 0 <= data.last_update <= JAVA_LONG_MAX:
        raise BadNode(f"lastUpdate = {data.last_update} is not a time")
    return data


def parse_bundle_data(doc: Any) -> BundleData:
    """BundleData whose windows can be averaged: ``maxSamples`` >= 1 (the average divides by the
    sample count, capped by it), ``numSamples`` within [0, maxSamples], rates finite and >= 0."""
    if not isinstance(doc, dict):
        raise BadNode(f"bundle data is a JSON {type(doc).__name__}, not an object")
    data = BundleData.model_validate(doc)
    for name, window in (("shortTermData", data.short_term_data), ("longTermData", data.long_term_data)):
        if not 1 <= window.max_samples <= 1_000_000:
            raise BadNode(f"{name}.maxSamples = {window.max_samples} is outside [1, 1000000]")
        if not 0 <= window.num_samples <= window.max_samples:
            raise BadNode(f"{name}.numSamples = {window.num_samples} is outside [0, maxSamples]")
        for rate in RATES:
            finite_number(getattr(window, rate), f"{name}.{rate}", 0.0, F32_MAX)
    if data.topics < 0:
        raise BadNode(f"topics = {data.topics} is negative")
    return data


def parse_layout(namespace: str, doc: Any) -> NamespaceBundles:
    """A namespace's bundle layout from its local-policies document (``bundles`` member required)."""
    if not isinstance(doc, dict):
        raise BadNode(f"local policies are a JSON {type(doc).__name__}, not an object")
    if not isinstance(doc.get("bundles"), dict):
        raise BadNode("local policies without a 'bundles' object")
    try:
        return NamespaceBundles.from_policies(namespace, doc["bundles"])
    except InvalidInput as e:
        raise BadNode(f"bad bundle layout: {e}") from None


def parse_assignment(doc: Any) -> Assignment:
    """loadmgr's assignment ``{"broker", "source", "reason", "time"}``: every member type-checked."""
    if not isinstance(doc, dict) or not isinstance(doc.get("broker"), str) or not doc["broker"]:
        raise BadNode("assignment without a broker")
    source = doc.get("source")
    if source is not None and not isinstance(source, str):
        raise BadNode(f"assignment source = {str(source)[:40]!r} is not a broker id")
    reason = doc.get("reason", "")
    if not isinstance(reason, str):
        raise BadNode(f"assignment reason = {str(reason)[:40]!r} is not a string")
    t = doc.get("time", 0)
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= JAVA_LONG_MAX:
        raise BadNode(f"assignment time = {str(t)[:40]!r} is not epoch milliseconds")
    return Assignment(doc["broker"], source, reason, t)


def parse_owner(doc: Any) -> str:
    """The broker named by an ownership node.

    Our agents write ``brokerId``; a Pulsar broker only URLs, so fall back to the web URL's host:port."""
    if not isinstance(doc, dict):
        raise BadNode("ownership data is not a JSON object")
    if isinstance(doc.get("brokerId"), str) and doc["brokerId"]:
        return str(doc["brokerId"])
    url = doc.get("httpUrl") or doc.get("nativeUrl")
    if isinstance(url, str) and "://" in url:
        return url.split("://", 1)[1].rstrip("/")
    raise BadNode("ownership data names no broker")
