"""Prometheus metrics: the service's ``MetricsSink`` backed by prometheus_client.

``PrometheusMetrics`` owns the registry: the counters, histogram and gauges the leader updates as it
works, plus the scrape-time collectors of :mod:`service.api.metric_collectors` (per-broker gauges from
the latest view, Pulsar's leader counters, the service's ZooKeeper connection and history losses).
Where Pulsar exports the same quantity the Pulsar name, labels and unit (percent) are kept
(``pulsar_lb_*``), so dashboards built for Pulsar's load manager keep working; everything else is
``loadmgr_*`` with base units and ``_total`` on counters.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from balancer.models import LocalBrokerData
from service.api.metric_collectors import BrokerCollector, BrokerSnapshot, PulsarLbCounters, ServiceCollector
from service.leader.metrics_sink import (
    JOB_NAMES,
    MOVE_KINDS,
    MOVE_MODES,
    PATH_KINDS,
    RUN_OUTCOMES,
    WARM_UP_RESULTS,
)

# Label values created at zero up front: a counter series that does not exist yet makes rate() and
# increase() return nothing, so a dashboard panel shows "No data" where it should show 0.
# The kinds the service reports (service.leader.service: the error class, or the lost connection state).
STEP_DOWN_REASONS = ("fenced_out", "other")
ZK_ERROR_KINDS = ("StoreUnavailable", "StaleWrite", "suspended", "lost")
# The reason codes of Pulsar's split conditions (balancer.split.conditions).
SPLIT_REASONS = ("too_many_topics", "too_many_sessions", "msg_rate_too_high", "throughput_too_high")

CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Unload to served at the destination: tens of ms between in-process agents, seconds on real brokers
# (a client's lookup places the bundle), minutes when nobody looks it up.
MOVE_SERVED_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
JOB_RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def _normalise_scores(
    scores: Mapping[str, Mapping[str, float]], brokers: set[str]
) -> dict[str, dict[str, float]]:
    """Accept broker -> strategy -> score or strategy -> broker -> score; return the former."""
    if not scores:
        return {}
    if set(scores) <= brokers:
        return {b: dict(v) for b, v in scores.items()}
    out: dict[str, dict[str, float]] = {}
    for strategy, per_broker in scores.items():
        for broker, value in per_broker.items():
            out.setdefault(broker, {})[strategy] = value
    return out


def brokers_of(view: Any) -> dict[str, LocalBrokerData]:
    """The broker -> LocalBrokerData mapping of a ClusterView (or of a LoadData)."""
    for attr in ("brokers", "broker_data", "local_data"):
        value = getattr(view, attr, None)
        if isinstance(value, Mapping):
            out: dict[str, LocalBrokerData] = {}
            for broker, data in value.items():
                local = getattr(data, "local_data", data)
                if isinstance(local, LocalBrokerData):
                    out[str(broker)] = local
            return out
    return {}


class PrometheusMetrics:
    """Implements the runtime's ``MetricsSink`` with its own ``CollectorRegistry``."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        cluster: str = "standalone",
        version: str = "0.1.0",
        expose_bundles: bool = False,
    ) -> None:
        """``expose_bundles``: Pulsar's ``exposeBundlesMetricsInPrometheus`` (per-bundle series)."""
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.cluster = cluster
        r = self.registry
        self._brokers = BrokerCollector(cluster, expose_bundles)
        r.register(self._brokers)
        # Every series carries ``cluster``, so one Prometheus can watch several clusters and the
        # dashboard's cluster variable filters every panel.
        labels = ["cluster"]
        self._pulsar_counters = PulsarLbCounters(cluster)
        r.register(self._pulsar_counters)
        self.cycle_seconds = Histogram(
            "loadmgr_shedding_cycle_duration_seconds",
            "Wall time of one leader shedding cycle.",
            labels,
            buckets=CYCLE_BUCKETS,
            registry=r,
        ).labels(cluster)
        # BalancedShedder's least-move planner (HiGHS) within a cycle, where it ran: bounded by
        # loadBalancerBalancedShedderPlannerTimeLimitSeconds, after which the fill's plan stands.
        self.planner_seconds = Histogram(
            "loadmgr_balanced_shedder_planner_duration_seconds",
            "Wall time BalancedShedder's least-move planner spent in one shedding cycle.",
            labels,
            buckets=CYCLE_BUCKETS,
            registry=r,
        ).labels(cluster)
        # The cycle histogram above times the decision and its writes; this one a whole run as the
        # scheduler sees it (prefetch, waiting for the service lock, decide, write, publish): how much
        # later than one interval the next run starts (fixed delay, as Pulsar's LoadSheddingTask).
        self.job_wall = Histogram(
            "loadmgr_leader_job_run_duration_seconds",
            "Whole wall time of one run of a leader job: prefetch, lock wait, decide, write, publish.",
            ["cluster", "job"],
            buckets=JOB_RUN_BUCKETS,
            registry=r,
        )
        # Issue 46: how long each move keeps its bundle away from clients, per mode and kind; the
        # disruption budget releases a broker's next unload once its previous one is served.
        self.move_served_seconds = Histogram(
            "loadmgr_bundle_move_served_duration_seconds",
            "Time from a bundle's unload to its being served at its destination, per mode and kind.",
            ["cluster", "mode", "kind"],
            buckets=MOVE_SERVED_BUCKETS,
            registry=r,
        )
        for mode in MOVE_MODES:
            for kind in MOVE_KINDS:
                self.move_served_seconds.labels(cluster, mode, kind)
        # Pulsar mode: the health check run on a destination broker before moving into it
        # (service.pulsar.warm_up), per outcome.
        self.warm_ups = Counter(
            "loadmgr_pulsar_destination_warm_ups_total",
            "Pulsar health checks run on a destination broker before a move into it, per result.",
            ["cluster", "result"],
            registry=r,
        )
        for result in WARM_UP_RESULTS:
            self.warm_ups.labels(cluster, result)
        self.cycles = Counter(
            "loadmgr_shedding_cycles_total", "Leader shedding cycles run.", labels, registry=r
        ).labels(cluster)
        self.moves = Counter(
            "loadmgr_shedding_moves_total", "Bundle moves planned by shedding cycles.", labels, registry=r
        ).labels(cluster)
        self.unloads = Counter(
            "loadmgr_bundles_unloaded_total",
            "Bundles unloaded, by reason code.",
            ["cluster", "reason"],
            registry=r,
        )
        self.splits = Counter(
            "loadmgr_bundles_split_total",
            "Bundles split, by reason code.",
            ["cluster", "reason"],
            registry=r,
        )
        for reason in SPLIT_REASONS:
            self.splits.labels(cluster, reason)
        self.is_leader = Gauge(
            "loadmgr_is_leader", "1 while this instance is the leader.", ["cluster"], registry=r
        )
        self.is_leader.labels(cluster).set(0)
        # Pulsar mode: brokers whose own shedding or auto-split is on (or unreadable), and whether
        # loadmgr therefore refuses to act (0) or acts (1). ZooKeeper-native mode: 0 and 1.
        self.pulsar_conflicts = Gauge(
            "loadmgr_pulsar_broker_settings_conflicts",
            "Pulsar brokers whose own shedding or auto-split is on, or whose settings are unreadable.",
            ["cluster"],
            registry=r,
        )
        self.pulsar_conflicts.labels(cluster).set(0)
        self.pulsar_acting = Gauge(
            "loadmgr_pulsar_acting",
            "1 when loadmgr may unload and split (Pulsar mode: the brokers' own shedding and "
            "auto-split are off).",
            ["cluster"],
            registry=r,
        )
        self.pulsar_acting.labels(cluster).set(1)
        self.leader_transitions = Counter(
            "loadmgr_leader_transitions_total",
            "Times this instance gained or lost leadership.",
            labels,
            registry=r,
        ).labels(cluster)
        self.step_downs = _zeroed_counter(
            r,
            "loadmgr_leader_step_downs_total",
            "Times this instance stopped leading on its own: fenced_out, a write fenced on its leader "
            "epoch was refused (another instance or mode bumped the epoch).",
            cluster,
            reason=STEP_DOWN_REASONS,
        )
        self.zk_errors = _zeroed_counter(
            r,
            "loadmgr_zookeeper_errors_total",
            "ZooKeeper errors seen, by kind.",
            cluster,
            kind=ZK_ERROR_KINDS,
        )
        # Labelled by path kind, never by node: an attacker creating nodes cannot create series.
        self.malformed = _zeroed_counter(
            r,
            "loadmgr_malformed_nodes_total",
            "ZooKeeper node versions skipped as malformed, by path kind (brokers, bundle-data, ...).",
            cluster,
            kind=PATH_KINDS,
        )
        self.job_failures = _zeroed_counter(
            r,
            "loadmgr_job_failures_total",
            "Leader job runs that ended in an error, by job (shedding, reconcile, bundle-data, split).",
            cluster,
            job=JOB_NAMES,
        )
        self.job_runs = _zeroed_counter(
            r,
            "loadmgr_scheduler_job_runs_total",
            "Due runs of the leader's jobs by what the scheduler did: started, executed, error, or not "
            "started (missed; max_instances: the previous run was still going).",
            cluster,
            job=JOB_NAMES,
            outcome=RUN_OUTCOMES,
        )
        self.last_cycle = Gauge(
            "loadmgr_last_cycle_timestamp_seconds",
            "When the last shedding cycle finished.",
            labels,
            registry=r,
        ).labels(cluster)
        self.build_info = Gauge("loadmgr_build_info", "Build metadata.", ["cluster", "version"], registry=r)
        self.build_info.labels(cluster, version).set(1)
        self._service = ServiceCollector(cluster)
        r.register(self._service)
        # The process's own health (memory, CPU, open files, GC pauses) next to the service's.
        if registry is None:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        self._leader = False

    # -- MetricsSink ------------------------------------------------------------------------------

    def cycle_finished(self, seconds: float, moves: int) -> None:
        self.cycle_seconds.observe(max(0.0, seconds))
        self.cycles.inc()
        if moves > 0:
            self.moves.inc(moves)
        self.last_cycle.set(time.time())

    def planner_time(self, seconds: float) -> None:
        self.planner_seconds.observe(max(0.0, seconds))

    def unloaded(self, reason: str) -> None:
        self.unloads.labels(self.cluster, reason or "unknown").inc()

    def split_done(self, reason: str) -> None:
        self.splits.labels(self.cluster, reason or "unknown").inc()

    def shedding_unloads(self, brokers: int, bundles: int) -> None:
        """One shedding cycle's applied unloads: ``brokers`` that lost at least one of ``bundles``."""
        self._pulsar_counters.add("pulsar_lb_unload_broker_total", brokers)
        self._pulsar_counters.add("pulsar_lb_unload_bundle_total", bundles)

    def auto_splits(self, bundles: int) -> None:
        self._pulsar_counters.add("pulsar_lb_bundles_split_total", bundles)

    def leader_changed(self, is_leader: bool) -> None:
        if is_leader != self._leader:
            self.leader_transitions.inc()
        self._leader = is_leader
        self.is_leader.labels(self.cluster).set(1 if is_leader else 0)

    def pulsar_settings(self, problems: int, acting: bool) -> None:
        self.pulsar_conflicts.labels(self.cluster).set(problems)
        self.pulsar_acting.labels(self.cluster).set(1 if acting else 0)

    def stepped_down(self, reason: str) -> None:
        self.step_downs.labels(self.cluster, reason if reason in STEP_DOWN_REASONS else "other").inc()

    def move_served(self, mode: str, kind: str, seconds: float) -> None:
        if mode in MOVE_MODES and kind in MOVE_KINDS:
            self.move_served_seconds.labels(self.cluster, mode, kind).observe(max(seconds, 0.0))

    def warm_up(self, result: str, seconds: float) -> None:
        if result in WARM_UP_RESULTS:
            self.warm_ups.labels(self.cluster, result).inc()

    def zk_error(self, kind: str) -> None:
        self.zk_errors.labels(self.cluster, kind or "unknown").inc()

    def watch(self, service: Any) -> None:
        """Export ``service``'s ZooKeeper connection and history sink losses at every scrape."""
        self._service.watch(service)

    def malformed_node(self, kind: str) -> None:
        self.malformed.labels(self.cluster, kind if kind in PATH_KINDS else "other").inc()

    def job_failed(self, job: str) -> None:
        self.job_failures.labels(self.cluster, job if job in JOB_NAMES else "other").inc()

    def job_run(self, job: str, outcome: str) -> None:
        if job in JOB_NAMES and outcome in RUN_OUTCOMES:
            self.job_runs.labels(self.cluster, job, outcome).inc()

    def job_wall_time(self, job: str, seconds: float) -> None:
        if job in JOB_NAMES:
            self.job_wall.labels(self.cluster, job).observe(max(seconds, 0.0))

    def view_updated(self, view: Any, scores: Mapping[str, Mapping[str, float]]) -> None:
        brokers = brokers_of(view)
        self._brokers.set(BrokerSnapshot(brokers, _normalise_scores(scores or {}, set(brokers)), time.time()))

    # -- exposition -------------------------------------------------------------------------------

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _zeroed_counter(
    registry: CollectorRegistry, name: str, doc: str, cluster: str, **labels: Iterable[str]
) -> Counter:
    """A counter labelled by cluster and ``labels``, every combination exported at 0 from the start:
    a series that appears only on its first event leaves dashboards at "No data" and breaks increase()."""
    counter = Counter(name, doc, ["cluster", *labels], registry=registry)
    for values in itertools.product(*labels.values()):
        counter.labels(cluster, *values)
    return counter
