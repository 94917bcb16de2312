"""The leader's rules around a strategy, and selecting strategies by name."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput
from balancer.models import LoadData
from balancer.shedding import AvgShedder, ThresholdShedder, create_shedder, shed
from balancer.shedding.base import SheddingResult
from tests.unit.shedding_util import MB, broker, bundle, cluster

NOW = 10_000_000_000


class Recorder:
    name = "Recorder"

    def __init__(self) -> None:
        self.calls: list[set[str]] = []
        self.active: list[set[str]] = []

    def find_bundles_for_unloading(self, load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        self.calls.append(set(load.recently_unloaded_bundles))
        return SheddingResult()

    def on_active_brokers_change(self, active: set[str]) -> None:
        self.active.append(active)


def _two() -> LoadData:
    return cluster({"a": broker(), "b": broker()})


def test_grace_period_prunes_strictly_older_entries() -> None:
    conf = LoadBalancerConfig()  # 30 minutes
    grace = 30 * 60_000
    load = _two()
    load.recently_unloaded_bundles.update({"old": NOW - grace - 1, "edge": NOW - grace, "new": NOW - 5})
    rec = Recorder()
    result = shed(load, conf, rec, NOW)
    assert rec.calls == [{"edge", "new"}]
    assert set(load.recently_unloaded_bundles) == {"edge", "new"}
    assert result.summary.numbers["releasedFromGracePeriod"] == 1


@pytest.mark.parametrize("key", ["loadBalancerSheddingEnabled", "loadBalancerEnabled"])
def test_disabled_shedding_does_not_call_the_strategy(key: str) -> None:
    rec = Recorder()
    result = shed(_two(), LoadBalancerConfig(**{key: False}), rec, NOW)
    assert rec.calls == [] and result.count == 0
    assert result.summary.reason == "shedding_disabled"


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_brokers_returns_empty_with_reason(n: int) -> None:
    rec = Recorder()
    load = cluster({f"b{i}": broker() for i in range(n)})
    result = shed(load, LoadBalancerConfig(), rec, NOW)
    assert rec.calls == [] and result.summary.reason == "too_few_brokers"


def test_state_of_departed_brokers_is_dropped_before_the_strategy_runs() -> None:
    shedder = ThresholdShedder()
    shedder.history["gone"] = 0.9
    shed(_two(), LoadBalancerConfig(), shedder, NOW)
    assert set(shedder.history) == {"a", "b"}


def test_recently_unloaded_bundle_is_protected_until_grace_period_ends() -> None:
    names = ["x", "y", "z"]
    load = cluster(
        {"a": broker(cpu=95, tp=900 * MB, bundles=names), "b": broker(cpu=5)},
        {"x": bundle(tp=500 * MB), "y": bundle(tp=300 * MB), "z": bundle(tp=100 * MB)},
    )
    conf = LoadBalancerConfig(loadBalancerLoadSheddingStrategy="OverloadShedder")
    load.recently_unloaded_bundles["x"] = NOW
    strategy = create_shedder(conf.loadBalancerLoadSheddingStrategy)
    assert "x" not in shed(load, conf, strategy, NOW + 60_000).unloads["a"]
    assert shed(load, conf, strategy, NOW + conf.grace_period_ms + 1).unloads["a"][0] == "x"


def test_registry_accepts_class_and_short_names_and_returns_fresh_instances() -> None:
    full = create_shedder("org.apache.pulsar.broker.loadbalance.impl.AvgShedder")
    assert isinstance(full, AvgShedder)
    assert create_shedder("AvgShedder") is not full
    for name in ("OverloadShedder", "ThresholdShedder", "UniformLoadShedder"):
        assert create_shedder(name).name == name


@pytest.mark.parametrize("name", ["NoSuchShedder", "com.example.ThresholdShedder", ""])
def test_registry_rejects_unknown_names(name: str) -> None:
    with pytest.raises(InvalidInput) as err:
        create_shedder(name)
    assert err.value.field == "loadBalancerLoadSheddingStrategy"
