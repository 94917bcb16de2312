"""What the Extensible tier reads from Pulsar itself, and its clients: who owns a bundle (each broker's
``ownedNamespaces``, no lookup made), each broker's message rate for a namespace (``broker-stats/topics``),
the lookups the brokers answered (their ``/metrics/``), a namespace put on one broker, and consumers
that count what they receive."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from balancer.topic_stats import sum_topics_per_bundle
from service.pulsar.admin import PulsarAdmin
from service.pulsar.cluster import PulsarCluster
from service.pulsar.skew import skew_namespace
from service.pulsar.workload import Workload
from tests.pulsar.conftest import wait_for


class Consumers:
    """One subscription per topic from its first message; counts what each received (and acks it)."""

    def __init__(self, service_url: str, topics: Iterable[str]) -> None:
        import pulsar

        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        for t in topics:
            self.counts[t] = 0
            self._client.subscribe(
                t,
                "loadmgr-no-loss",
                initial_position=pulsar.InitialPosition.Earliest,
                message_listener=self._listener(t),
            )

    def _listener(self, topic: str) -> Callable[[Any, Any], None]:
        def on_message(consumer: Any, msg: Any) -> None:
            with self._lock:
                self.counts[topic] += 1
            consumer.acknowledge(msg)

        return on_message

    def missing(self, work: Workload) -> dict[str, int]:
        """Topic -> acknowledged sends not (yet) received."""
        with self._lock:
            got = dict(self.counts)
        return {t: n - got[t] for t, rec in work.records.items() if (n := len(rec.sent_at)) > got.get(t, 0)}

    def close(self) -> None:
        self._client.close()


def skewed_namespace(
    admin: PulsarAdmin, cluster: PulsarCluster, ns: str, bundles: int
) -> tuple[dict[str, str], str]:
    """``ns`` with two topics in each of its bundles, all transferred to the first broker; owners read
    from ``ownedNamespaces``, so that no lookup interferes with a transfer."""
    target = cluster.brokers[0].broker_id
    skewed = skew_namespace(admin, ns, bundles, target, owner=lambda r: owner_of(admin, cluster, f"{ns}/{r}"))
    wait_for(lambda: not skewed.elsewhere(), 60, f"every bundle of {ns} on {target}")
    return skewed.topics, target


def owner_of(admin: PulsarAdmin, cluster: PulsarCluster, bundle: str) -> str | None:
    """The broker whose ``ownedNamespaces`` lists ``bundle`` (no lookup is made)."""
    for b in cluster.brokers:
        if bundle in admin.owned_bundles(cluster.cluster, b.broker_id):
            return b.broker_id
    return None


def rates_by_broker(admin: PulsarAdmin, cluster: PulsarCluster, ns: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in cluster.brokers:
        stats = sum_topics_per_bundle(admin.get_json("/admin/v2/broker-stats/topics", base=b.web_url))
        out[b.broker_id] = sum(s.msg_rate_in for name, s in stats.items() if name.startswith(ns + "/"))
    return out


def lookups(admin: PulsarAdmin, cluster: PulsarCluster) -> float:
    """Topic lookups every broker has answered (pulsar_broker_lookup_answers_total, summed)."""
    total = 0.0
    for b in cluster.brokers:
        text = admin.request("GET", "/metrics/", base=b.web_url).text
        total += sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("pulsar_broker_lookup_answers_total")
        )
    return total
