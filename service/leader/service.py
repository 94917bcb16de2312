"""``LoadManagerService``: the live load manager one ``loadmgr serve`` process runs.

It campaigns for leadership (:mod:`service.leader.election`); while it leads, the jobs of
:mod:`service.leader.schedule` run the leader's work (:mod:`service.leader.jobs`) at Pulsar's intervals:
shedding, reconcile, bundle-data and split.

Jobs are paused while this instance does not lead and each re-checks leadership before writing.
Thread-safe: every method may be called from the REST layer's threads. Readiness
(:mod:`service.leader.readiness`), the REST reads (:mod:`service.leader.reads`) and the operator's
unload, split and lookup (:mod:`service.leader.operations`) are mixins in their own modules.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.placement.base import PlacementStrategy
from balancer.shedding.base import LoadSheddingStrategy
from service.errors import ModeMismatch, ServiceError, StoreUnavailable
from service.leader import heap
from service.leader.clock import now_ms
from service.leader.cluster_view import ClusterView, DecisionLog
from service.leader.dynamic_config import ConfigUpdates, DynamicConfig, make_strategies
from service.leader.election import LeaderElection
from service.leader.executors import Executor, ZkExecutor
from service.leader.identity import LeaderIdentity
from service.leader.jobs import LeaderJobs
from service.leader.load_view import LoadView
from service.leader.maintenance import Maintenance
from service.leader.metrics_sink import MetricsSink, NoMetrics
from service.leader.operations import ManualOperations
from service.leader.pulsar_mode import PulsarMode
from service.leader.readiness import Readiness
from service.leader.reads import ClusterReads
from service.leader.schedule import LeaderSchedule
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.cluster_kind import mode_conflict
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.session.security import ZkSecurity
from service.zookeeper.session.validate import path_kind

log = logging.getLogger(__name__)


class LoadManagerService(Readiness, ClusterReads, ManualOperations, PulsarMode, ConfigUpdates, Maintenance):
    """One load-manager instance. ``start()`` connects and campaigns; ``stop()`` steps down and closes.

    ``executor`` defaults to the ZooKeeper-native one, or in Pulsar mode (``settings.mode``) to
    Pulsar's admin API (:mod:`service.leader.pulsar_mode`). ``store`` may be given (tests);
    otherwise one is built from ``settings``.
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
        self._base_config = config  # broker.conf and environment; dynamic keys go on top of it
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
            # Pulsar mode writes loadmgr's own nodes only (docs/pulsar-mode.md lists them).
            base_paths=(P.LOADMGR,) if settings.pulsar_mode else P.BASE_PATHS,
        )
        self.store._on_malformed = self._on_malformed
        self._lock = threading.RLock()
        self._shedder, self._placement = make_strategies(config)
        self._decisions = DecisionLog(settings.decision_log_size)
        self._view_cache: ClusterView | None = None
        pulsar_executor = self._init_pulsar(settings)
        self.election = LeaderElection(
            self.store,
            self.instance_id,
            self.service_url,
            self._on_elected,
            self._on_revoked,
            self._on_resync,
            identity=LeaderIdentity.of(settings.admin_token(), settings.leader_urls),
            path=self.election_path,
            on_stepped_down=self._stepped_down,
        )
        # Any write fenced on our epoch that ZooKeeper refuses on the epoch check (a job's, an
        # operator's, the dynamic configuration's) ends this term at once, whoever bumped the epoch.
        self.store.on_fenced_out = self._fenced_out
        assigner = ZkExecutor(self.store, self.election.fence)
        self.executor: Executor = executor or pulsar_executor or assigner
        self._dynamic = DynamicConfig(self.store, self._apply_dynamic)
        # Pulsar's configuration store (isolation policies, failure domains, namespace Policies)
        # when it is another ZooKeeper than the local metadata store: read-only here.
        self.config_store = (
            ZkStore(
                settings.configuration_store,
                "",
                settings.zk_session_timeout_s,
                security=ZkSecurity.from_settings(settings),
                read_only=True,
            )
            if settings.configuration_store
            else None
        )
        self._loadview = LoadView(
            on_adopt=self._record_adoption, cluster=settings.cluster, config_store=self.config_store
        )
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
        self.jobs.unlocked = self._unlocked
        self._init_maintenance()
        self._schedule = LeaderSchedule(self.metrics.job_run)
        self._started = False
        # Readiness: failures in a row per job, all failures per job, and when a shedding cycle last
        # completed (monotonic seconds) or leadership began.
        self._consecutive_failures: dict[str, int] = {}
        self.job_failures: dict[str, int] = {}
        self._last_cycle_ok: float | None = None
        self._leading_since: float | None = None
        # A term's jobs start only after its first full sync and first reconcile (_start_term).
        self._term = 0
        self._synced = False
        self._published: tuple[dict[str, Any], dict[str, int]] = ({}, {})

    # ---- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect to ZooKeeper (raises StoreUnavailable), check that this mode fits the brokers there
        (raises ModeMismatch), schedule the paused jobs, campaign."""
        self.store.start()
        self._check_mode()
        if self.config_store is not None:
            self.config_store.start()
        self.store.add_state_listener(self._on_state)
        self._dynamic.start()  # applies the persisted dynamic keys before any job is scheduled
        self._start_maintenance()  # cordons apply before any placement
        self._schedule_jobs()
        self._schedule.start()
        self._start_pulsar()
        self.election.start()
        self._started = True

    def _check_mode(self) -> None:
        """Refuse a mode that does not fit this ZooKeeper's brokers before anything is written."""
        explicit = "mode" in self.settings.model_fields_set
        refusal, warning = mode_conflict(self.store, self.settings.mode, explicit)
        if refusal is not None:
            self.store.stop()
            raise ModeMismatch(refusal)
        if warning is not None:
            log.warning("%s", warning)
            print(warning, file=sys.stderr, flush=True)

    def stop(self) -> None:
        """Step down (deleting the leader node), stop the jobs, close the connection."""
        self._started = False
        self.election.stop()
        self._stop_maintenance()
        self._schedule.shutdown()
        self._stop_pulsar()
        if self.config_store is not None:
            self.config_store.stop()
        if self.history is not None:
            with contextlib.suppress(Exception):
                self.history.close()
        self.store.stop()

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

    # ---- scheduling --------------------------------------------------------------------------------
    def _schedule_jobs(self) -> None:
        funcs: dict[str, Callable[[], Any]] = {
            "shedding": lambda: self._leader_job("shedding", self.jobs.shedding_cycle),
            "reconcile": lambda: self._leader_job("reconcile", self.jobs.reconcile),
            "bundle-data": lambda: self._leader_job("bundle-data", self.jobs.write_bundle_data),
            "split": lambda: self._leader_job("split", self._auto_split),
            "moves": lambda: self._leader_job("moves", self._move_tick),
        }
        self._schedule.apply(self._config, funcs, self.is_leader() and self._synced)

    def _move_tick(self, config: LoadBalancerConfig, s: LoadSheddingStrategy, p: PlacementStrategy) -> int:
        # Pulsar mode while the brokers' own load manager acts: follow the moves, release none.
        return self.jobs.move_tick(config, release=self.pulsar_acting())

    def _auto_split(self, config: LoadBalancerConfig, s: LoadSheddingStrategy, p: PlacementStrategy) -> int:
        return self.jobs.auto_split(config, s, p) if config.loadBalancerAutoBundleSplitEnabled else 0

    def _leader_job(self, name: str, fn: Callable[..., Any]) -> bool:
        """One run of a leader job; True when it ran and succeeded. Its whole wall time (prefetch,
        lock wait, decide, write, publish) goes to ``loadmgr_leader_job_run_duration_seconds``."""
        if not self.is_leader():
            return False
        if (
            self.pulsar_mode
            and name in ("shedding", "split", "bundle-data")
            and not self._pulsar_may_run(name)
        ):
            return False
        started = time.monotonic()
        ok = False
        try:
            # The job's ZooKeeper reads happen here, outside the service lock (the watch cache has
            # its own); under the lock the job's refresh then finds at most a few new events to read.
            try:
                if name != "moves":  # the move tick reads only its moves' own nodes
                    self._loadview.prefetch(self.store)
            except ServiceError as e:
                log.info("%s job: prefetch deferred: %s", name, e)
            with self._lock:
                if not self.is_leader():
                    return False
                done: Any = None
                try:
                    done = fn(self._config, self._shedder, self._placement)
                except ServiceError as e:
                    log.warning("%s job: %s", name, e)
                    self.metrics.zk_error(type(e).__name__)
                    self._job_failed(name)
                except Exception:
                    log.exception("%s job failed", name)
                    self._job_failed(name)
                else:
                    ok = True
                    self._consecutive_failures[name] = 0
                    if name == "shedding":
                        self._last_cycle_ok = time.monotonic()
                if name != "moves" or done:
                    self._publish_leader_state()
            if name == "shedding":
                with contextlib.suppress(ServiceError):
                    self._publish_view()
            return ok
        finally:
            self.metrics.job_wall_time(name, time.monotonic() - started)

    @contextlib.contextmanager
    def _unlocked(self) -> Iterator[None]:
        """Let the service lock go while a job waits on its ZooKeeper writes (plan / write / apply):
        manual operations, REST and the other jobs go on meanwhile. Outside the lock: a no-op."""
        try:
            self._lock.release()
        except RuntimeError:  # not held by this thread (a job called directly)
            yield
            return
        try:
            yield
        finally:
            self._lock.acquire()

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
        self.jobs.drop_moves("a new leader term starts with an empty move queue")
        with self._lock:
            self._loadview.reset()  # a new term starts from a full re-read
            self._publish_leader_state()
            self._consecutive_failures = {}
            self._last_cycle_ok = None
            self._leading_since = time.monotonic()
            self._synced = False
            self._term += 1
            term = self._term
        threading.Thread(target=self._start_term, args=(term,), name="leader-first-sync", daemon=True).start()
        self.metrics.leader_changed(True)

    def _start_term(self, term: int) -> None:
        """The term's first full sync and first reconcile, then the schedule.

        The jobs stay paused meanwhile, so a first sync longer than the reconcile interval (tens of
        seconds at 100k bundles) skips no run, this first reconcile is never skipped, and no job
        decides on a partial view; ``/readyz`` says not ready until it is done."""
        delay = 0.5
        while self._started and self.is_leader() and self._term == term:
            self.metrics.job_run("reconcile", "started")
            ok = self._leader_job("reconcile", self.jobs.reconcile)
            self.metrics.job_run("reconcile", "executed" if ok else "error")
            if ok:
                break
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
        with self._lock:
            if self._term != term or not self.is_leader():
                return
            self._synced = True
            heap.settle_after_sync()  # under the lock: no job runs meanwhile
        log.info("first full sync and reconcile of this term done; jobs scheduled")
        self._schedule.resume(self._config)

    def _on_revoked(self) -> None:
        self._schedule.pause()
        heap.term_ended()
        # The queue is this term's: a later leader re-plans on what it reads (move_queue.py).
        self.jobs.drop_moves("leadership lost")
        self.metrics.leader_changed(False)

    def _fenced_out(self, why: str) -> None:
        self.metrics.zk_error("StaleWrite")
        self.election.fenced_out(why)

    def _stepped_down(self, why: str) -> None:
        self.metrics.stepped_down("fenced_out")
        self._decisions.add(
            now_ms(),
            "leadership",
            explain("stepped-down", f"stopped leading: {why}; campaigning again", subject=self.instance_id),
        )

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

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Poll ``predicate`` until true or the deadline (a helper for the demo and tests)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        return predicate()
