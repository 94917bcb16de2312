"""ZooKeeper store with Pulsar's layout: typed reads and writes, compare-and-set, fenced transactions.

Everything kazoo raises is translated here: connection problems become
:class:`~service.errors.StoreUnavailable`, lost races :class:`~service.errors.StaleWrite`.
A node that does not parse is skipped, logged and counted (``malformed``), never fatal.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from pydantic import BaseModel, ValidationError

from balancer.bundles import NamespaceBundles
from balancer.errors import InvalidInput
from balancer.models import BundleData, LocalBrokerData, ResourceQuota, TimeAverageBrokerData
from service import zkpaths as P
from service.errors import StaleWrite, StoreUnavailable

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")


@dataclass(frozen=True)
class Versioned(Generic[V]):
    """A value read with the node version a compare-and-set write must present."""

    value: V
    version: int


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


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Kazoo exceptions -> service errors; everything else passes through."""
    try:
        yield
    except BadVersionError as e:
        raise StaleWrite(f"node changed since it was read: {e!r}") from None
    except (KazooTimeoutError, KazooException) as e:
        if isinstance(e, NoNodeError | NodeExistsError | NotEmptyError):
            raise
        raise StoreUnavailable(f"ZooKeeper unavailable: {type(e).__name__}") from None


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Fenced:
    """A multi-op write that commits only if this writer still holds the leader epoch it was given."""

    def __init__(self, store: ZkStore, fence: Versioned[str] | None) -> None:
        self._store = store
        self._tx = store.client.transaction()
        if fence is not None:
            self._tx.check(P.LEADER_EPOCH, fence.version)

    def set_json(self, path: str, obj: Any, version: int = -1) -> Fenced:
        self._tx.set_data(path, _dumps(obj), version)
        return self

    def create_json(self, path: str, obj: Any, ephemeral: bool = False) -> Fenced:
        self._store.ensure_parent(path)
        self._tx.create(path, _dumps(obj), ephemeral=ephemeral)
        return self

    def upsert_json(self, path: str, obj: Any) -> Fenced:
        """Create or overwrite; existence is read now, so a concurrent create makes the commit fail."""
        with translated():
            stat = self._store.client.exists(path)
        return self.create_json(path, obj) if stat is None else self.set_json(path, obj, stat.version)

    def delete(self, path: str, version: int = -1) -> Fenced:
        self._tx.delete(path, version)
        return self

    def check(self, path: str, version: int) -> Fenced:
        self._tx.check(path, version)
        return self

    def commit(self) -> None:
        with translated():
            results = self._tx.commit()
        errors = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        if errors:
            raise StaleWrite(f"transaction refused: {type(errors[0]).__name__}")


