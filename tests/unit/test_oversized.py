"""The fill's rule for a bundle bigger than every destination's room (balancer/shedding/oversized.py,
issue 31): a direct move to a broker of larger capacity, and the first half of a swap."""

from __future__ import annotations

import math

import pytest

from balancer.models import LoadData, ResourceUsage
from balancer.shedding import oversized
from balancer.shedding.balanced import BalancedShedder
from balancer.shedding.base import SheddingResult
from tests.unit.test_balanced_strategy import CONFIG, cluster


def _hot_a_beside(name: str, cpu: float, rates: list[float]) -> tuple[LoadData, BalancedShedder]:
    """a (one capacity) holds two bundles of 4,500 at 90% beside b and c at 50% and one more broker;
    the shedder runs the fill alone (the rule under test is the fill's)."""
    load = cluster(
        {
            "a": (90.0, [4500.0, 4500.0]),
            "b": (50.0, [500.0] * 10),
            "c": (50.0, [500.0] * 10),
            name: (cpu, rates),
        }
    )
    if name == "big":
        _twice_the_size(load, name)
    s = BalancedShedder()
    s.exact = False
    return load, s


def _twice_the_size(load: LoadData, broker: str) -> LoadData:
    """``broker`` declares twice the others' CPU limit, as a broker of twice the cores reports it (brokers
    declaring one size share one capacity estimate: balancer/shedding/capacity.py); its usage in percent
    stays what the test gives."""
    local = load.broker_data[broker].local_data
    local.cpu = ResourceUsage(usage=local.cpu.usage * 2, limit=local.cpu.limit * 2)
    return load


def _until_moves(s: BalancedShedder, load: LoadData, calls: int) -> SheddingResult:
    r = s.find_bundles_for_unloading(load, CONFIG)
    for _ in range(calls):
        if r.unloads:
            break
        r = s.find_bundles_for_unloading(load, CONFIG)
    return r


def test_a_bundle_bigger_than_every_room_goes_to_a_bigger_broker_when_that_lowers_the_peak() -> None:
    # big is twice the capacity (7,000 at 35%). Neither of a's bundles fits any destination's room or
    # the pair's gap, so the fill alone drains nothing and a stays at 90. Moved to big, one of them
    # leaves the pair's peak at 57.5 (issue 31).
    load, s = _hot_a_beside("big", 35.0, [700.0] * 10)
    r = _until_moves(s, load, CONFIG.loadBalancerAvgShedderHitCountLowThreshold)
    assert list(r.unloads) == ["a"] and len(r.unloads["a"]) == 1
    assert r.destinations[r.unloads["a"][0]] == "big"


def test_no_bigger_home_for_a_bundle_when_the_destination_is_no_bigger() -> None:
    # The same hot broker beside standard brokers only (d: 3,500 at 35%): moving a 4,500 bundle whole
    # trades one hot broker for another, so nothing of a moves.
    load, s = _hot_a_beside("d", 35.0, [350.0] * 10)
    for _ in range(CONFIG.loadBalancerAvgShedderHitCountLowThreshold + 1):
        r = s.find_bundles_for_unloading(load, CONFIG)
        assert "a" not in r.unloads


def _lone_a() -> LoadData:
    """a (100 msg/s a point) holds one bundle of 6,000 at 60%, beside b and c at 50% and big (twice
    the capacity) at 40% with ten bundles of 800. Moved whole, a's bundle would leave big at 70, above
    where a stood: no direct move lowers the pair's peak. a stands 1.33x above the rest's mean (45),
    and the pair's common level is 46.7."""
    load = cluster(
        {
            "a": (60.0, [6000.0]),
            "b": (50.0, [500.0] * 10),
            "c": (50.0, [500.0] * 10),
            "big": (40.0, [800.0] * 10),
        }
    )
    return _twice_the_size(load, "big")


def test_a_lone_bundle_pinning_its_broker_swaps_onto_a_bigger_broker() -> None:
    load = _lone_a()
    s = BalancedShedder()
    s.exact = False
    r = _until_moves(s, load, 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold)
    assert r.unloads == {"a": ["t/a/0x00000000_0x00000001"]}
    assert r.destinations["t/a/0x00000000_0x00000001"] == "big"
    why = next(d.message for d in r.decisions if d.subject == "t/a/0x00000000_0x00000001")
    assert "first half of a swap" in why


def test_no_swap_without_the_rule_or_without_traffic_to_give_back(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold
    # The swap switched off: a's bundle fits nowhere and nothing of a moves.
    with monkeypatch.context() as m:
        m.setattr(oversized, "SWAP_ABOVE_REST", math.inf)
        s = BalancedShedder()
        s.exact = False
        load = _lone_a()
        for _ in range(calls):
            assert "a" not in s.find_bundles_for_unloading(load, CONFIG).unloads
    # big's bundles all arrived recently (they may not move again): big could not give back the
    # 2,000 msg/s that would take it below where a stood, so the swap would only trade places.
    load = _lone_a()
    load.recently_unloaded_bundles = {b: 0 for b in load.broker_data["big"].local_data.bundles}
    s = BalancedShedder()
    s.exact = False
    for _ in range(calls):
        assert "a" not in s.find_bundles_for_unloading(load, CONFIG).unloads


def _a_at(rate: float) -> LoadData:
    """a (100 msg/s a point) holds one bundle of ``rate`` beside b and c at 45% and big (twice the
    capacity) at 45%: at 5,000 a stands 1.11x above the rest's mean (a slow drift, no swap), at 5,700
    1.27x (above SWAP_ABOVE_REST)."""
    load = cluster(
        {
            "a": (rate / 100, [rate]),
            "b": (45.0, [450.0] * 10),
            "c": (45.0, [450.0] * 10),
            "big": (45.0, [900.0] * 10),
        }
    )
    return _twice_the_size(load, "big")


def test_one_report_above_the_swap_line_does_not_start_a_swap() -> None:
    # a's drift count fires after 16 calls at 1.11x the rest (balanced enough: nothing moves). Then one
    # report at 1.27x: a swap on it would empty a for a lone bundle's one-interval excursion (generated
    # heterogeneous #50: a swap started on such a report in the run's last cycles, the broker left
    # empty). Its smoothed level stays under the line, so nothing moves; kept there, a swaps.
    s = BalancedShedder()
    s.exact = False
    for _ in range(2 * CONFIG.loadBalancerAvgShedderHitCountLowThreshold + 2):
        assert s.find_bundles_for_unloading(_a_at(5000.0), CONFIG).count == 0
    first = s.find_bundles_for_unloading(_a_at(5700.0), CONFIG)
    assert first.brokers["a"].reason == "triggered"
    assert first.count == 0
    later = _until_moves(s, _a_at(5700.0), CONFIG.loadBalancerAvgShedderHitCountLowThreshold)
    assert later.unloads == {"a": ["t/a/0x00000000_0x00000001"]}
    assert "first half of a swap" in next(d.message for d in later.decisions)
