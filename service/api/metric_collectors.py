"""The scrape-time collectors behind :class:`service.api.metrics.PrometheusMetrics`.

The per-broker gauges come from the latest snapshot handed to ``view_updated`` (``BrokerCollector``)
so that a departed broker's series vanish instead of going stale; Pulsar's leader counters
(``PulsarLbCounters``) and the ZooKeeper connection and history losses (``ServiceCollector``) are also
yielded at scrape time. Where Pulsar exports the same quantity the Pulsar name, labels and unit
(percent) are kept (``pulsar_lb_*``, ``pulsar_bundle_*``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from balancer.models import LocalBrokerData
from balancer.placement.context import broker_host

# Pulsar's ModularLoadManager gauges (broker resource usage in percent), labelled
# cluster/broker/metric="loadBalancing" exactly as Pulsar does (``broker``: see pulsar_broker_labels).
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


def pulsar_broker_labels(brokers: Iterable[str]) -> dict[str, str]:
    """broker id -> the ``broker`` label of the ``pulsar_lb_*`` and ``pulsar_bundle_*`` series.

    Pulsar sets that dimension to ``PulsarService.getAdvertisedAddress()``, "the host component of
    the broker's canonical name" (``ModularLoadManagerImpl.updateLoadBalancingMetrics`` and
    ``updateLoadBalancingBundlesMetrics``), with no port; a 3.x broker id is that host and the web
    service port, so the host is the id's host part. Each Pulsar broker exports only itself, but this
    leader exports every broker, so brokers sharing a host would fold into one series: those (and any
    label equal to another broker's) keep their full id instead. ``loadmgr_*`` series keep the id.
    """
    ids = set(brokers)
    hosts = Counter(broker_host(b) for b in ids)
    labels = {b: broker_host(b) if hosts[broker_host(b)] == 1 else b for b in ids}
    while True:  # a host can equal another broker's whole id (``a:b`` and ``a:b:8080``); ids are unique
        counts = Counter(labels.values())
        clash = [b for b, label in labels.items() if counts[label] > 1 and label != b]
        if not clash:
            return labels
        for b in clash:
            labels[b] = b


@dataclass
class BrokerSnapshot:
    brokers: dict[str, LocalBrokerData] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # broker -> strategy -> score
    taken_at: float = 0.0


class BrokerCollector(Collector):
    """Yields the per-broker gauges from the latest snapshot at scrape time."""

    def __init__(self, cluster: str, expose_bundles: bool = False) -> None:
        self._cluster = cluster
        self._expose_bundles = expose_bundles
        self._lock = threading.Lock()
        self._snap = BrokerSnapshot()

    def set(self, snap: BrokerSnapshot) -> None:
        with self._lock:
            self._snap = snap

    def describe(self) -> list[Any]:
        # Returning families lets the registry check name clashes at registration time.
        return list(self._families(BrokerSnapshot()))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            snap = self._snap
        yield from self._families(snap)

    def _families(self, snap: BrokerSnapshot) -> Iterator[GaugeMetricFamily]:
        c = self._cluster
        host = pulsar_broker_labels(snap.brokers)
        for name, (attr, doc) in PULSAR_LB_GAUGES.items():
            fam = GaugeMetricFamily(name, doc, labels=["cluster", "broker", "metric"])
            for broker, data in sorted(snap.brokers.items()):
                fam.add_metric([c, host[broker], "loadBalancing"], float(getattr(data, attr).percent_usage()))
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
            yield from self._bundle_families(snap, host)

    def _bundle_families(self, snap: BrokerSnapshot, host: dict[str, str]) -> Iterator[GaugeMetricFamily]:
        for name, attr in PULSAR_BUNDLE_GAUGES.items():
            fam = GaugeMetricFamily(
                name,
                f"Bundle {attr} as its broker reports it.",
                labels=["cluster", "broker", "bundle", "metric"],
            )
            for broker, data in sorted(snap.brokers.items()):
                for bundle, stats in sorted(data.last_stats.items()):
                    fam.add_metric(
                        [self._cluster, host[broker], bundle, "bundle"], float(getattr(stats, attr))
                    )
            yield fam


class PulsarLbCounters(Collector):
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


class ServiceCollector(Collector):
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
        blocked = GaugeMetricFamily(
            "loadmgr_leader_campaign_blocked",
            "1 while this instance does not campaign because loadmgr in the other mode leads this "
            "ZooKeeper (/readyz says which).",
            labels=["cluster"],
        )
        election = getattr(service, "election", None)
        blocked.add_metric([c], 1.0 if getattr(election, "blocked", None) else 0.0)
        yield blocked
        # Zero without a history sink: nothing is lost then, and the alert on losses still evaluates.
        stats = getattr(getattr(service, "history", None), "stats", None)
        for name, attr, doc in (
            (
                "loadmgr_history_cycles_dropped",
                "cycles_dropped",
                "Cycles the history writer dropped (behind).",
            ),
            (
                "loadmgr_history_decisions_dropped",
                "decisions_dropped",
                "Decision rows (moves, placements, splits) the history writer dropped: over 500,000 "
                "waiting (behind).",
            ),
            ("loadmgr_history_write_errors", "write_errors", "History files that failed to write."),
        ):
            fam = CounterMetricFamily(name, doc, labels=["cluster"])
            fam.add_metric([c], float(getattr(stats, attr, 0) or 0))
            yield fam
        yield from maintenance_families(c, service)


DRAIN_STATES = ("running", "stopped", "done", "failed")


def maintenance_families(cluster: str, service: Any) -> Iterator[GaugeMetricFamily]:
    """Cordoned brokers and the drain (running or last finished), from the watched ZooKeeper nodes:
    every instance, leader or not, exports the same series."""
    cordons = getattr(service, "cordons", None)
    drain_state = getattr(service, "drain_state", None)
    cordoned = GaugeMetricFamily(
        "loadmgr_broker_cordoned",
        "1 for each cordoned broker: placement gives it no new bundle.",
        labels=["cluster", "broker"],
    )
    for broker in sorted(cordons() if callable(cordons) else {}):
        cordoned.add_metric([cluster, broker], 1.0)
    yield cordoned
    state = drain_state() if callable(drain_state) else None
    states = GaugeMetricFamily(
        "loadmgr_drain_state",
        "1 for the drain's current state (running, stopped, done, failed), labelled with its broker.",
        labels=["cluster", "broker", "state"],
    )
    moved = GaugeMetricFamily(
        "loadmgr_drain_bundles_moved",
        "Bundles the drain has moved off its broker.",
        labels=["cluster", "broker"],
    )
    left = GaugeMetricFamily(
        "loadmgr_drain_bundles_remaining",
        "Bundles the drained broker still owns (heartbeat namespaces excluded), as last seen.",
        labels=["cluster", "broker"],
    )
    if state is not None:
        for s in DRAIN_STATES:
            states.add_metric([cluster, state.broker, s], 1.0 if state.state == s else 0.0)
        moved.add_metric([cluster, state.broker], float(state.moved))
        left.add_metric([cluster, state.broker], float(state.remaining))
    yield states
    yield moved
    yield left