class ZkStore:
    """Kazoo-backed store. ``start()`` connects and creates the base paths; ``stop()`` closes.

    ``on_malformed(path, reason)`` is called for every node skipped because it did not parse.
    """

    def __init__(
        self,
        hosts: str,
        chroot: str = "",
        session_timeout_s: float = 10.0,
        on_malformed: Callable[[str, str], None] | None = None,
    ) -> None:
        chroot = chroot.rstrip("/")
        if chroot and not chroot.startswith("/"):
            raise InvalidInput("zk_chroot", chroot, "must start with '/'")
        self.hosts = hosts + chroot
        self.client = KazooClient(hosts=self.hosts, timeout=session_timeout_s)
        self.session_timeout_s = session_timeout_s
        self.malformed: Counter[str] = Counter()
        self._on_malformed = on_malformed
        self._lock = threading.Lock()

    # ---- connection -----------------------------------------------------------------------
    def start(self, timeout_s: float = 15.0) -> None:
        try:
            self.client.start(timeout=timeout_s)
        except KazooTimeoutError:
            self.client.stop()
            raise StoreUnavailable(f"cannot connect to ZooKeeper at {self.hosts}") from None
        with translated():
            for path in P.BASE_PATHS:
                self.client.ensure_path(path)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop()
        with contextlib.suppress(Exception):
            self.client.close()

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """``fn`` gets ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"`` on kazoo's thread: it must not block."""

        def listener(state: KazooState) -> bool:
            fn(str(state))
            return False

        self.client.add_listener(listener)

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return None if cid is None else int(cid[0])

    # ---- generic ----------------------------------------------------------------------------
    def ensure_parent(self, path: str) -> None:
        with translated():
            self.client.ensure_path(P.parent(path))

    def get_json(self, path: str) -> Versioned[Any] | None:
        """The node's JSON and version; None if absent; a node that is not JSON counts as malformed."""
        with translated():
            try:
                raw, stat = self.client.get(path)
            except NoNodeError:
                return None
        try:
            return Versioned(json.loads(raw.decode("utf-8")) if raw else None, stat.version)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            self._malformed(path, f"not JSON: {e}")
            return None

    def get_model(self, path: str, model: type[M]) -> Versioned[M] | None:
        got = self.get_json(path)
        if got is None:
            return None
        try:
            return Versioned(model.model_validate(got.value), got.version)
        except ValidationError as e:
            self._malformed(path, f"not a {model.__name__}: {e.errors()[0]['msg']}")
            return None

    def put_json(self, path: str, obj: Any, version: int | None = None, ephemeral: bool = False) -> int:
        """Write ``obj``; with ``version`` a compare-and-set (``-1``: must not exist). Returns the version."""
        data = _dumps(obj)
        with translated():
            if version is None:
                try:
                    return int(self.client.set(path, data).version)
                except NoNodeError:
                    pass
            if version is None or version == -1:
                self.client.ensure_path(P.parent(path))
                try:
                    self.client.create(path, data, ephemeral=ephemeral)
                    return 0
                except NodeExistsError:
                    if version == -1:
                        raise StaleWrite(f"{path} already exists") from None
                    return int(self.client.set(path, data).version)
            try:
                return int(self.client.set(path, data, version=version).version)
            except NoNodeError:
                raise StaleWrite(f"{path} vanished before the write") from None

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        with translated():
            try:
                self.client.delete(path, version=version, recursive=recursive)
                return True
            except NoNodeError:
                return False

    def children(self, path: str) -> list[str]:
        with translated():
            try:
                return sorted(self.client.get_children(path))
            except NoNodeError:
                return []

    def walk_ranges(self, root: str) -> list[str]:
        """Relative names (``tenant/ns/0x…_0x…``) of every bundle-range node below ``root``."""
        out: list[str] = []
        stack = [""]
        while stack:
            rel = stack.pop()
            for child in self.children(P.join(root, rel) if rel else root):
                name = f"{rel}/{child}" if rel else child
                if P.is_range(child):
                    out.append(name)
                elif rel.count("/") < 3:  # tenant/ns or tenant/cluster/ns: never deeper
                    stack.append(name)
        return sorted(out)

    def fenced(self, fence: Versioned[str] | None) -> Fenced:
        return Fenced(self, fence)

    def _malformed(self, path: str, reason: str) -> None:
        with self._lock:
            self.malformed[path] += 1
        log.warning("skipping malformed node %s: %s", path, reason)
        if self._on_malformed is not None:
            self._on_malformed(path, reason)

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
                self.client.set(P.broker_path(broker_id), _dumps(data.to_json_dict()))
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
        for bundle in self.walk_ranges(P.BUNDLE_DATA):
            path = P.bundle_data_path(bundle)
            with translated():
                try:
                    raw, stat = self.client.get(path)
                except NoNodeError:
                    continue
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

    def write_bundle_data_cas(self, bundle: str, data: BundleData, version: int) -> int:
        """Write only if the node is still at ``version`` (``-1``: must not exist); returns the new
        version. Raises StaleWrite when another writer (the long-term job) got there first."""
        return self.put_json(P.bundle_data_path(bundle), data.to_json_dict(), version=version)

    def delete_bundle_data(self, bundle: str) -> None:
        self.delete(P.bundle_data_path(bundle))

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
        out: dict[str, ResourceQuota] = {}
        for bundle in self.walk_ranges(P.RESOURCE_QUOTA_BUNDLES):
            got = self.get_model(P.quota_path(bundle), ResourceQuota)
            if got is not None:
                out[bundle] = got.value
        return out

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
        for bundle in self.walk_ranges(P.OWNERSHIP):
            path = P.ownership_path(bundle)
            with translated():
                try:
                    raw, stat = self.client.get(path)
                except NoNodeError:
                    continue
            broker = _owner_broker(raw)
            if broker is None:
                self._malformed(path, "ownership data names no broker")
                continue
            out[bundle] = Owner(broker, int(stat.ephemeralOwner), int(stat.version))
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

    def read_assignments(self) -> dict[str, Versioned[Assignment]]:
        out: dict[str, Versioned[Assignment]] = {}
        for bundle in self.walk_ranges(P.ASSIGNMENTS):
            path = P.assignment_path(bundle)
            got = self.get_json(path)
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
