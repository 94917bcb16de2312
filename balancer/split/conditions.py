"""Pulsar's BundleSplitterTask: a bundle with at least two topics splits when any limit is exceeded,
while its namespace stays below the maximum bundle count (counting splits accepted in this pass)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import MIB, LoadData


@dataclass(frozen=True)
class SplitCandidate:
    """A hot bundle accepted for splitting, the broker that reported it, and which limit it crossed."""

    bundle: str
    broker: str
    explanation: Explanation


def split_enabled(load: LoadData, config: LoadBalancerConfig) -> Explanation | None:
    """None when the leader should look for splits; otherwise why not (switch off, one broker)."""
    if not config.loadBalancerAutoBundleSplitEnabled:
        return explain("split_disabled", "loadBalancerAutoBundleSplitEnabled is false")
    if len(load.broker_data) <= 1:
        return explain(
            "too_few_brokers", "splitting needs more than one broker", brokers=len(load.broker_data)
        )
    return None


def find_bundles_to_split(
    load: LoadData, config: LoadBalancerConfig, namespace_bundle_counts: Mapping[str, int]
) -> list[SplitCandidate]:
    """Hot bundles in report order. A namespace missing from ``namespace_bundle_counts`` counts the
    distinct bundles the brokers report for it (the live leader passes the real layouts)."""
    max_topics = config.loadBalancerNamespaceBundleMaxTopics
    max_sessions = config.loadBalancerNamespaceBundleMaxSessions
    max_rate = config.loadBalancerNamespaceBundleMaxMsgRate
    max_bytes = config.loadBalancerNamespaceBundleMaxBandwidthMbytes * MIB
    max_bundles = config.loadBalancerNamespaceMaximumBundles
    reported: dict[str, set[str]] | None = None
    accepted: dict[str, int] = {}
    out: list[SplitCandidate] = []
    for broker, data in load.broker_data.items():
        for bundle, stats in data.local_data.last_stats.items():
            if stats.topics < 2:
                continue
            bd = load.bundle_data.get(bundle)
            rate = bd.long_term_data.msg_rate if bd is not None else 0.0
            throughput = bd.long_term_data.msg_throughput if bd is not None else 0.0
            sessions = stats.consumer_count + stats.producer_count
            if stats.topics > max_topics:
                why = ("too_many_topics", f"{stats.topics} topics > {max_topics}")
            elif max_sessions > 0 and sessions > max_sessions:
                why = ("too_many_sessions", f"{sessions} producers+consumers > {max_sessions}")
            elif rate > max_rate:
                why = ("msg_rate_too_high", f"long-term {rate:.6g} msg/s > {max_rate}")
            elif throughput > max_bytes:
                why = ("throughput_too_high", f"long-term {throughput:.6g} B/s > {max_bytes}")
            else:
                continue
            ns = namespace_of(bundle)
            current = namespace_bundle_counts.get(ns)
            if current is None:
                if reported is None:
                    reported = _reported_bundles(load)
                current = len(reported.get(ns, ()))
            already = accepted.get(ns, 0)
            if current + already >= max_bundles:
                continue
            accepted[ns] = already + 1
            out.append(
                SplitCandidate(
                    bundle,
                    broker,
                    explain(
                        why[0],
                        why[1],
                        subject=bundle,
                        broker=broker,
                        topics=stats.topics,
                        sessions=sessions,
                        msg_rate=rate,
                        throughput=throughput,
                        namespace_bundles=current,
                        accepted_in_pass=already + 1,
                        maximum_bundles=max_bundles,
                    ),
                )
            )
    return out


def _reported_bundles(load: LoadData) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for data in load.broker_data.values():
        for bundle in data.local_data.last_stats:
            out.setdefault(namespace_of(bundle), set()).add(bundle)
    return out
