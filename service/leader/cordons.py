"""Maintenance state in ZooKeeper: the cordoned brokers and the drain under way.

Two nodes, both written by the leader only, each write fenced on its epoch and compare-and-set on
the node's version, and both followed by every instance through a data watch (so a follower's
``status``, ``brokers`` and ``/metrics`` show them too, and a new leader starts from them):

* ``/loadmgr/cordons`` — ``{"brokers": {brokerId: {"since": ms, "by": principal, "reason": text}}}``;
* ``/loadmgr/drain`` — the one drain (:class:`service.leader.drain.DrainState`), kept once done so
  its outcome can be read; a new drain replaces it.

What is read is hostile: a node that is not the expected JSON counts as empty for cordons (logged
once per version) and as no drain; a broker id that is not a short printable string is skipped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from service.errors import StaleWrite
from service.leader.drain import DrainState
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Versioned, ZkStore

log = logging.getLogger(__name__)

MAX_NODE_BYTES = 1 << 20
MAX_BROKER_ID = 256
WRITE_ATTEMPTS = 5


@dataclass(frozen=True)
class Cordon:
    broker: str
    since_ms: int
    by: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since_ms, "by": self.by, "reason": self.reason}


def valid_broker_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_BROKER_ID
        and value.isprintable()
        and not any(c.isspace() for c in value)
    )


def parse_cordons(raw: bytes | None) -> dict[str, Cordon]:
    """The cordons a node holds; junk (not JSON, wrong shape, bad ids) is left out."""
    if not raw:
        return {}
    try:
        if len(raw) > MAX_NODE_BYTES:
            raise ValueError(f"{len(raw)} bytes")
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        log.warning("%s is not JSON (%s): no broker counts as cordoned", P.LOADMGR_CORDONS, e)
        return {}
    brokers = doc.get("brokers") if isinstance(doc, dict) else None
    if not isinstance(brokers, dict):
        log.warning("%s has no brokers object: no broker counts as cordoned", P.LOADMGR_CORDONS)
        return {}
    out: dict[str, Cordon] = {}
    for broker, entry in brokers.items():
        if not valid_broker_id(broker):
            log.warning("%s: broker id %r skipped", P.LOADMGR_CORDONS, str(broker)[:80])
            continue
        fields = entry if isinstance(entry, dict) else {}
        since = fields.get("since")
        by = fields.get("by")
        reason = fields.get("reason")
        out[broker] = Cordon(
            broker,
            since if isinstance(since, int) and not isinstance(since, bool) else 0,
            str(by)[:200] if isinstance(by, str) else None,
            str(reason)[:200] if isinstance(reason, str) else "",
        )
    return out


def cordons_doc(cordons: dict[str, Cordon]) -> dict[str, Any]:
    return {"brokers": {b: c.to_json() for b, c in sorted(cordons.items())}}


def parse_drain(raw: bytes | None) -> DrainState | None:
    if not raw:
        return None
    try:
        if len(raw) > MAX_NODE_BYTES:
            raise ValueError(f"{len(raw)} bytes")
        return DrainState.from_json(json.loads(raw))
    except (ValueError, UnicodeDecodeError, TypeError) as e:
        log.warning("%s is not a drain (%s): no drain is under way", P.LOADMGR_DRAIN, e)
        return None


class MaintenanceBook:
    """Follows both nodes; ``on_change()`` runs after either changed (from the watch's thread)."""

    def __init__(self, store: ZkStore, on_change: Callable[[], None] | None = None) -> None:
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()
        self.cordons: dict[str, Cordon] = {}
        self.drain: DrainState | None = None
        self._started = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        client = self._store.client
        client.DataWatch(P.LOADMGR_CORDONS, lambda data, stat, *_: self._changed(P.LOADMGR_CORDONS, data))
        client.DataWatch(P.LOADMGR_DRAIN, lambda data, stat, *_: self._changed(P.LOADMGR_DRAIN, data))

    def _changed(self, path: str, data: bytes | None) -> None:
        try:
            with self._lock:
                if path == P.LOADMGR_CORDONS:
                    self.cordons = parse_cordons(data)
                else:
                    self.drain = parse_drain(data)
            if self._on_change is not None:
                self._on_change()
        except Exception:  # a watch callback must never die: the next change applies again
            log.exception("applying %s failed", path)

    def cordoned(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self.cordons)

    # ---- the leader's writes (fenced) ------------------------------------------------------------
    def read_cordons(self) -> tuple[dict[str, Cordon], int | None]:
        """The node as it is now (not the watch's copy) and its version (None: no node)."""
        got = self._store.get_json(P.LOADMGR_CORDONS)
        if got is None:
            return {}, None
        return parse_cordons(json.dumps(got.value).encode()), got.version

    def update_cordons(
        self,
        change: Callable[[dict[str, Cordon]], dict[str, Cordon]],
        fence: Versioned[str] | None,
    ) -> dict[str, Cordon]:
        """Apply ``change`` to the current cordons and write them (compare-and-set, fenced); ``change``
        may raise to refuse (nothing written). Returns what was written."""
        if fence is None:
            raise StaleWrite("not the leader: cordons are written by the leader only")
        for _ in range(WRITE_ATTEMPTS):
            current, version = self.read_cordons()
            new = change(dict(current))
            tx = self._store.fenced(fence)
            if version is None:
                tx.create_json(P.LOADMGR_CORDONS, cordons_doc(new))
            else:
                tx.set_json(P.LOADMGR_CORDONS, cordons_doc(new), version)
            try:
                tx.commit()
            except StaleWrite:
                continue  # the node changed under us, or the epoch moved on (then every retry fails too)
            with self._lock:
                self.cordons = new
            return new
        raise StaleWrite(f"{P.LOADMGR_CORDONS} kept changing (or this instance no longer leads); not written")

    def read_drain(self) -> tuple[DrainState | None, int | None]:
        got = self._store.get_json(P.LOADMGR_DRAIN)
        if got is None:
            return None, None
        return parse_drain(json.dumps(got.value).encode()), got.version

    def write_drain(self, state: DrainState, fence: Versioned[str] | None, version: int | None) -> int:
        """Write the drain node at ``version`` (None: create it), fenced; returns the new version."""
        if fence is None:
            raise StaleWrite("not the leader: the drain is written by the leader only")
        tx = self._store.fenced(fence)
        if version is None:
            tx.create_json(P.LOADMGR_DRAIN, state.to_json())
        else:
            tx.set_json(P.LOADMGR_DRAIN, state.to_json(), version)
        tx.commit()
        with self._lock:
            self.drain = state
        return 0 if version is None else version + 1  # a create is version 0, each set adds one
