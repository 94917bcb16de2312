"""Prometheus metrics: the service's ``MetricsSink`` backed by prometheus_client.

Per-broker gauges are produced by a custom collector from the latest snapshot handed to
``view_updated`` so that a departed broker's series vanish instead of going stale. Where Pulsar
exports the same quantity the Pulsar name, labels and unit (percent) are kept (``pulsar_lb_*``), so
dashboards built for Pulsar's load manager keep working; everything else is ``loadmgr_*`` with base
units and ``_total`` on counters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
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
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from balancer.models import LocalBrokerData
from service.leader.metrics_sink import JOB_NAMES, PATH_KINDS

# Pulsar's ModularLoadManager gauges (broker resource usage in percent), labelled
# cluster/broker/metric="loadBalancing" exactly as Pulsar does.
PULSAR_LB_GAUGES: dict[str, tuple[str, str]] = {
    "pulsar_lb_cpu_usage": ("cpu", "The broker cpu usage (in percent)."),
    "pulsar_lb_memory_usage": ("memory", "The broker process memory usage (in percent)."),
    "pulsar_lb_directMemory_usage": ("direct_memory", "The broker process direct memory usage (in percent)."),
    "pulsar_lb_bandwidth_in_usage": ("bandwidth_in", "The broker inbound bandwidth usage (in percent)."),
    "pulsar_lb_bandwidth_out_usage": ("bandwidth_out", "The broker outbound bandwidth usage (in percent)."),
}

# Our own per-broker gauges: name -> (LocalBrokerData attribute, help).
BROKER_GAUGES: dict[str, tuple[str, str]] = {
    "loadmgr_broker_msg_rate_in_messages_per_second": ("msg_rate_in", "Messages per second into the broker."),
    "loadmgr_broker_msg_rate_out_messages_per_second": (
        "msg_rate_out",
        "Messages per second out of the broker.",
    ),
    "loadmgr_broker_throughput_in_bytes_per_second": (
        "msg_throughput_in",
        "Bytes per second into the broker.",
    ),
    "loadmgr_broker_throughput_out_bytes_per_second": (
        "msg_throughput_out",
        "Bytes per second out of the broker.",
    ),
    "loadmgr_broker_topics": ("num_topics", "Topics served by the broker."),
    "loadmgr_broker_bundles": ("num_bundles", "Bundles owned by the broker."),
}

# Label values created at zero up front: a counter series that does not exist yet makes rate() and
# increase() return nothing, so a dashboard panel shows "No data" where it should show 0.
# The kinds the service reports (service.leader.service: the error class, or the lost connection state).
ZK_ERROR_KINDS = ("StoreUnavailable", "StaleWrite", "suspended", "lost")
# The reason codes of Pulsar's split conditions (balancer.split.conditions).
SPLIT_REASONS = ("too_many_topics", "too_many_sessions", "msg_rate_too_high", "throughput_too_high")
# ModularLoadManagerImpl's leader counters, as PrometheusMetricsGenerator exposes them: the name
# is the Java key with ``brk_`` -> ``pulsar_`` (``brk_lb_unload_broker_total`` and so on), typed
# gauge (parseMetricsToPrometheusMetrics writes every load-balancing metric as a gauge), labelled
# with the cluster and the ``metric`` dimension. Their values only grow while this process lives.
PULSAR_LB_COUNTERS: dict[str, tuple[str, str]] = {
    "pulsar_lb_unload_broker_total": (
        "bundleUnloading",
        "Brokers that shed at least one bundle, per cycle, summed.",
    ),
    "pulsar_lb_unload_bundle_total": ("bundleUnloading", "Bundles unloaded by load shedding."),
    "pulsar_lb_bundles_split_total": ("bundlesSplit", "Bundles split by the automatic bundle split."),
}

# ModularLoadManagerImpl.updateLoadBalancingBundlesMetrics, exported only with
# exposeBundlesMetricsInPrometheus: one series per bundle a broker reports, labelled
# cluster/broker/bundle/metric="bundle", name -> NamespaceBundleStats attribute.
PULSAR_BUNDLE_GAUGES: dict[str, str] = {
    "pulsar_bundle_msg_rate_in": "msg_rate_in",
    "pulsar_bundle_msg_rate_out": "msg_rate_out",
    "pulsar_bundle_topics_count": "topics",
    "pulsar_bundle_consumer_count": "consumer_count",
    "pulsar_bundle_producer_count": "producer_count",
    "pulsar_bundle_msg_throughput_in": "msg_throughput_in",
    "pulsar_bundle_msg_throughput_out": "msg_throughput_out",
}

CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class _Snapshot:
    brokers: dict[str, LocalBrokerData] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # broker -> strategy -> score
    taken_at: float = 0.0


class _BrokerCollector(Collector):
    """Yields the per-broker gauges from the latest snapshot at scrape time."""

    def __init__(self, cluster: str, expose_bundles: bool = False) -> None:
        self._cluster = cluster
        self._expose_bundles = expose_bundles
        self._lock = threading.Lock()
        self._snap = _Snapshot()

    def set(self, snap: _Snapshot) -> None:
        with self._lock:
            self._snap = snap

    def describe(self) -> list[Any]:
        # Returning families lets the registry check name clashes at registration time.
        return list(self._families(_Snapshot()))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            snap = self._snap
        yield from self._families(snap)

    def _families(self, snap: _Snapshot) -> Iterator[GaugeMetricFamily]:
        c = self._cluster
        for name, (attr, doc) in PULSAR_LB_GAUGES.items():
            fam = GaugeMetricFamily(name, doc, labels=["cluster", "broker", "metric"])
            for broker, data in sorted(snap.brokers.items()):
                fam.add_metric([c, broker, "loadBalancing"], float(getattr(data, attr).percent_usage()))
            yield fam
        for name, (attr, doc) in BROKER_GAUGES.items():
            fam = GaugeMetricFamily(name, doc, labels=["cluster", "broker"])
            for broker, data in sorted(snap.brokers.items()):
                fam.add_metric([c, broker], float(getattr(data, attr)))
            yield fam
        usage = GaugeMetricFamily(
            "loadmgr_broker_resource_usage_ratio",
            "Broker resource usage as a fraction of its limit (0-1).",
            labels=["cluster", "broker", "resource"],
        )
        for broker, data in sorted(snap.brokers.items()):
            for attr in ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out"):
                usage.add_metric([c, broker, attr], float(getattr(data, attr).percent_usage()) / 100.0)
        yield usage
        max_usage = GaugeMetricFamily(
            "loadmgr_broker_max_resource_usage_ratio",
            "The broker's highest resource usage (0-1), as Pulsar's max_resource_usage.",
            labels=["cluster", "broker"],
        )
        for broker, data in sorted(snap.brokers.items()):
            max_usage.add_metric([c, broker], float(data.max_resource_usage()))
        yield max_usage
        score = GaugeMetricFamily(
            "loadmgr_broker_score",
            "The broker's load score as each shedding strategy computes it (unitless).",
            labels=["cluster", "broker", "strategy"],
        )
        for broker, per_strategy in sorted(snap.scores.items()):
            for strategy, value in sorted(per_strategy.items()):
                score.add_metric([c, broker, strategy], float(value))
        yield score
        age = GaugeMetricFamily(
            "loadmgr_load_report_age_seconds",
            "Seconds since the broker last wrote its load report, at the time of the last view.",
            labels=["cluster", "broker"],
        )
        for broker, data in sorted(snap.brokers.items()):
            if data.last_update > 0:
                age.add_metric([c, broker], max(0.0, snap.taken_at - data.last_update / 1000.0))
        yield age
        live = GaugeMetricFamily("loadmgr_brokers", "Live brokers in the leader's view.", labels=["cluster"])
        live.add_metric([c], float(len(snap.brokers)))
        yield live
        if self._expose_bundles:
            yield from self._bundle_families(snap)

    def _bundle_families(self, snap: _Snapshot) -> Iterator[GaugeMetricFamily]:
        for name, attr in PULSAR_BUNDLE_GAUGES.items():
            fam = GaugeMetricFamily(
                name,
                f"Bundle {attr} as its broker reports it.",
                labels=["cluster", "broker", "bundle", "metric"],
            )
            for broker, data in sorted(snap.brokers.items()):
                for bundle, stats in sorted(data.last_stats.items()):
                    fam.add_metric([self._cluster, broker, bundle, "bundle"], float(getattr(stats, attr)))
            yield fam


class _PulsarLbCounters(Collector):
    """Pulsar's leader counters (see :data:`PULSAR_LB_COUNTERS`), yielded at scrape time."""

    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        self._lock = threading.Lock()
        self._values = dict.fromkeys(PULSAR_LB_COUNTERS, 0)

    def add(self, name: str, n: int) -> None:
        with self._lock:
            self._values[name] += n

    def describe(self) -> list[Any]:
        return list(self.collect())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            values = dict(self._values)
        for name, (metric, doc) in PULSAR_LB_COUNTERS.items():
            fam = GaugeMetricFamily(name, doc, labels=["cluster", "metric"])
            fam.add_metric([self._cluster, metric], float(values[name]))
            yield fam


