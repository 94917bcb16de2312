"""LeastResourceUsageWithWeight inside a cycle scope makes exactly the per-call decisions and history."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.config import LoadBalancerConfig
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData, ResourceUsage
from balancer.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight

POOL = [f"b{i}:8080" for i in range(9)]


@st.composite
def setups(draw: st.DrawFn) -> tuple[LoadData, dict[str, float], list[list[str]], list[int], bool]:
    data = {}
    for b in draw(st.lists(st.sampled_from(POOL), unique=True, min_size=1)):
        usage = draw(st.floats(0, 120, allow_nan=False))
        data[b] = BrokerData(
            local_data=LocalBrokerData(
                cpu=ResourceUsage(usage=usage, limit=100),
                bandwidth_in=ResourceUsage(usage=draw(st.floats(0, 90)), limit=100),
                bundles=["t/ns/0x00000000_0xffffffff"] if draw(st.booleans()) else [],
                msg_rate_in=draw(st.sampled_from([0.0, 0.0, 5.0])),
            )
        )
    history = draw(st.dictionaries(st.sampled_from(POOL), st.floats(0, 1.2)))
    lists = draw(st.lists(st.lists(st.sampled_from(POOL), max_size=9), min_size=1, max_size=4))
    calls = draw(st.lists(st.integers(0, len(lists) - 1), min_size=1, max_size=25))
    return LoadData(broker_data=data), history, lists, calls, draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(setup=setups(), seed=st.integers(0, 10_000), diff=st.sampled_from([0, 5, 10, 40]))
def test_scoped_calls_match_per_call_calls(
    setup: tuple[LoadData, dict[str, float], list[list[str]], list[int], bool], seed: int, diff: int
) -> None:
    load, history, lists, calls, peek = setup
    config = LoadBalancerConfig.from_dict(
        {"loadBalancerAverageResourceUsageDifferenceThresholdPercentage": diff}
    )
    plain, scoped = LeastResourceUsageWithWeight(history), LeastResourceUsageWithWeight(history)
    rng_a, rng_b = random.Random(seed), random.Random(seed)
    bd = BundleData.default()
    with scoped.cycle_scope(load, config):
        for k, which in enumerate(calls):
            cands = lists[which]  # the same list objects recur, as the pipeline's do
            a = plain.select_broker(cands, "t/ns/x", bd, load, config, rng_a)
            b = scoped.select_broker(cands, "t/ns/x", bd, load, config, rng_b)
            assert a == b
            if peek and k % 3 == 1:
                assert scoped.history == plain.history  # reading mid-scope writes back and re-reads
    assert scoped.history == plain.history


@settings(max_examples=15, deadline=None)
@given(setup=setups(), seed=st.integers(0, 10_000))
def test_scoped_calls_match_past_the_fixed_points(
    setup: tuple[LoadData, dict[str, float], list[list[str]], list[int], bool], seed: int
) -> None:
    """Hundreds of calls: h reaches its fixed point and the scope starts reusing whole results."""
    load, history, lists, _, _ = setup
    config = LoadBalancerConfig()
    plain, scoped = LeastResourceUsageWithWeight(history), LeastResourceUsageWithWeight(history)
    rng_a, rng_b, pick = random.Random(seed), random.Random(seed), random.Random(seed + 1)
    bd = BundleData.default()
    with scoped.cycle_scope(load, config):
        for _ in range(600):
            cands = lists[pick.randrange(len(lists))]
            a = plain.select_broker(cands, "t/ns/x", bd, load, config, rng_a)
            assert a == scoped.select_broker(cands, "t/ns/x", bd, load, config, rng_b)
    assert scoped.history == plain.history
