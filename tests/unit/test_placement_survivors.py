"""The fast per-namespace survivors give exactly the explained filter chain's candidates."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.config import LoadBalancerConfig
from balancer.models import BrokerData, LoadData, LocalBrokerData
from balancer.placement import filters as f
from balancer.placement.context import IsolationPolicy, PlacementContext
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.pipeline import PipelineCache, _filter_chain, select_broker
from balancer.placement.survivors import even_distribution_removed, other_class_removed

CLASS = LoadBalancerConfig().loadManagerClassName
NAMESPACES = ["t/a", "t/b", "t/c", "iso/x", "pulsar/system"]
names = st.lists(st.sampled_from([f"b{i}:8080" for i in range(12)]), max_size=14)


@settings(max_examples=200, deadline=None)
@given(
    cands=names, counts=st.dictionaries(st.sampled_from([f"b{i}:8080" for i in range(14)]), st.integers(1, 3))
)
def test_even_distribution_removes_what_the_filter_removes(cands: list[str], counts: dict[str, int]) -> None:
    kept, _ = f.even_distribution_filter(cands, counts)
    removed = even_distribution_removed(frozenset(cands), counts)
    assert [b for b in cands if b not in removed] == kept


@settings(max_examples=200, deadline=None)
@given(cands=names, other=st.sets(st.sampled_from([f"b{i}:8080" for i in range(14)])))
def test_class_filter_removes_what_the_filter_removes(cands: list[str], other: set[str]) -> None:
    load = LoadData(
        broker_data={
            b: BrokerData(
                local_data=LocalBrokerData(load_manager_class_name="other" if b in other else CLASS)
            )
            for b in {*cands, *other}
        }
    )
    kept, _ = f.load_manager_class_filter(cands, load, CLASS)
    removed = other_class_removed(frozenset(cands), other)
    assert [b for b in cands if b not in removed] == kept


@st.composite
def clusters(draw: st.DrawFn) -> tuple[LoadData, PlacementContext, LoadBalancerConfig]:
    n = draw(st.integers(0, 10))
    brokers = [f"{'iso' if i % 4 == 3 else 'h'}{i}:8080" for i in range(n)]
    data = {}
    for b in brokers:
        data[b] = BrokerData(
            local_data=LocalBrokerData(
                num_topics=draw(st.integers(0, 6)),
                load_manager_class_name=draw(st.sampled_from([CLASS, CLASS, "other", None])),
                broker_version_string=draw(st.sampled_from(["4.0.3", "4.0.3", "4.1.0", "", "bad"])),
                persistent_topics_enabled=draw(st.booleans()) or draw(st.booleans()),
            )
        )
    load = LoadData(broker_data=data)
    ranges: dict[str, dict[str, set[str]]] = {}
    for b in brokers:
        for ns in NAMESPACES:
            k = draw(st.integers(0, 3)) if draw(st.booleans()) else 0
            if k:
                ranges.setdefault(b, {})[ns] = {f"0x{i:08x}_0x{i + 1:08x}" for i in range(k)}
    ctx = PlacementContext(
        isolation_policies=[IsolationPolicy("p", ["iso/.*"], ["iso.*"], min_limit=draw(st.integers(0, 3)))],
        anti_affinity_groups={"t/b": "g", "t/c": "g"} if draw(st.booleans()) else {},
        failure_domains={b: draw(st.sampled_from(["d1", "d2"])) for b in brokers},
        bundle_ranges=ranges,
        available_brokers=brokers + (["ghost:8080"] if draw(st.booleans()) else []),
    )
    config = LoadBalancerConfig.from_dict(
        {
            "loadBalancerBrokerMaxTopics": draw(st.integers(0, 6)),
            "loadBalancerDistributeBundlesEvenlyEnabled": draw(st.booleans()),
            "preferLaterVersions": draw(st.booleans()),
            "failureDomainsEnabled": draw(st.booleans()),
        }
    )
    return load, ctx, config


@settings(max_examples=150, deadline=None)
@given(cluster=clusters())
def test_survivors_match_the_explained_chain(
    cluster: tuple[LoadData, PlacementContext, LoadBalancerConfig],
) -> None:
    load, ctx, config = cluster
    cache = PipelineCache(load, config, ctx)
    for ns in NAMESPACES:
        bundle = f"{ns}/0x00000000_0xffffffff"
        policy, cands, _ = _filter_chain(ns, bundle, load, config, ctx, PipelineCache(load, config, ctx))
        fast = cache.survivors(ns, bundle)
        assert fast.policy == policy
        assert fast.as_list() == cands
        assert len(fast) == len(cands)
        for b in [*ctx.brokers(load), "nobody:1"]:
            assert (b in fast) == (b in cands)


@settings(max_examples=60, deadline=None)
@given(cluster=clusters(), seed=st.integers(0, 1000))
def test_cycle_decisions_match_one_shot_decisions(
    cluster: tuple[LoadData, PlacementContext, LoadBalancerConfig], seed: int
) -> None:
    """With a shared cache the steps are explained lazily; they and the choice match a one-shot call."""
    load, ctx, config = cluster
    cache = PipelineCache(load, config, ctx)
    for ns in NAMESPACES:
        bundle = f"{ns}/0x00000000_0xffffffff"
        bound = random.Random(seed).choice([*ctx.brokers(load), None])
        args = (bundle, load, config, LeastLongTermMessageRate(), ctx)
        lazy = select_broker(*args, random.Random(seed), cache=cache, bound_destination=bound)
        eager = select_broker(*args, random.Random(seed), bound_destination=bound)
        assert lazy == eager
