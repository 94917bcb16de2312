"""Dynamic configuration that survives: persisted in ZooKeeper, applied by every instance from a watch.

Two sources:

* ``/admin/configuration`` — Pulsar's own dynamic overrides (``pulsar-admin brokers
  update-dynamic-config``). Its load-balancer keys apply to loadmgr too, except, in Pulsar mode, the
  switches that describe the brokers' own load manager (:data:`BROKER_OWN_KEYS`): there they must
  stay off on the brokers (``service.pulsar.broker_settings``) while loadmgr's own stay on. Its
  values are strings, as Pulsar keeps them; loadmgr never writes it.
* ``/loadmgr/config`` — what ``PUT /config`` (and ``loadmgr config set``) changed, written by the
  leader only, fenced on its epoch, ``{"values": {key: value}, "updatedBy", "time"}``, each value
  the JSON of the validated key (a list a JSON list, a number a number).

The effective configuration is the start-up one (broker.conf, environment) updated by Pulsar's
dynamic keys, then by loadmgr's. A value that is not acceptable (hostile or stale) is skipped and
logged once per node version; the other keys still apply.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError
from balancer.explain import explain
from balancer.placement.base import PlacementStrategy
from balancer.placement.registry import create_placement
from balancer.shedding.balanced import BalancedShedder
from balancer.shedding.base import LoadSheddingStrategy
from balancer.shedding.registry import create_shedder, short_name
from service.errors import StaleWrite
from service.leader.clock import now_ms
from service.leader.solver_output import install as quiet_solver_output
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Versioned, ZkStore
from service.zookeeper.session.validate import BadNode, decode

if TYPE_CHECKING:
    from service.leader.cluster_view import DecisionLog
    from service.leader.election import LeaderElection

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


def decode_values(raw: bytes | None, path: str) -> dict[str, Any]:
    """A node's ``{key: value}`` (``/loadmgr/config``'s under ``values``); junk gives {} and a log line.

    The bytes pass the one JSON boundary (size, depth, finite numbers): a hostile node, nested a few
    thousand levels deep say, is skipped like any other junk."""
    if not raw:
        return {}
    try:
        doc = decode(raw)
    except BadNode as e:
        log.warning("%s is not a JSON object (%s): ignored", path, e.reason)
        return {}
    return values_of(doc, path)


def values_of(doc: Any, path: str) -> dict[str, Any]:
    """The ``{key: value}`` of a node's parsed JSON. ``/loadmgr/config``'s values keep their JSON types
    (a list stays a list); Pulsar keeps strings in ``/admin/configuration``, where a JSON number or
    boolean is taken in its JSON spelling."""
    if doc is None:
        return {}
    if isinstance(doc, dict) and path == P.LOADMGR_CONFIG:
        doc = doc.get("values", {})
    if not isinstance(doc, dict):
        log.warning("%s is not a JSON object: ignored", path)
        return {}
    if path == P.LOADMGR_CONFIG:
        return {str(k): v for k, v in doc.items()}
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
                tried = base.with_updates({**updates, key: value}, dynamic_only=True)
                if key in (PLANNER_KEY, "loadBalancerLoadSheddingStrategy"):
                    runnable(tried)
            except ConfigError as e:
                if on_bad is not None:
                    on_bad(source, key, str(e))
                continue
            updates[key] = value
    return base.with_updates(updates, dynamic_only=True) if updates else base


class DynamicConfig:
    """Follows both nodes with data watches and calls ``apply(pulsar, ours)`` on every change."""

    def __init__(self, store: ZkStore, apply: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
        self._store = store
        self._apply = apply
        self._lock = threading.Lock()
        self.pulsar: dict[str, Any] = {}
        self.ours: dict[str, Any] = {}
        self._started = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        client = self._store.client
        client.DataWatch(
            P.PULSAR_DYNAMIC_CONFIG, lambda data, stat, *_: self._changed(P.PULSAR_DYNAMIC_CONFIG, data, stat)
        )
        client.DataWatch(P.LOADMGR_CONFIG, lambda data, stat, *_: self._changed(P.LOADMGR_CONFIG, data, stat))

    def _changed(self, path: str, data: bytes | None, stat: Any) -> None:
        # Through the store's boundary: a bad node is logged once per version, however many readers
        # (this watch, the Pulsar settings check) meet it.
        got = None if stat is None else self._store.parse_node(path, data or b"", stat, lambda doc: doc)
        values = values_of(None if got is None else got.value, path)
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
        """Merge ``updates`` (JSON values, kept as they are) into ``/loadmgr/config``: compare-and-set,
        fenced on the leader epoch. A node that cannot be read (a hand edit, junk) is replaced: its
        keys are unknowable, and the admin's write is the only way to repair it through the API."""
        if fence is None:
            raise StaleWrite("not the leader: dynamic configuration is written by the leader only")
        for _ in range(5):
            current, version = self._current()
            current.update(updates)
            doc = {"values": current, "updatedBy": principal, "time": now_ms}
            tx = self._store.fenced(fence)
            if version is None:
                tx.create_json(P.LOADMGR_CONFIG, doc)
            else:
                tx.set_json(P.LOADMGR_CONFIG, doc, version)
            try:
                tx.commit()
                return
            except StaleWrite:
                continue  # the node changed under us, or the epoch moved on (then every retry fails too)
        raise StaleWrite(f"{P.LOADMGR_CONFIG} kept changing; the update was not written")

    def _current(self) -> tuple[dict[str, Any], int | None]:
        """The persisted values and the node's version (None: no node). An unreadable node gives no
        values and its version, so the write replaces it."""
        got = self._store.get_json(P.LOADMGR_CONFIG)
        if got is not None:
            values = got.value.get("values") if isinstance(got.value, dict) else None
            return (dict(values) if isinstance(values, dict) else {}), got.version
        bad = self._store.malformed_version(P.LOADMGR_CONFIG, lambda doc: doc)
        if bad is not None:
            log.warning("%s is unreadable: the update replaces it (its old keys are lost)", P.LOADMGR_CONFIG)
        return {}, bad


