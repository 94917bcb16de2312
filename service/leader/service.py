"""``LoadManagerService``: the live load manager one ``loadmgr serve`` process runs.

It campaigns for leadership (:mod:`service.leader.election`); while it leads, the jobs of
:mod:`service.leader.schedule` run the leader's work (:mod:`service.leader.jobs`) at Pulsar's intervals:
shedding, reconcile, bundle-data and split.

Jobs are paused while this instance does not lead and each re-checks leadership before writing.
Thread-safe: every method may be called from the REST layer's threads.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from balancer.bundles import NamespaceBundles, split_bundle_name, topic_namespace
from balancer.config import LoadBalancerConfig
from balancer.cycle import CyclePlan, plan_shedding_cycle
from balancer.errors import UnknownBroker, UnknownBundle
from balancer.explain import explain
from balancer.placement.base import PlacementStrategy
from balancer.placement.pipeline import select_broker
from balancer.placement.registry import create_placement
from balancer.shedding.base import LoadSheddingStrategy
from balancer.shedding.registry import create_shedder
from service.errors import AdminRequired, NotLeader, ServiceError, StoreUnavailable
from service.leader.clock import now_ms
from service.leader.cluster_view import ClusterView, DecisionLog, DecisionRecord
from service.leader.election import LeaderElection
from service.leader.executors import Executor, ZkExecutor
from service.leader.identity import LeaderIdentity
from service.leader.jobs import LeaderJobs
from service.leader.load_view import LoadView
from service.leader.metrics_sink import MetricsSink, NoMetrics
from service.leader.schedule import LeaderSchedule, job_intervals
from service.settings import Settings
from service.zookeeper.namespaces import NamespaceAdmin
from service.zookeeper.security import ZkSecurity
from service.zookeeper.store import ZkStore
from service.zookeeper.validate import path_kind

log = logging.getLogger(__name__)
JOB_FAILURES_NOT_READY = 3  # one failure can be a ZooKeeper blip; three in a row is a stuck job
STALE_VIEW_INTERVALS = 3


def make_strategies(config: LoadBalancerConfig) -> tuple[LoadSheddingStrategy, PlacementStrategy]:
    shedder = create_shedder(config.loadBalancerLoadSheddingStrategy)
    return shedder, create_placement(config.loadBalancerLoadPlacementStrategy, shedder=shedder)


class LoadManagerService:
    """One load-manager instance. ``start()`` connects and campaigns; ``stop()`` steps down and closes.

    ``executor`` defaults to the ZooKeeper-native one; pass a ``PulsarAdminExecutor`` to drive a
    real Pulsar cluster. ``store`` may be given (tests); otherwise one is built from ``settings``.
    """

    def __init__(
        self,
        settings: Settings,
        config: LoadBalancerConfig,
        metrics: MetricsSink | None = None,
        history: Any = None,
        *,
        store: ZkStore | None = None,
        executor: Executor | None = None,
        seed: int | None = None,
    ) -> None:
        self.settings = settings
        self._config = config
        self.metrics: MetricsSink = metrics if metrics is not None else NoMetrics()
        self.history = history
        self.instance_id = settings.instance_id or f"{settings.http_host}:{settings.http_port}"
        self.service_url = settings.service_url()
        self.store = store or ZkStore(
            settings.zk_hosts,
            settings.zk_chroot,
            settings.zk_session_timeout_s,
            security=ZkSecurity.from_settings(settings),
        )
        self.store._on_malformed = self._on_malformed
        self._lock = threading.RLock()
        self._shedder, self._placement = make_strategies(config)
        self._decisions = DecisionLog(settings.decision_log_size)
        self._view_cache: ClusterView | None = None
        self.election = LeaderElection(
            self.store,
            self.instance_id,
            self.service_url,
            self._on_elected,
            self._on_revoked,
            self._on_resync,
            identity=LeaderIdentity.of(settings.admin_token(), settings.leader_urls),
        )
        assigner = ZkExecutor(self.store, self.election.fence)
        self.executor: Executor = executor or assigner
        self._loadview = LoadView(on_adopt=self._record_adoption, cluster=settings.cluster)
        self.jobs = LeaderJobs(
            self.store,
            self.executor,
            assigner,
            self._loadview,
            self._decisions,
            self.metrics,
            history,
            self.is_leader,
            self._epoch,
            random.Random(seed),
        )
        self._schedule = LeaderSchedule()
        self._started = False
        # Readiness: failures in a row per job, all failures per job, and when a shedding cycle last
        # completed (monotonic seconds) or leadership began.
        self._consecutive_failures: dict[str, int] = {}
        self.job_failures: dict[str, int] = {}
        self._last_cycle_ok: float | None = None
        self._leading_since: float | None = None
        self._published: tuple[dict[str, Any], dict[str, int]] = ({}, {})

    # ---- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect to ZooKeeper (raises StoreUnavailable), schedule the paused jobs, campaign."""
        self.store.start()
        self.store.add_state_listener(self._on_state)
        self._schedule_jobs()
        self._schedule.start()
        self.election.start()
        self._started = True

    def stop(self) -> None:
        """Step down (deleting the leader node), stop the jobs, close the connection."""
        self._started = False
        self.election.stop()
        self._schedule.shutdown()
        if self.history is not None:
            with contextlib.suppress(Exception):
                self.history.close()
        self.store.stop()

    def ready(self) -> bool:
        """Started, connected to ZooKeeper and, while leading, actually doing the leader's work."""
        return not self.not_ready_reasons()

    def not_ready_reasons(self) -> list[str]:
        """Why this instance is not ready (empty: ready).

        Connected is not enough: a leader whose jobs fail every run, or whose view has not been
        refreshed for several intervals, balances nothing while looking healthy. So a leader is not
        ready after ``JOB_FAILURES_NOT_READY`` consecutive failures of one job or when its last
        successful shedding cycle is older than ``STALE_VIEW_INTERVALS`` shedding intervals."""
        if not self._started:
            return ["not started"]
        if not self.store.connected:
            return ["not connected to ZooKeeper"]
        if not self.is_leader():
            return []
        reasons = [
            f"{job} job failed {n} times in a row"
            for job, n in sorted(self._consecutive_failures.items())
            if n >= JOB_FAILURES_NOT_READY
        ]
        interval_s = job_intervals(self._config)["shedding"]
        since = self._leading_since if self._last_cycle_ok is None else self._last_cycle_ok
        if since is not None and time.monotonic() - since > STALE_VIEW_INTERVALS * interval_s + 5.0:
            reasons.append(f"no successful shedding cycle for {time.monotonic() - since:.0f} s")
        return reasons

    def readiness(self) -> dict[str, Any]:
        """What ``/readyz`` reports: the ZooKeeper connection state, whether this instance leads and
        decides, and, when it does not decide although it was leading, why (operators see a quorum
        loss here as the reason no moves happen)."""
        state = "CONNECTED" if self.store.connected else self.election.connection_state
        details: dict[str, Any] = {"zookeeper": state, "leader": self.is_leader()}
        if not self._started:
            details["reason"] = "not started"
        elif state == "SUSPENDED" or (state == "CONNECTED" and not self.store.connected):
            details["reason"] = (
                "ZooKeeper connection suspended (the member is down or the ensemble has no quorum); "
                f"no decisions until it is back, the session survives up to {self.store.session_timeout_s:g}s"
            )
        elif state == "LOST":
            details["reason"] = "ZooKeeper session lost; reconnecting with a new session, leadership given up"
        elif self.election.leading_unconfirmed():
            details["reason"] = "reconnected; re-checking the leader node before deciding again"
        return details

    def is_leader(self) -> bool:
        return self.election.is_leader()

    def leader_info(self) -> dict[str, Any] | None:
        """``{"brokerId", "serviceUrl"}`` of the current leader, or None (also when ZooKeeper is down)."""
        try:
            return self.election.leader_info()
        except StoreUnavailable:
            return None

    @property
    def config(self) -> LoadBalancerConfig:
        return self._config

    def update_config(self, updates: Mapping[str, Any], principal: str | None = None) -> LoadBalancerConfig:
        """Apply dynamic keys (ConfigError for unknown, static or out-of-range ones); strategies and
        jobs follow. All or nothing: if anything fails, the old configuration stays in force."""
        with self._lock:
            old = self._config
            new = old.with_updates(dict(updates), dynamic_only=True)
            strategies = (self._shedder, self._placement)
            if (new.loadBalancerLoadSheddingStrategy, new.loadBalancerLoadPlacementStrategy) != (
                old.loadBalancerLoadSheddingStrategy,
                old.loadBalancerLoadPlacementStrategy,
            ):
                strategies = make_strategies(new)  # an unknown strategy raises before anything changed
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
            why = explain(
                "config_update",
                f"dynamic configuration changed: {', '.join(sorted(updates))}",
                principal=principal,
            )
            self._decisions.add(now_ms(), "manual", why, principal=principal)
        return new

    # ---- scheduling --------------------------------------------------------------------------------
    def _schedule_jobs(self) -> None:
        funcs: dict[str, Callable[[], Any]] = {
            "shedding": lambda: self._leader_job("shedding", self.jobs.shedding_cycle),
            "reconcile": lambda: self._leader_job("reconcile", self.jobs.reconcile),
            "bundle-data": lambda: self._leader_job("bundle-data", self.jobs.write_bundle_data),
            "split": lambda: self._leader_job("split", self._auto_split),
        }
        self._schedule.apply(self._config, funcs, self.is_leader())

    def _auto_split(self, config: LoadBalancerConfig, s: LoadSheddingStrategy, p: PlacementStrategy) -> int:
        return self.jobs.auto_split(config, s, p) if config.loadBalancerAutoBundleSplitEnabled else 0

    def _leader_job(self, name: str, fn: Callable[..., Any]) -> None:
        if not self.is_leader():
            return
        # The job's ZooKeeper reads happen here, outside the service lock (the watch cache has its
        # own); under the lock the job's refresh then finds at most a few new events to read.
        try:
            self._loadview.prefetch(self.store)
        except ServiceError as e:
            log.info("%s job: prefetch deferred: %s", name, e)
        with self._lock:
            if not self.is_leader():
                return
            try:
                fn(self._config, self._shedder, self._placement)
            except ServiceError as e:
                log.warning("%s job: %s", name, e)
                self.metrics.zk_error(type(e).__name__)
                self._job_failed(name)
            except Exception:
                log.exception("%s job failed", name)
                self._job_failed(name)
            else:
                self._consecutive_failures[name] = 0
                if name == "shedding":
                    self._last_cycle_ok = time.monotonic()
            self._publish_leader_state()
        if name == "shedding":
            with contextlib.suppress(ServiceError):
                self._publish_view()

    def _publish_leader_state(self) -> None:
        """Copies of what the API shows from the leader's memory, taken under the lock (cheap), so
        readers never wait for a running job: under a flood of nodes one job can take seconds."""
        self._published = (
            dict(self._loadview.load.bundle_data),
            dict(self._loadview.load.recently_unloaded_bundles),
        )

    def _job_failed(self, name: str) -> None:
        self._consecutive_failures[name] = self._consecutive_failures.get(name, 0) + 1
        self.job_failures[name] = self.job_failures.get(name, 0) + 1
        self.metrics.job_failed(name)

    def _on_elected(self) -> None:
        with self._lock:
            self._loadview.reset()  # a new term starts from a full re-read
            self._publish_leader_state()
            self._consecutive_failures = {}
            self._last_cycle_ok = None
            self._leading_since = time.monotonic()
        self._schedule.resume(self._config)
        self.metrics.leader_changed(True)

    def _on_revoked(self) -> None:
        self._schedule.pause()
        self.metrics.leader_changed(False)

    def _on_resync(self) -> None:
        # After a reconnect the next job re-reads everything anyway; wake the reconciler early.
        self._schedule.wake("reconcile")

    def _on_state(self, state: str) -> None:
        if state != "CONNECTED":
            self.metrics.zk_error(state.lower())

    def _on_malformed(self, path: str, reason: str) -> None:
        self.metrics.malformed_node(path_kind(path))

    def _record_adoption(self, bundles: list[str]) -> None:
        # Another writer's numbers now drive placement: operators should see that next to the decisions.
        why = explain(
            "adopted-long-term-data",
            f"adopted longTermData of {len(bundles)} bundle(s) from another writer (the long-term job)",
            bundles=len(bundles),
            examples=bundles[:10],
        )
        why.numbers.setdefault("leaderEpoch", self._epoch())
        self._decisions.add(now_ms(), "adoption", why, bundle=bundles[0] if len(bundles) == 1 else None)

    def _epoch(self) -> int | None:
        f = self.election.fence()
        return None if f is None else f.version

    # ---- reads -------------------------------------------------------------------------------------
    def view(self) -> ClusterView:
        """A fresh read of the cluster (cached for one second)."""
        cached = self._view_cache
        if cached is not None and now_ms() - cached.time_ms < 1000:
            return cached
        return self._publish_view()

    def _publish_view(self) -> ClusterView:
        """The cluster as the watch cache has it (one cheap sync), never a full read of ZooKeeper."""
        leader = self.is_leader()
        snap = self._loadview.snapshot(self.store, now_ms(), bundle_data=not leader)
        # Jobs publish the leader's bundle data after each run: a job holding the service lock for
        # seconds at 100k bundles never makes a REST read wait.
        published, recent = self._published
        bundle_data = dict(published) if leader else {}
        v = ClusterView(
            time_ms=now_ms(),
            leader=self.leader_info(),
            brokers=snap.brokers,
            bundle_data=bundle_data or snap.stored_bundle_data,
            owners={b: o.broker for b, o in snap.owners.items()},
            assignments={b: a.value.broker for b, a in snap.assignments.items()},
            namespaces={ns: got.value.bundle_names for ns, got in snap.layouts.items()},
            recently_unloaded=recent,
            malformed=dict(self.store.malformed),
        )
        self._view_cache = v
        w = self._config.weights()
        scores = {b: {"weightedMaxUsage": d.max_resource_usage_with_weight(w)} for b, d in v.brokers.items()}
        self.metrics.view_updated(v, scores)
        return v

    def decisions(self, limit: int = 100, kind: str | None = None) -> list[DecisionRecord]:
        """Newest first; ``kind`` is shedding, placement, split or manual."""
        return self._decisions.latest(limit, kind)

    def dry_run(self) -> CyclePlan:
        """What a shedding cycle would do now, on copies: nothing is written, no state changes.

        The copies are refreshed from ZooKeeper first, as the cycle itself does: the leader's own
        view is only as fresh as its last cycle, which can be a whole shedding interval old."""
        with self._lock:
            view = self._loadview.shadow()
            shedder, placement = copy.deepcopy((self._shedder, self._placement))
            now = now_ms()
            view.refresh(self.store, now, (shedder, placement), sample=True)
            return plan_shedding_cycle(
                view.load, self._config, shedder, placement, view.ctx, now, random.Random(0)
            )

    # ---- mutations (leader only) -------------------------------------------------------------------
    def _require_leader(self) -> None:
        if not self.is_leader():
            info = self.leader_info()
            if info is not None and info.get("brokerId") == self.instance_id:
                raise NotLeader(None)  # our own stale node: no one else to send the caller to
            # Only a verified leader is offered to the REST layer, which forwards the caller's token.
            url, why = self.election.identity.verify(info)
            if url is None and info is not None:
                log.warning("not forwarding to the leader node's address: %s (node: %r)", why, info)
                raise NotLeader(None, f"this instance is not the leader and will not forward: {why}")
            raise NotLeader(url)

    def unload(
        self, bundle: str, destination: str | None = None, principal: str | None = None
    ) -> DecisionRecord:
        """Move ``bundle`` to ``destination`` (a live broker), or wherever placement puts it."""
        self._require_leader()
        with self._lock:
            self._require_leader()
            now = now_ms()
            snap = self._loadview.refresh(self.store, now, (self._shedder, self._placement), sample=False)
            if bundle not in snap.live_bundles():
                raise UnknownBundle(bundle)
            owner = snap.owners.get(bundle)
            source = owner.broker if owner else None
            if destination is not None and destination not in snap.brokers:
                raise UnknownBroker(destination)
            placed = None
            if destination is None and not self.executor.remote_split:
                placed = select_broker(
                    bundle,
                    self._loadview.load,
                    self._config,
                    self._placement,
                    self._loadview.ctx,
                    self.jobs.rng,
                )
                destination = placed.broker if placed.broker != source else None
            why = explain(
                "manual_unload",
                f"operator unload of {bundle}"
                + (f" to {destination}" if destination else " (placement decides)"),
                subject=bundle,
                source=source,
                destination=destination,
                placement=placed.explanation.reason if placed else None,
                principal=principal,
            )
            self.executor.unload(bundle, source, destination, why.reason)
            self._loadview.load.recently_unloaded_bundles[bundle] = now
            self._publish_leader_state()
            self.metrics.unloaded(why.reason)
            return self.jobs._record(
                "manual", why, bundle=bundle, source=source, destination=destination, principal=principal
            )

    def split(
        self,
        bundle: str,
        algorithm: str | None = None,
        positions: Sequence[int] | None = None,
        principal: str | None = None,
        unload: bool = False,
    ) -> DecisionRecord:
        """Split ``bundle`` with Pulsar's ``algorithm`` (default: the configured one); ``unload``
        also unloads the children, as ``pulsar-admin namespaces split-bundle -u`` (off by default)."""
        self._require_leader()
        with self._lock:
            self._require_leader()
            split_bundle_name(bundle)
            snap = self._loadview.refresh(
                self.store, now_ms(), (self._shedder, self._placement), sample=False
            )
            why = explain(
                "manual_split",
                f"operator split of {bundle}",
                subject=bundle,
                algorithm=algorithm,
                principal=principal,
            )
            record = self.jobs.split(
                bundle,
                algorithm,
                positions,
                self._config,
                snap,
                why,
                unload=unload,
                strategies=(self._shedder, self._placement),
            )
            self._publish_leader_state()
            return record

    def lookup(self, topic: str, assign: bool = True, principal: str | None = None) -> str:
        """The broker serving ``topic``'s bundle; an unowned bundle is assigned through placement first.

        ``assign=False`` (a caller without the admin role) answers owned bundles only: assigning
        writes, so it raises AdminRequired instead.
        """
        ns = topic_namespace(topic)
        got = self.store.read_layout(ns)
        if got is None:
            raise UnknownBundle(f"namespace {ns} has no bundle layout")
        bundle = got.value.find_bundle(topic)
        # This bundle's own nodes only: a lookup must not read every bundle of the cluster.
        owner = self.store.read_owner(bundle)
        if owner is not None:
            return owner.broker
        assigned = self.store.read_assignment(bundle)
        if assigned is not None and assigned.value.broker in self.store.broker_ids():
            return assigned.value.broker
        if not assign:
            raise AdminRequired(f"{bundle} has no owner; assigning it through a lookup needs the admin role")
        self._require_leader()
        with self._lock:
            snap = self._loadview.refresh(
                self.store, now_ms(), (self._shedder, self._placement), sample=False
            )
            self.jobs._reconcile(snap, self._config, self._placement)
        assigned = self.store.read_assignment(bundle)
        if assigned is None:
            raise UnknownBroker(f"no live broker can take {bundle}")
        # the placement itself is logged by reconcile; this says whose lookup caused it
        why = explain(
            "lookup_assigned",
            f"lookup of {topic} assigned {bundle} to {assigned.value.broker}",
            subject=bundle,
            principal=principal,
        )
        self._decisions.add(now_ms(), "manual", why, bundle=bundle, destination=assigned.value.broker)
        return assigned.value.broker

    def namespaces(self) -> NamespaceAdmin:
        """Namespace administration on this instance's session: plain compare-and-set writes of
        Pulsar's admin nodes, so any instance may serve them; the leader reads them on refresh."""
        return NamespaceAdmin(self.store)

    def create_namespace(self, namespace: str, num_bundles: int | None = None) -> NamespaceBundles:
        """Write a namespace's initial layout (``defaultNumberOfNamespaceBundles``); idempotent."""
        return self.store.create_namespace(
            namespace, num_bundles or self._config.defaultNumberOfNamespaceBundles
        )

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Poll ``predicate`` until true or the deadline (a helper for the demo and tests)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        return predicate()
