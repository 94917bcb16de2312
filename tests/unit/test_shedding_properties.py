"""Properties every strategy must keep, on random clusters over several calls of one instance."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.bundles import is_system_bundle
from balancer.config import LoadBalancerConfig
from balancer.shedding.registry import create_shedder
from tests.unit.shedding_util import MB, broker, bundle, cluster

# Strategies that never shed a broker's only bundle (AvgShedder does not protect it).
PROTECTS_SOLE_BUNDLE = {"OverloadShedder", "ThresholdShedder", "UniformLoadShedder"}
PULSAR_SHEDDERS = sorted(PROTECTS_SOLE_BUNDLE | {"AvgShedder"})
BUNDLE_NAMES = [f"tenant/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(14)] + [
    "pulsar/system/0x00000000_0xffffffff",
    "pulsar/standalone/localhost:8080/0x00000000_0xffffffff",
]

usage = st.sampled_from([0.0, 5.0, 20.0, 30.0, 45.0, 60.0, 80.0, 85.0, 95.0, 140.0])
traffic = st.sampled_from([0.0, 1.0, 500.0, 2000.0, 20 * MB, 200 * MB])


@st.composite
def rounds(draw: st.DrawFn) -> list[dict[str, Any]]:
    n_brokers = draw(st.integers(0, 5))
    names = draw(st.permutations(BUNDLE_NAMES))
    # Each bundle has at most one owner; some bundles are owned by nobody.
    owner = [draw(st.integers(-1, n_brokers - 1)) if n_brokers else -1 for _ in names]
    out = []
    for _ in range(draw(st.integers(1, 3))):
        brokers = {}
        for b in range(n_brokers):
            owned = [n for n, o in zip(names, owner, strict=True) if o == b]
            brokers[f"broker-{b}"] = broker(
                cpu=draw(usage),
                bw_in=draw(usage),
                bw_out=draw(usage),
                rate=draw(traffic),
                tp=draw(traffic),
                bundles=owned,
            )
        # Some owned bundles have no data yet: they count as owned but are never candidates.
        data = {n: bundle(rate=draw(traffic), tp=draw(traffic)) for n in names if draw(st.integers(0, 5))}
        recent = {n: 1 for n in names if draw(st.integers(0, 3)) == 0}
        out.append({"brokers": brokers, "bundles": data, "recent": recent})
    return out


CONFIGS = [
    LoadBalancerConfig(),
    LoadBalancerConfig(
        lowerBoundarySheddingEnabled=True,
        loadBalancerBundleUnloadMinThroughputThreshold=0,
        minUnloadMessage=0,
        minUnloadMessageThroughput=0,
        maxUnloadPercentage=0.5,
        loadBalancerAvgShedderHitCountHighThreshold=1,
        loadBalancerAvgShedderHitCountLowThreshold=1,
    ),
]


@settings(max_examples=150, deadline=None)
@given(rounds(), st.sampled_from(PULSAR_SHEDDERS), st.sampled_from(CONFIGS))
def test_never_unloads_foreign_recent_system_or_protected_bundles(
    spec: list[dict[str, Any]], name: str, conf: LoadBalancerConfig
) -> None:
    strategy = create_shedder(name)
    for rnd in spec:
        load = cluster(rnd["brokers"], rnd["bundles"], rnd["recent"])
        result = strategy.find_bundles_for_unloading(load, conf)
        seen: set[str] = set()
        for source, bundles in result.unloads.items():
            owned = load.broker_data[source].local_data.bundles
            for b in bundles:
                assert b in owned, f"{name} unloaded {b} which {source} does not own"
                assert b not in load.recently_unloaded_bundles, f"{name} unloaded recently unloaded {b}"
                assert not is_system_bundle(b), f"{name} unloaded system bundle {b}"
                assert b not in seen
                seen.add(b)
            if name in PROTECTS_SOLE_BUNDLE:
                assert len(owned) > 1, f"{name} unloaded the only bundle of {source}"
        assert len(result.decisions) == result.count
        assert [d.subject for d in result.decisions] == [b for _, b in result.bundles()]
        # Every broker considered is explained, and nothing else is.
        assert set(result.brokers) == set(load.broker_data)
        for bundle_name, dest in result.destinations.items():
            assert bundle_name in seen and dest in load.broker_data
            assert bundle_name not in load.broker_data[dest].local_data.bundles
