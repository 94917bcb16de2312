"""Placement strategies beyond the vectors: fallbacks, missing data, determinism, state handling."""

from __future__ import annotations

import random

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData, ResourceUsage
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from balancer.placement.registry import create_placement
from balancer.placement.round_robin import RoundRobinBrokerSelector
from balancer.shedding.avg import AvgShedder

CFG = LoadBalancerConfig()


def broker(cpu: float, lt_rate: float = 0.0, bundles: int = 1, rate: float = 100.0) -> BrokerData:
    ld = LocalBrokerData(
        cpu=ResourceUsage(usage=cpu, limit=100),
        bundles={f"t/n/0x{i:08x}_0x{i + 1:08x}" for i in range(bundles)},
        msg_rate_in=rate,
    )
    bd = BrokerData(local_data=ld)
    bd.time_average_data.long_term_msg_rate_in = lt_rate
    return bd


def load_of(**brokers: BrokerData) -> LoadData:
    return LoadData(broker_data=dict(brokers))


def pick(strategy, cands, load, seed=1):  # type: ignore[no-untyped-def]
    return strategy.select_broker(
        cands, "t/n/0x00000000_0xffffffff", BundleData(), load, CFG, random.Random(seed)
    )


class TestLeastLongTermMessageRate:
    def test_least_rate_wins_and_explains(self) -> None:
        load = load_of(a=broker(10, 300), b=broker(10, 100), c=broker(10, 200))
        choice = pick(LeastLongTermMessageRate(), ["a", "b", "c"], load)
        assert choice.broker == "b"
        assert choice.explanation.reason == "least_long_term_message_rate"
        assert choice.explanation.numbers["score"] == 100

    def test_preallocated_bundles_count(self) -> None:
        load = load_of(a=broker(10, 100), b=broker(10, 150))
        hot = BundleData()
        hot.long_term_data.msg_rate_in, hot.long_term_data.msg_rate_out = 80.0, 0.0
        load.broker_data["a"].preallocated_bundle_data["t/n/x"] = hot
        assert pick(LeastLongTermMessageRate(), ["a", "b"], load).broker == "b"

    def test_overloaded_ranked_last(self) -> None:
        load = load_of(a=broker(90, 0), b=broker(10, 10_000))
        assert pick(LeastLongTermMessageRate(), ["a", "b"], load).broker == "b"

    def test_all_overloaded_chooses_among_all(self) -> None:
        load = load_of(a=broker(90, 0), b=broker(95, 10))
        seen = {pick(LeastLongTermMessageRate(), ["a", "b"], load, seed).broker for seed in range(30)}
        assert seen == {"a", "b"}
        assert pick(LeastLongTermMessageRate(), ["a", "b"], load).explanation.reason == "all_overloaded"

    def test_broker_missing_data_is_never_preferred(self) -> None:
        load = load_of(a=broker(50, 1e9))
        assert pick(LeastLongTermMessageRate(), ["ghost", "a"], load).broker == "a"

    def test_empty_candidates(self) -> None:
        choice = pick(LeastLongTermMessageRate(), [], load_of())
        assert choice.broker is None and choice.explanation.reason == "no_candidates"

    def test_seeded_tie_break_is_deterministic(self) -> None:
        load = load_of(**{n: broker(10, 5) for n in "abcdef"})
        runs = [
            [pick(LeastLongTermMessageRate(), list("abcdef"), load, s).broker for s in range(10)]
            for _ in range(2)
        ]
        assert runs[0] == runs[1]
        assert len(set(runs[0])) > 1


class TestLeastResourceUsageWithWeight:
    def test_all_equal_falls_back_to_all(self) -> None:
        load = load_of(a=broker(50), b=broker(50))
        choice = pick(LeastResourceUsageWithWeight(), ["a", "b"], load)
        assert choice.explanation.reason == "all_overloaded_fallback"
        assert choice.broker in {"a", "b"}

    def test_all_overloaded_still_places(self) -> None:
        load = load_of(a=broker(97), b=broker(99))
        choice = pick(LeastResourceUsageWithWeight(), ["a", "b"], load)
        assert choice.broker in {"a", "b"}
        assert choice.explanation.numbers["overloaded"] == 2

    def test_history_smooths_and_resets_without_traffic(self) -> None:
        s = LeastResourceUsageWithWeight()
        pick(s, ["a", "b"], load_of(a=broker(10), b=broker(50)))
        pick(s, ["a", "b"], load_of(a=broker(30), b=broker(50, rate=0)))
        assert s.history["a"] == pytest.approx(0.9 * 0.1 + 0.1 * 0.3)
        assert s.history["b"] == pytest.approx(0.5)  # no traffic: history forgotten, current usage taken

    def test_missing_data_skipped(self) -> None:
        s = LeastResourceUsageWithWeight()
        choice = pick(s, ["ghost", "a", "b"], load_of(a=broker(10), b=broker(60)))
        assert choice.broker == "a"
        assert "ghost" not in s.history
        assert choice.explanation.numbers["without_data"] == 1

    def test_departed_brokers_forgotten(self) -> None:
        s = LeastResourceUsageWithWeight(history={"a": 0.1, "gone": 0.2})
        s.on_active_brokers_change({"a"})
        assert s.history == {"a": 0.1}

    def test_empty(self) -> None:
        assert pick(LeastResourceUsageWithWeight(), [], load_of()).broker is None


class TestRoundRobin:
    def test_cycles_and_survives_broker_departure(self) -> None:
        rr = RoundRobinBrokerSelector()
        got = [pick(rr, ["a", "b", "c"], load_of()).broker for _ in range(4)]
        assert got == ["a", "b", "c", "a"]
        rr.on_active_brokers_change({"a", "c"})
        assert pick(rr, ["a", "c"], load_of()).broker == "a"  # counter 4 % 2 = 0
        assert pick(rr, ["a", "c"], load_of()).broker == "c"
        assert rr.counter == 6


class TestRegistry:
    @pytest.mark.parametrize(
        "name",
        [
            "LeastLongTermMessageRate",
            "org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight",
        ],
    )
    def test_names(self, name: str) -> None:
        assert create_placement(name).name == name.rsplit(".", 1)[-1]

    def test_avg_shedder_is_the_same_instance(self) -> None:
        shedder = AvgShedder()
        assert create_placement("org.apache.pulsar.broker.loadbalance.impl.AvgShedder", shedder) is shedder

    def test_avg_shedder_without_instance_refused(self) -> None:
        with pytest.raises(InvalidInput, match="AvgShedder"):
            create_placement("AvgShedder")

    def test_unknown(self) -> None:
        with pytest.raises(InvalidInput) as e:
            create_placement("LeastBusy")
        assert e.value.field == "loadBalancerLoadPlacementStrategy"
