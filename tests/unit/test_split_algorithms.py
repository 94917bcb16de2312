"""Split algorithms, applying their cut points, and the layout invariants (Hypothesis)."""

from __future__ import annotations

import zlib
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.bundles import FULL_UPPER, BundleRange, NamespaceBundles, split_in_n
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, PreconditionFailed
from balancer.models import NamespaceBundleStats
from balancer.split import algorithms as alg

CFG = LoadBalancerConfig()


def test_range_equally_divide() -> None:
    assert alg.split_boundaries("range_equally_divide", BundleRange(0, FULL_UPPER), CFG) == [0x7FFFFFFF]


def test_topic_count_uses_middle_hashes() -> None:
    topics = ["a", "b", "c", "d"]
    h = sorted(zlib.crc32(t.encode()) for t in topics)
    assert alg.topic_count_equally_divide(topics) == [h[1] + (h[2] - h[1]) // 2]
    assert alg.topic_count_equally_divide(["only"]) == []


def test_specified_positions() -> None:
    rng = BundleRange(100, 200)
    assert alg.specified_positions_divide(rng, ["a", "b"], [150, 100, 120, 120, 250]) == [120, 150]
    assert alg.specified_positions_divide(rng, ["a"], [150]) == []
    with pytest.raises(InvalidInput, match="positions"):
        alg.specified_positions_divide(rng, ["a", "b"], [])


def test_flow_or_qps_below_guard_no_split() -> None:
    stats = {f"t{i}": NamespaceBundleStats(msg_rate_in=10_000) for i in range(3)}  # 30 000 < 33 000
    assert alg.flow_or_qps_equally_divide(list(stats), stats, CFG) == []


def test_flow_or_qps_skips_idle_and_unknown_topics() -> None:
    stats = {"busy": NamespaceBundleStats(msg_rate_in=40_000), "idle": NamespaceBundleStats()}
    assert alg.flow_or_qps_equally_divide(["busy", "idle", "unknown"], stats, CFG) == []


def test_unknown_algorithm_and_resolution() -> None:
    with pytest.raises(InvalidInput, match="algorithm"):
        alg.split_boundaries("halve", BundleRange.full(), CFG)
    assert alg.resolve_algorithm(None, CFG) == "range_equally_divide"
    with pytest.raises(PreconditionFailed, match="supported algorithms"):
        alg.resolve_algorithm("bogus", CFG)  # Pulsar's 412, not a silent fallback
    only_range = CFG.with_updates({"supportedNamespaceBundleSplitAlgorithms": ["range_equally_divide"]})
    with pytest.raises(PreconditionFailed):
        alg.resolve_algorithm("topic_count_equally_divide", only_range)
    assert alg.resolve_algorithm("topic_count_equally_divide", CFG) == "topic_count_equally_divide"


def test_split_layout_refusals() -> None:
    layout = NamespaceBundles.initial("t/ns", 4)
    assert alg.split_layout(layout, BundleRange(0, 1), [0]) is None  # too narrow
    assert alg.split_layout(layout, BundleRange(0, 0x20000000), [0x10000000]) is None  # not in layout
    assert alg.split_layout(layout, BundleRange(0, 0x40000000), []) is None  # nothing to cut


def test_split_with_one_topic_is_a_no_op() -> None:
    layout = NamespaceBundles.initial("t/ns", 1)
    rng = layout.ranges[0]
    for name in ("topic_count_equally_divide", "specified_positions_divide", "flow_or_qps_equally_divide"):
        cuts = alg.split_boundaries(
            name,
            rng,
            CFG,
            ["persistent://t/ns/one"],
            [5],
            {"persistent://t/ns/one": NamespaceBundleStats(msg_rate_in=1e9)},
        )
        assert cuts == [] and alg.split_layout(layout, rng, cuts) is None


# ---- properties ---------------------------------------------------------------------------------
ranges = st.tuples(st.integers(0, FULL_UPPER), st.integers(0, FULL_UPPER)).filter(lambda t: t[1] - t[0] >= 2)
topic_names = st.lists(
    st.text("abcdefghij-0123456789", min_size=1, max_size=12), min_size=0, max_size=40, unique=True
)
rates = st.floats(0, 20_000, allow_nan=False)


def assert_partition(parent: BundleRange, children: list[BundleRange]) -> None:
    assert children[0].lower == parent.lower and children[-1].upper == parent.upper
    for a, b in pairwise(children):
        assert a.upper == b.lower  # contiguous, no overlap, no gap
        assert a.lower < a.upper
    assert children[-1].lower < children[-1].upper


@settings(max_examples=150, deadline=None)
@given(
    bounds=ranges,
    algorithm=st.sampled_from(alg.ALGORITHMS),
    topics=topic_names,
    positions=st.lists(st.integers(0, FULL_UPPER), min_size=1, max_size=6),
    rate_list=st.lists(rates, min_size=40, max_size=40),
)
def test_split_children_partition_the_parent(
    bounds: tuple[int, int], algorithm: str, topics: list[str], positions: list[int], rate_list: list[float]
) -> None:
    parent = BundleRange(*bounds)
    layout = NamespaceBundles("t/ns", tuple(sorted({0, parent.lower, parent.upper, FULL_UPPER})))
    stats = {t: NamespaceBundleStats(msg_rate_in=r) for t, r in zip(topics, rate_list, strict=False)}
    cuts = alg.split_boundaries(algorithm, parent, CFG, topics, positions, stats)
    # Hash-based cuts may fall outside a narrow parent; Pulsar rejects those, and so do we.
    inside = [c for c in cuts if parent.lower < c < parent.upper]
    if inside != cuts:
        with pytest.raises(InvalidInput):
            layout.split(parent, cuts)
        cuts = inside
    new = alg.split_layout(layout, parent, cuts)
    if new is None:
        assert not cuts
        return
    children = [r for r in new.ranges if parent.lower <= r.lower and r.upper <= parent.upper]
    assert_partition(parent, children)
    assert len(new.ranges) == len(layout.ranges) + len(set(cuts))
    others = [r for r in layout.ranges if r != parent]
    assert [r for r in new.ranges if r not in children] == others


@settings(max_examples=100, deadline=None)
@given(bounds=ranges, n=st.integers(2, 16))
def test_split_in_n_partitions(bounds: tuple[int, int], n: int) -> None:
    parent = BundleRange(*bounds)
    cuts = split_in_n(parent, n)
    if parent.width < n:
        return  # segments of width 0: Pulsar cannot split this finely either
    layout = NamespaceBundles("t/ns", tuple(sorted({0, parent.lower, parent.upper, FULL_UPPER})))
    new = layout.split(parent, cuts)
    children = [r for r in new.ranges if parent.lower <= r.lower and r.upper <= parent.upper]
    assert len(children) == n
    assert_partition(parent, children)
