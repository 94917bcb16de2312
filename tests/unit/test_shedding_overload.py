"""OverloadShedder: threshold boundary, cover rule, single-bundle protection, edges."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig
from balancer.shedding.base import SheddingResult
from balancer.shedding.overload import OverloadShedder
from tests.unit.shedding_util import MB, broker, bundle, cluster


def _run(cpu: float, sizes: dict[str, float], tp: float = 1000 * MB) -> SheddingResult:
    load = cluster(
        {"a": broker(cpu=cpu, tp=tp, bundles=sizes), "b": broker(cpu=10)},
        {n: bundle(tp=v) for n, v in sizes.items()},
    )
    return OverloadShedder().find_bundles_for_unloading(load, LoadBalancerConfig())


def test_target_is_excess_plus_five_points_of_throughput() -> None:
    result = _run(95, {"x": 100 * MB, "y": 60 * MB, "z": 40 * MB, "w": 10 * MB})
    # usage 0.95 (float32), threshold 0.85 -> 15 % of 1000 MB = 150 MB: 100, then 160 >= 150.
    assert result.brokers["a"].numbers["target"] == pytest.approx(150 * MB, rel=1e-6)
    assert result.unloads == {"a": ["x", "y"]}


def test_exactly_at_threshold_is_overloaded_and_just_below_is_not() -> None:
    sizes = {"x": 30 * MB, "y": 20 * MB}
    at = _run(85, sizes)
    assert at.brokers["a"].reason == "overloaded"
    # target = 5 % of 1000 MB = 50 MB: 30 MB does not cover it, so 20 MB more is taken.
    assert at.brokers["a"].numbers["target"] == pytest.approx(50 * MB, rel=1e-5)
    assert at.unloads == {"a": ["x", "y"]}
    below = _run(84.9, sizes)
    assert below.count == 0
    assert below.brokers["a"].reason == "not_overloaded"


def test_zero_traffic_overloaded_broker_still_sheds_one_bundle() -> None:
    # Target 0: the cover rule always takes at least one bundle.
    result = _run(99, {"x": 0.0, "y": 0.0}, tp=0.0)
    assert result.count == 1


@pytest.mark.parametrize("sizes", [{}, {"only": 500 * MB}])
def test_single_or_no_bundle_is_protected(sizes: dict[str, float]) -> None:
    result = _run(99, sizes)
    assert result.count == 0
    assert result.brokers["a"].reason == ("single_bundle" if sizes else "no_bundles")


def test_memory_is_not_part_of_the_overload_score() -> None:
    load = cluster(
        {"a": broker(memory=99, cpu=10, tp=MB, bundles=["x", "y"]), "b": broker()},
        {"x": bundle(tp=MB), "y": bundle(tp=MB)},
    )
    assert OverloadShedder().find_bundles_for_unloading(load, LoadBalancerConfig()).count == 0


def test_empty_and_one_broker_clusters() -> None:
    conf = LoadBalancerConfig()
    assert OverloadShedder().find_bundles_for_unloading(cluster({}), conf).count == 0
    one = cluster({"a": broker(cpu=99, tp=MB, bundles=["x", "y"])}, {"x": bundle(tp=MB), "y": bundle(tp=MB)})
    # The strategy itself does not care about cluster size (the leader rule does).
    assert OverloadShedder().find_bundles_for_unloading(one, conf).count >= 1