class _ServiceCollector(Collector):
    """The ZooKeeper connection and the history sink's losses, read from the service at scrape time."""

    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        self._service: Any = None

    def watch(self, service: Any) -> None:
        self._service = service

    def describe(self) -> list[Any]:
        return list(self._families(None))

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from self._families(self._service)

    def _families(self, service: Any) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        c = self._cluster
        connected = GaugeMetricFamily(
            "loadmgr_zookeeper_connected",
            "1 while this instance's ZooKeeper session is connected.",
            labels=["cluster"],
        )
        store = getattr(service, "store", None)
        connected.add_metric([c], 1.0 if store is not None and getattr(store, "connected", False) else 0.0)
        yield connected
        # Zero without a history sink: nothing is lost then, and the alert on losses still evaluates.
        stats = getattr(getattr(service, "history", None), "stats", None)
        for name, attr, doc in (
            (
                "loadmgr_history_cycles_dropped",
                "cycles_dropped",
                "Cycles the history writer dropped (behind).",
            ),
            ("loadmgr_history_write_errors", "write_errors", "History files that failed to write."),
        ):
            fam = CounterMetricFamily(name, doc, labels=["cluster"])
            fam.add_metric([c], float(getattr(stats, attr, 0) or 0))
            yield fam


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
        self._brokers = _BrokerCollector(cluster, expose_bundles)
        r.register(self._brokers)
        # Every series carries ``cluster``, so one Prometheus can watch several clusters and the
        # dashboard's cluster variable filters every panel.
        labels = ["cluster"]
        self._pulsar_counters = _PulsarLbCounters(cluster)
        r.register(self._pulsar_counters)
        self.cycle_seconds = Histogram(
            "loadmgr_shedding_cycle_duration_seconds",
            "Wall time of one leader shedding cycle.",
            labels,
            buckets=CYCLE_BUCKETS,
            registry=r,
        ).labels(cluster)
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
        self.leader_transitions = Counter(
            "loadmgr_leader_transitions_total",
            "Times this instance gained or lost leadership.",
            labels,
            registry=r,
        ).labels(cluster)
        self.zk_errors = Counter(
            "loadmgr_zookeeper_errors_total",
            "ZooKeeper errors seen, by kind.",
            ["cluster", "kind"],
            registry=r,
        )
        for kind in ZK_ERROR_KINDS:
            self.zk_errors.labels(cluster, kind)
        # Labelled by path kind, never by node: an attacker creating nodes cannot create series.
        self.malformed = Counter(
            "loadmgr_malformed_nodes_total",
            "ZooKeeper node versions skipped as malformed, by path kind (brokers, bundle-data, ...).",
            ["cluster", "kind"],
            registry=r,
        )
        for kind in PATH_KINDS:
            self.malformed.labels(cluster, kind)
        self.job_failures = Counter(
            "loadmgr_job_failures_total",
            "Leader job runs that ended in an error, by job (shedding, reconcile, bundle-data, split).",
            ["cluster", "job"],
            registry=r,
        )
        for job in JOB_NAMES:
            self.job_failures.labels(cluster, job)
        self.last_cycle = Gauge(
            "loadmgr_last_cycle_timestamp_seconds",
            "When the last shedding cycle finished.",
            labels,
            registry=r,
        ).labels(cluster)
        self.build_info = Gauge("loadmgr_build_info", "Build metadata.", ["cluster", "version"], registry=r)
        self.build_info.labels(cluster, version).set(1)
        self._service = _ServiceCollector(cluster)
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

    def zk_error(self, kind: str) -> None:
        self.zk_errors.labels(self.cluster, kind or "unknown").inc()

    def watch(self, service: Any) -> None:
        """Export ``service``'s ZooKeeper connection and history sink losses at every scrape."""
        self._service.watch(service)

    def malformed_node(self, kind: str) -> None:
        self.malformed.labels(self.cluster, kind if kind in PATH_KINDS else "other").inc()

    def job_failed(self, job: str) -> None:
        self.job_failures.labels(self.cluster, job if job in JOB_NAMES else "other").inc()

    def view_updated(self, view: Any, scores: Mapping[str, Mapping[str, float]]) -> None:
        brokers = brokers_of(view)
        self._brokers.set(_Snapshot(brokers, _normalise_scores(scores or {}, set(brokers)), time.time()))

    # -- exposition -------------------------------------------------------------------------------

    def render(self) -> bytes:
        return generate_latest(self.registry)
