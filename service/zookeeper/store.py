"""Pulsar's load-balancing records in ZooKeeper: brokers, bundle data, quotas, layouts, ownership.

The session, JSON nodes, compare-and-set and fencing are :mod:`service.zookeeper.nodes`'s; this module knows
Pulsar's paths (:mod:`service.zookeeper.paths`) and the typed records stored under them.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError
from pydantic import ValidationError

from balancer.bundles import NamespaceBundles
from balancer.errors import InvalidInput
from balancer.models import BundleData, LocalBrokerData, ResourceQuota, TimeAverageBrokerData
from service.errors import StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.nodes import Fenced, JsonZk, Versioned, json_bytes, translated

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
        out: dict[str, LocalBrokerData] = {}
        for broker in self.broker_ids():
            got = self.get_model(P.broker_path(broker), LocalBrokerData)
            if got is not None:
                out[broker] = got.value
        return out

    def _stat(self, path: str) -> Any:
        with translated():
            return self.client.exists(path)

    # ---- bundle data, time averages, quotas -------------------------------------------------------
    def read_bundle_data(self) -> dict[str, BundleData]:
        out: dict[str, BundleData] = {}
        for bundle in self.walk_ranges(P.BUNDLE_DATA):
            got = self.get_model(P.bundle_data_path(bundle), BundleData)
            if got is not None:
                out[bundle] = got.value
        return out

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
                out[bundle] = Versioned(self._parse_bundle_data(path, raw), int(stat.version))
        return out

    def _parse_bundle_data(self, path: str, raw: bytes) -> BundleData | None:
        try:
            return BundleData.model_validate(json.loads(raw.decode("utf-8")) if raw else None)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            self._malformed(path, f"not JSON: {e}")
        except ValidationError as e:
            self._malformed(path, f"not a BundleData: {e.errors()[0]['msg']}")
        return None

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
        out: dict[str, TimeAverageBrokerData] = {}
        for broker in self.children(P.TIME_AVERAGE):
            got = self.get_model(P.time_average_path(broker), TimeAverageBrokerData)
            if got is not None:
                out[broker] = got.value
        return out

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
        out: list[str] = []
        for tenant in self.children(P.LOCAL_POLICIES):
            out.extend(f"{tenant}/{ns}" for ns in self.children(P.join(P.LOCAL_POLICIES, tenant)))
        return sorted(out)

    def read_layout(self, namespace: str) -> Versioned[NamespaceBundles] | None:
        path = P.policies_path(namespace)
        got = self.get_json(path)
        if got is None or not isinstance(got.value, dict) or "bundles" not in got.value:
            return None
        try:
            layout = NamespaceBundles.from_policies(namespace, got.value["bundles"])
        except (InvalidInput, AttributeError, TypeError) as e:
            self._malformed(path, f"bad bundle layout: {e}")
            return None
        return Versioned(layout, got.version)

    def read_layouts(self) -> dict[str, Versioned[NamespaceBundles]]:
        out = {}
        for ns in self.namespaces():
            got = self.read_layout(ns)
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
        got = self.get_json(P.policies_path(namespace))
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
            broker = _owner_broker(raw)
            if broker is None:
                self._malformed(path, "ownership data names no broker")
                continue
            out[bundle] = Owner(broker, int(stat.ephemeralOwner), int(stat.version))
        return out

    def acquire(
        self, bundle: str, broker_id: str, urls: dict[str, str], assignment_version: int | None = None
    ) -> bool:
        """Create this session's ephemeral ownership node; False if someone already owns the bundle.

        With ``assignment_version`` the create is one transaction with a check that the assignment
        node is still the one read: a broker never takes a bundle the leader has just sent elsewhere,
        which the transaction-log audit of ``bench/soak.py`` relies on.
        """
        doc = {"brokerId": broker_id, "disabled": False, "advertisedListeners": {}, **urls}
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

    def read_assignments(self) -> dict[str, Versioned[Assignment]]:
        out: dict[str, Versioned[Assignment]] = {}
        bundles = self.walk_ranges(P.ASSIGNMENTS)
        nodes = self.get_many_json([P.assignment_path(b) for b in bundles])
        for bundle in bundles:
            path = P.assignment_path(bundle)
            got = nodes.get(path)
            if got is None:
                continue
            v = got.value
            if not isinstance(v, dict) or not isinstance(v.get("broker"), str):
                self._malformed(path, "assignment without a broker")
                continue
            a = Assignment(v["broker"], v.get("source"), str(v.get("reason", "")), int(v.get("time", 0)))
            out[bundle] = Versioned(a, got.version)
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

    def write_workload(self, scenario: dict[str, Any]) -> None:
        self.put_json(P.WORKLOAD, scenario)


def _owner_broker(raw: bytes) -> str | None:
    """Our agents write ``brokerId``; a Pulsar broker only URLs, so fall back to the web URL's host:port."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("brokerId"), str):
        return str(doc["brokerId"])
    url = doc.get("httpUrl") or doc.get("nativeUrl")
    if isinstance(url, str) and "://" in url:
        return url.split("://", 1)[1].rstrip("/")
    return None
