"""Pulsar's four bundle split algorithms: each returns the cut points strictly inside the range.

An empty list means "no split" (Pulsar logs it and does nothing). Topic hashes are CRC-32 of the
names exactly as given (callers pass full topic names, partitions one by one).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from itertools import pairwise

from balancer.bundles import BundleRange, NamespaceBundles
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, PreconditionFailed
from balancer.models import MIB, NamespaceBundleStats

RANGE_EQUALLY_DIVIDE = "range_equally_divide"
TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"
FLOW_OR_QPS_EQUALLY_DIVIDE = "flow_or_qps_equally_divide"
ALGORITHMS = (
    RANGE_EQUALLY_DIVIDE,
    TOPIC_COUNT_EQUALLY_DIVIDE,
    SPECIFIED_POSITIONS_DIVIDE,
    FLOW_OR_QPS_EQUALLY_DIVIDE,
)


def raw_hash(topic: str) -> int:
    return zlib.crc32(topic.encode("utf-8")) & 0xFFFFFFFF


def range_equally_divide(rng: BundleRange) -> list[int]:
    return [rng.lower + (rng.upper - rng.lower) // 2]


def topic_count_equally_divide(topics: Sequence[str]) -> list[int]:
    """Midpoint between the two middle topic hashes, so each child gets about half the topics."""
    if len(topics) <= 1:
        return []
    hashes = sorted(raw_hash(t) for t in topics)
    n = len(hashes)
    start, end = hashes[max(n // 2 - 1, 0)], hashes[n // 2]
    return [start + (end - start) // 2]


def specified_positions_divide(
    rng: BundleRange, topics: Sequence[str], positions: Sequence[int] | None
) -> list[int]:
    if not positions:
        raise InvalidInput(
            "positions", positions, "boundaries must not be empty for specified_positions_divide"
        )
    if len(topics) <= 1:
        return []
    return [p for p in sorted(set(positions)) if rng.lower < p < rng.upper]


def flow_or_qps_equally_divide(
    topics: Sequence[str], topic_stats: Mapping[str, NamespaceBundleStats], config: LoadBalancerConfig
) -> list[int]:
    """Walk topics in hash order, cutting before the topic that would push a group over the
    msg-rate or bandwidth limit; nothing to do unless the bundle is clearly (by the difference
    threshold) over a limit."""
    max_rate = float(config.loadBalancerNamespaceBundleMaxMsgRate)
    max_bytes = float(config.loadBalancerNamespaceBundleMaxBandwidthMbytes * MIB)
    margin = 1 + config.flowOrQpsDifferenceThresholdPercentage / 100.0
    per_hash: dict[int, tuple[float, float]] = {}
    total_rate = total_bytes = 0.0
    for t in topics:
        s = topic_stats.get(t)
        if s is None:
            continue
        rate, thr = s.msg_rate_in + s.msg_rate_out, s.msg_throughput_in + s.msg_throughput_out
        if rate <= 0 and thr <= 0:
            continue
        total_rate += rate
        total_bytes += thr
        per_hash[raw_hash(t)] = (rate, thr)
    if len(per_hash) <= 1 or (total_rate < max_rate * margin and total_bytes < max_bytes * margin):
        return []
    hashes = sorted(per_hash)
    run_rate, run_bytes = per_hash[hashes[0]]
    cuts: list[int] = []
    for prev, h in pairwise(hashes):
        rate, thr = per_hash[h]
        if run_rate + rate > max_rate or run_bytes + thr > max_bytes:
            # Pulsar's "+1" puts the cut one past the midpoint (unlike topic_count's midpoint).
            cuts.append(prev + (h - prev) // 2 + 1)
            run_rate, run_bytes = rate, thr
        else:
            run_rate += rate
            run_bytes += thr
    return cuts


def split_boundaries(
    algorithm: str,
    rng: BundleRange,
    config: LoadBalancerConfig,
    topics: Sequence[str] = (),
    positions: Sequence[int] | None = None,
    topic_stats: Mapping[str, NamespaceBundleStats] | None = None,
) -> list[int]:
    """Cut points for ``rng`` by ``algorithm`` (Pulsar's name); unknown names are refused."""
    if algorithm == RANGE_EQUALLY_DIVIDE:
        return range_equally_divide(rng)
    if algorithm == TOPIC_COUNT_EQUALLY_DIVIDE:
        return topic_count_equally_divide(topics)
    if algorithm == SPECIFIED_POSITIONS_DIVIDE:
        return specified_positions_divide(rng, topics, positions)
    if algorithm == FLOW_OR_QPS_EQUALLY_DIVIDE:
        return flow_or_qps_equally_divide(topics, topic_stats or {}, config)
    raise InvalidInput("algorithm", algorithm, f"unknown split algorithm; known: {list(ALGORITHMS)}")


def resolve_algorithm(requested: str | None, config: LoadBalancerConfig) -> str:
    """The algorithm a split uses, as Pulsar's ``NamespacesBase`` resolves it.

    A name that is not in ``supportedNamespaceBundleSplitAlgorithms`` is refused with
    :class:`PreconditionFailed` (Pulsar's HTTP 412) rather than silently replaced. No name, or a
    supported name no algorithm answers to, falls back to ``defaultNamespaceBundleSplitAlgorithm``
    and then ``range_equally_divide`` (``getNamespaceBundleSplitAlgorithmByName``)."""
    supported = config.supportedNamespaceBundleSplitAlgorithms
    if requested and requested.strip():
        if requested not in supported:
            raise PreconditionFailed(
                "algorithm",
                requested,
                f"unsupported namespace bundle split algorithm; supported algorithms are {list(supported)}",
            )
        if requested in ALGORITHMS:
            return requested
    default = config.defaultNamespaceBundleSplitAlgorithm
    return default if default in supported and default in ALGORITHMS else RANGE_EQUALLY_DIVIDE


def split_layout(
    layout: NamespaceBundles, rng: BundleRange, boundaries: Sequence[int]
) -> NamespaceBundles | None:
    """The new layout, or None when the split cannot happen (range too narrow, no cut, range gone)."""
    if rng.width <= 1 or not boundaries or not layout.contains(rng):
        return None
    return layout.split(rng, boundaries)
