"""Dynamic configuration that survives: persisted in ZooKeeper, applied by every instance from a watch.

Two sources, both nodes of string values as Pulsar keeps them:

* ``/admin/configuration`` — Pulsar's own dynamic overrides (``pulsar-admin brokers
  update-dynamic-config``). Its load-balancer keys apply to loadmgr too, except, in Pulsar mode, the
  switches that describe the brokers' own load manager (:data:`BROKER_OWN_KEYS`): there they must
  stay off on the brokers (``service.pulsar.broker_settings``) while loadmgr's own stay on.
* ``/loadmgr/config`` — what ``PUT /config`` (and ``loadmgr config set``) changed, written by the
  leader only, fenced on its epoch, ``{"values": {key: value}, "updatedBy", "time"}``.

The effective configuration is the start-up one (broker.conf, environment) updated by Pulsar's
dynamic keys, then by loadmgr's. A value that is not acceptable (hostile or stale) is skipped and
logged once per node version; the other keys still apply.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError
from service.errors import StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Versioned, ZkStore

log = logging.getLogger(__name__)

BROKER_OWN_KEYS = frozenset(
    {
        "loadBalancerEnabled",
        "loadBalancerSheddingEnabled",
        "loadBalancerAutoBundleSplitEnabled",
        "loadBalancerAutoUnloadSplitBundlesEnabled",
        "loadManagerClassName",
    }
)
MAX_NODE_BYTES = 1 << 20


def decode_values(raw: bytes | None, path: str) -> dict[str, str]:
    """A node's ``{key: value}`` (``/loadmgr/config``'s under ``values``); junk gives {} and a log line."""
    if not raw:
        return {}
    try:
        if len(raw) > MAX_NODE_BYTES:
            raise ValueError(f"{len(raw)} bytes")
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        log.warning("%s is not a JSON object (%s): ignored", path, e)
        return {}
    if isinstance(doc, dict) and path == P.LOADMGR_CONFIG:
        doc = doc.get("values", {})
    if not isinstance(doc, dict):
        log.warning("%s is not a JSON object: ignored", path)
        return {}
    # Pulsar keeps strings; a JSON number or boolean is taken in its JSON spelling.
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in doc.items()}


def effective(
    base: LoadBalancerConfig,
    pulsar: Mapping[str, Any],
    ours: Mapping[str, Any],
    pulsar_mode: bool,
    on_bad: Callable[[str, Any, str], None] | None = None,
) -> LoadBalancerConfig:
    """``base`` with Pulsar's dynamic load-balancer keys, then loadmgr's, applied key by key."""
    known = set(LoadBalancerConfig.model_fields)
    dyn = LoadBalancerConfig.dynamic_keys()
    updates: dict[str, Any] = {}
    for source, values in (("/admin/configuration", pulsar), (P.LOADMGR_CONFIG, ours)):
        for key, value in values.items():
            if key not in known:
                continue  # Pulsar's node holds every broker key; only the load balancer's are ours
            if source == "/admin/configuration" and (
                key not in dyn or (pulsar_mode and key in BROKER_OWN_KEYS)
            ):
                continue
            try:
                base.with_updates({**updates, key: value}, dynamic_only=True)
            except ConfigError as e:
                if on_bad is not None:
                    on_bad(source, key, str(e))
                continue
            updates[key] = value
    return base.with_updates(updates, dynamic_only=True) if updates else base


class DynamicConfig:
    """Follows both nodes with data watches and calls ``apply(pulsar, ours)`` on every change."""

    def __init__(self, store: ZkStore, apply: Callable[[dict[str, str], dict[str, str]], None]) -> None:
        self._store = store
        self._apply = apply
        self._lock = threading.Lock()
        self.pulsar: dict[str, str] = {}
        self.ours: dict[str, str] = {}
        self._started = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        client = self._store.client
        client.DataWatch(
            P.PULSAR_DYNAMIC_CONFIG, lambda data, stat, *_: self._changed(P.PULSAR_DYNAMIC_CONFIG, data)
        )
        client.DataWatch(P.LOADMGR_CONFIG, lambda data, stat, *_: self._changed(P.LOADMGR_CONFIG, data))

    def _changed(self, path: str, data: bytes | None) -> None:
        values = decode_values(data, path)
        with self._lock:
            if path == P.PULSAR_DYNAMIC_CONFIG:
                self.pulsar = values
            else:
                self.ours = values
            pulsar, ours = dict(self.pulsar), dict(self.ours)
        try:
            self._apply(pulsar, ours)
        except Exception:  # a watch callback must never die: the next change applies again
            log.exception("applying the dynamic configuration from %s failed", path)

    def persist(
        self, updates: Mapping[str, Any], fence: Versioned[str] | None, principal: str | None, now_ms: int
    ) -> None:
        """Merge ``updates`` into ``/loadmgr/config`` (compare-and-set, fenced on the leader epoch)."""
        if fence is None:
            raise StaleWrite("not the leader: dynamic configuration is written by the leader only")
        for _ in range(5):
            got = self._store.get_json(P.LOADMGR_CONFIG)
            current: dict[str, Any] = {}
            if got is not None and isinstance(got.value, dict) and isinstance(got.value.get("values"), dict):
                current = dict(got.value["values"])
            current.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in updates.items()})
            doc = {"values": current, "updatedBy": principal, "time": now_ms}
            tx = self._store.fenced(fence)
            if got is None:
                tx.create_json(P.LOADMGR_CONFIG, doc)
            else:
                tx.set_json(P.LOADMGR_CONFIG, doc, got.version)
            try:
                tx.commit()
                return
            except StaleWrite:
                continue  # the node changed under us, or the epoch moved on (then every retry fails too)
        raise StaleWrite(f"{P.LOADMGR_CONFIG} kept changing; the update was not written")