PLANNER_KEY = "loadBalancerBalancedShedderPlanner"


def runnable(config: LoadBalancerConfig) -> LoadBalancerConfig:
    """``config`` if this installation can run it: BalancedShedder's least-move planner needs scipy (a core
    dependency, ~216 MB with numpy, but an install can lack it). Without it the planner would fall
    back to the fill on every call, silently; a clear refusal naming the key is what the operator
    needs instead."""
    if (
        getattr(config, PLANNER_KEY) == "leastMove"
        and short_name(config.loadBalancerLoadSheddingStrategy) == "BalancedShedder"
        and importlib.util.find_spec("scipy") is None
    ):
        raise ConfigError(
            PLANNER_KEY,
            "leastMove",
            "the least-move planner needs scipy, which this installation lacks:"
            " pip install scipy, or set it to fill",
        )
    return config


def make_strategies(config: LoadBalancerConfig) -> tuple[LoadSheddingStrategy, PlacementStrategy]:
    runnable(config)
    shedder = create_shedder(config.loadBalancerLoadSheddingStrategy)
    if isinstance(shedder, BalancedShedder):
        shedder.clock = time.perf_counter  # the planner's time, for its explanation and the metric
        quiet_solver_output()  # HiGHS's stray line off the leader's stdout (issue 49)
    return shedder, create_placement(config.loadBalancerLoadPlacementStrategy, shedder=shedder)


class ConfigUpdates:
    """``update_config`` and the watch's ``_apply_dynamic``: a mixin of
    :class:`service.leader.service.LoadManagerService`, whose state it reads and replaces."""

    if TYPE_CHECKING:
        _lock: threading.RLock
        _config: LoadBalancerConfig
        _base_config: LoadBalancerConfig
        _shedder: LoadSheddingStrategy
        _placement: PlacementStrategy
        _dynamic: DynamicConfig
        _decisions: DecisionLog
        _started: bool
        election: LeaderElection
        pulsar_mode: bool

        def _require_leader(self) -> None: ...

        def _schedule_jobs(self) -> None: ...

        def wake_settings_check(self) -> None: ...

    def update_config(self, updates: Mapping[str, Any], principal: str | None = None) -> LoadBalancerConfig:
        """Change dynamic keys cluster-wide: validated (ConfigError for unknown, static or out-of-range
        ones, nothing written then), persisted by the leader in ``/loadmgr/config`` and applied by every
        instance from its watch, so the change survives restarts and failover. A follower raises
        NotLeader (the REST layer forwards the call to the leader)."""
        checked = self._config.with_updates(dict(updates), dynamic_only=True)  # refused anywhere
        make_strategies(checked)
        # Persisted as the validated values' JSON (a list stays a list, "20" becomes the number), so every
        # instance reads back exactly what was applied here.
        dumped = checked.model_dump(mode="json")
        updates = {key: dumped[key] for key in updates}
        self._require_leader()
        with self._lock:
            new = effective(
                self._base_config, self._dynamic.pulsar, {**self._dynamic.ours, **updates}, self.pulsar_mode
            )
            make_strategies(new)  # an unknown strategy raises before anything is written
            self._dynamic.persist(updates, self.election.fence(), principal, now_ms())
            self._set_config(new)
            why = explain(
                "config_update",
                f"dynamic configuration changed: {', '.join(sorted(updates))}",
                principal=principal,
            )
            self._decisions.add(now_ms(), "manual", why, principal=principal)
        return new

    def _apply_dynamic(self, pulsar: dict[str, Any], ours: dict[str, Any]) -> None:
        """A watch saw ``/admin/configuration`` or ``/loadmgr/config`` change: recompute and apply."""
        self.wake_settings_check()

        def bad(source: str, key: str, reason: str) -> None:
            log.warning("dynamic configuration %s: %s ignored: %s", source, key, reason)

        with self._lock:
            new = effective(self._base_config, pulsar, ours, self.pulsar_mode, bad)
            if new != self._config:
                self._set_config(new)
                log.info("dynamic configuration applied (%d key(s) set)", len(ours) + len(pulsar))

    def _set_config(self, new: LoadBalancerConfig) -> None:
        """Install ``new`` (under the lock): strategies and jobs follow; all or nothing."""
        old = self._config
        strategies = (self._shedder, self._placement)
        if (new.loadBalancerLoadSheddingStrategy, new.loadBalancerLoadPlacementStrategy) != (
            old.loadBalancerLoadSheddingStrategy,
            old.loadBalancerLoadPlacementStrategy,
        ):
            strategies = make_strategies(new)
        self._config = new
        try:
            if self._started:
                self._schedule_jobs()
        except Exception:
            self._config = old
            if self._started:
                self._schedule_jobs()
            raise
        self._shedder, self._placement = strategies
