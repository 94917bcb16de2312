"""The pure long-term reference: Pulsar's window, its closed form, window stats and capacity fits."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.errors import InvalidInput
from balancer.longterm import (
    HOUR_MS,
    BrokerSample,
    BundleSample,
    capacity_by_broker,
    closed_form_weight,
    is_valid_broker_sample,
    least_squares,
    long_term_by_bundle,
    long_term_message_data,
    percentile_nearest_rank,
    pulsar_long_term,
)
from balancer.models import TimeAverageMessageData


def _samples(values: list[float], bundle: str = "t/ns/0x00000000_0xffffffff") -> list[BundleSample]:
    return [BundleSample(bundle, 1000 * i, v, 2 * v, 10 * v, 20 * v) for i, v in enumerate(values)]


def test_spec_example_short_window() -> None:
    # placement-split-spec §d: maxSamples 10, samples 100..1200 -> 550 at the 10th, then 605, 664.5
    got = pulsar_long_term(_samples([100.0 * k for k in range(1, 13)]), max_samples=10)
    assert got.msg_rate_in == pytest.approx(664.5)
    assert got.num_samples == 10


def test_first_sample_replaces_seed_and_order_is_by_time() -> None:
    rows = _samples([5.0, 7.0])
    shuffled = [rows[1], rows[0]]
    got = pulsar_long_term(shuffled, max_samples=1)
    # with maxSamples 1 only the latest sample in time survives, whatever the input order
    assert got.msg_rate_in == 7.0
    assert got.msg_throughput_out == 140.0


@pytest.mark.parametrize(
    "count,max_samples", [(1, 1000), (7, 1000), (1000, 1000), (1001, 1000), (2600, 1000)]
)
def test_closed_form_matches_sequential(count: int, max_samples: int) -> None:
    rng = random.Random(count)
    values = [rng.uniform(0, 1000) for _ in range(count)]
    seq = pulsar_long_term(_samples(values), max_samples=max_samples)
    closed = math.fsum(closed_form_weight(i + 1, count, max_samples) * v for i, v in enumerate(values))
    assert closed == pytest.approx(seq.msg_rate_in, rel=1e-9)
    weights = [closed_form_weight(i + 1, count, max_samples) for i in range(count)]
    # an average of a constant is the constant: weights sum to 1 below the cap and past it
    assert math.fsum(weights) == pytest.approx(1.0, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=60),
    cap=st.integers(min_value=1, max_value=20),
)
def test_closed_form_property(values: list[float], cap: int) -> None:
    seq = pulsar_long_term(_samples(values), max_samples=cap)
    n = len(values)
    closed = math.fsum(closed_form_weight(i + 1, n, cap) * v for i, v in enumerate(values))
    assert closed == pytest.approx(seq.msg_rate_in, rel=1e-9, abs=1e-9)


def test_closed_form_rejects_bad_rank() -> None:
    with pytest.raises(InvalidInput, match="rank"):
        closed_form_weight(0, 5)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile_nearest_rank(values) == 95.0
    assert percentile_nearest_rank([3.0]) == 3.0
    assert percentile_nearest_rank([1.0, 2.0], 0.5) == 1.0
    with pytest.raises(InvalidInput, match="values"):
        percentile_nearest_rank([])


def test_bad_rows_are_counted_and_skipped() -> None:
    good = _samples([1.0, 2.0, 3.0])
    bad = [
        BundleSample(None, 5, 1.0, 1.0, 1.0, 1.0),
        BundleSample("t/ns/b", 5, math.nan, 1.0, 1.0, 1.0),
        BundleSample("t/ns/b", 5, 1.0, -1.0, 1.0, 1.0),
        BundleSample("t/ns/b", None, 1.0, 1.0, 1.0, 1.0),
        BundleSample("t/ns/b", 5, 1.0, 1.0, math.inf, 1.0),
    ]
    results, skipped = long_term_by_bundle(good + bad)
    assert skipped == len(bad)
    assert list(results) == [good[0].bundle]
    r = results[str(good[0].bundle)]
    assert r.samples == 3
    assert r.mean[0] == pytest.approx(2.0)
    assert r.pulsar.msg_rate_in == pytest.approx(2.0)


def test_peak_hour_and_modes() -> None:
    b = "t/ns/0x00000000_0x80000000"
    rows = [
        BundleSample(b, h * HOUR_MS + k, 10.0 if h != 13 else 99.0, 0.0, 1.0, 1.0)
        for h in range(24)
        for k in (0, 1)
    ]
    results, _ = long_term_by_bundle(rows)
    r = results[b]
    assert r.peak_hour == 13
    assert r.peak_hour_msg_rate == pytest.approx(99.0)
    mean = long_term_message_data(r, "mean")
    assert mean.num_samples == 48
    assert mean.msg_rate_in == pytest.approx((46 * 10.0 + 2 * 99.0) / 48)
    # 48 samples: the 46th smallest is the p95, and only 2 are at the peak
    assert long_term_message_data(r, "p95").msg_rate_in == 10.0
    assert isinstance(long_term_message_data(r, "pulsar"), TimeAverageMessageData)
    with pytest.raises(InvalidInput, match="mode"):
        long_term_message_data(r, "median")


def test_capacity_fit_recovers_a_line() -> None:
    rows = [
        BrokerSample(
            "b1", i, cpu, 200.0, 3.0 * (cpu / 2.0) + 5.0, 2.0, 600.0 * (cpu / 2.0), 400.0 * (cpu / 2.0)
        )
        for i, cpu in enumerate(range(10, 190, 10))
    ]
    rows.append(BrokerSample("b2", 0, 50.0, 0.0, 1.0, 0.0, 1.0, 0.0))  # no CPU limit: no percentage
    rows.append(BrokerSample("b3", 0, 50.0, 100.0, 1.0, 0.0, 1.0, 0.0))  # one point: no line
    fits, bad = capacity_by_broker(rows)
    assert bad == 1
    f = fits["b1"]
    assert f.msg_rate_per_cpu_point == pytest.approx(3.0)
    assert f.msg_rate_intercept == pytest.approx(7.0)
    assert f.throughput_per_cpu_point == pytest.approx(1000.0)
    assert fits["b3"].msg_rate_per_cpu_point is None
    assert least_squares([1.0, 1.0], [2.0, 3.0]) is None


def _broker(**over: float | None) -> BrokerSample:
    fields: dict[str, float | None] = {
        "cpu_usage": 10.0,
        "cpu_limit": 100.0,
        "msg_rate_in": 1.0,
        "msg_rate_out": 1.0,
        "msg_throughput_in": 1.0,
        "msg_throughput_out": 1.0,
    }
    fields.update(over)
    return BrokerSample("b9", 7, **fields)  # type: ignore[arg-type]


# Each of these has a finite, non-negative sum (or would, summed the old way) and one bad field.
BAD_BROKER_FIELDS = [
    {"msg_rate_in": -5.0, "msg_rate_out": 1e4},  # a negative field compensated by its partner
    {"msg_throughput_out": -1.0, "msg_throughput_in": 3.0},
    {"msg_rate_out": math.inf},  # an infinite field
    {"msg_throughput_in": math.nan},
    {"cpu_usage": -1.0},
    {"cpu_limit": 0.0},  # Pulsar's {0,0} default: no percentage
    {"cpu_limit": math.inf},
    {"msg_rate_in": None},
    {"msg_rate_in": 1e308, "msg_rate_out": 1e308},  # two good fields whose sum overflows
    {"cpu_limit": 5e-324, "cpu_usage": 1.0},  # a good usage over a subnormal limit: infinite percentage
]


@pytest.mark.parametrize("over", BAD_BROKER_FIELDS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_broker_rows_are_validated_field_by_field(over: dict[str, float | None]) -> None:
    assert is_valid_broker_sample(_broker())
    bad = _broker(**over)
    assert not is_valid_broker_sample(bad)
    # and such a row cannot bend the fit: it is counted and left out
    rows = [_broker(cpu_usage=float(c), msg_rate_in=float(c)) for c in (10, 20, 30)] + [bad]
    fits, skipped = capacity_by_broker(rows)
    assert skipped == 1 and fits["b9"].samples == 3
    assert fits["b9"].msg_rate_per_cpu_point == pytest.approx(1.0)
