"""Pulsar's ``broker-stats/topics`` document folded into per-bundle stats, as a broker builds its
``lastStats`` (``{namespace: {bundleRange: {"persistent"|"non-persistent": {topic: stats}}}}``).

Shared by the ZooKeeper-native agent that reads a real broker (service/broker/pulsar_source.py) and
Pulsar mode on Extensible brokers (service/pulsar/extensible.py), which serve no LocalBrokerData.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from balancer.models import NamespaceBundleStats


def _num(d: Mapping[str, Any], key: str) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, int | float) else 0.0


def _count(d: Mapping[str, Any], count_key: str, list_key: str) -> int:
    v = d.get(count_key)
    if isinstance(v, int):
        return v
    items = d.get(list_key)
    return len(items) if isinstance(items, list | dict) else 0


def _consumers(topic: Mapping[str, Any]) -> int:
    subs = topic.get("subscriptions")
    if isinstance(subs, dict):
        return sum(_count(s, "consumerCount", "consumers") for s in subs.values() if isinstance(s, dict))
    return _count(topic, "consumerCount", "consumers")


def sum_topics_per_bundle(doc: Mapping[str, Any]) -> dict[str, NamespaceBundleStats]:
    """Fold the broker-stats/topics document into ``bundle name -> stats``; odd members are skipped."""
    out: dict[str, NamespaceBundleStats] = {}
    for ns, bundles in doc.items():
        if not isinstance(bundles, dict):
            continue
        for rng, domains in bundles.items():
            if not isinstance(domains, dict):
                continue
            s = NamespaceBundleStats()
            for topics in domains.values():
                if not isinstance(topics, dict):
                    continue
                for topic in topics.values():
                    if not isinstance(topic, dict):
                        continue
                    s.msg_rate_in += _num(topic, "msgRateIn")
                    s.msg_rate_out += _num(topic, "msgRateOut")
                    s.msg_throughput_in += _num(topic, "msgThroughputIn")
                    s.msg_throughput_out += _num(topic, "msgThroughputOut")
                    s.producer_count += _count(topic, "producerCount", "publishers")
                    s.consumer_count += _consumers(topic)
                    s.topics += 1
            out[f"{ns}/{rng}"] = s
    return out
