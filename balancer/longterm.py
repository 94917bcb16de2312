"""Long-term bundle traffic and broker capacity computed from recorded history (pure reference).

The Spark job (``service/longterm_job.py``, computation in ``service/longterm_compute.py``) computes the
same numbers at scale; these functions are the definition it is tested against, so they favour being
obviously right over being fast.

Pulsar's long-term window is ``TimeAverageMessageData`` with ``maxSamples`` 1000 fed one sample per
leader cycle, starting from ``numSamples`` 0 (the first sample replaces the seed). Over samples
``x_1..x_N`` in time order that is the exact mean while ``N <= 1000``; after that each step is
``avg = avg*(1 - 1/M) + x/M``. Unrolled, the result is a weighted sum whose weight depends only on a
sample's rank ``i`` and the count ``N`` (:func:`closed_form_weight`), which is what lets Spark compute it
with an aggregation instead of a sequential loop.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from balancer.errors import InvalidInput
from balancer.models import LONG_TERM_SAMPLES, TimeAverageMessageData

HOUR_MS = 3_600_000
P95 = 0.95


@dataclass(frozen=True)
class BundleSample:
    """One history row of a bundle: the traffic one leader cycle saw."""

    bundle: str | None
    time_ms: int | None
    msg_rate_in: float | None
    msg_rate_out: float | None
    msg_throughput_in: float | None
    msg_throughput_out: float | None

    def values(self) -> tuple[float, float, float, float]:
        return (
            float(self.msg_rate_in or 0.0),
            float(self.msg_rate_out or 0.0),
            float(self.msg_throughput_in or 0.0),
            float(self.msg_throughput_out or 0.0),
        )


@dataclass(frozen=True)
class BrokerSample:
    """One history row of a broker: its CPU and the traffic it carried in one cycle, field by field.

    The four traffic figures stay separate (as the history stores them) so each is validated on its
    own before any sum: ``msg_rate_in=-5`` with a large ``msg_rate_out`` is a good sum and a bad row.
    """

    broker: str | None
    time_ms: int | None
    cpu_usage: float | None
    cpu_limit: float | None
    msg_rate_in: float | None
    msg_rate_out: float | None
    msg_throughput_in: float | None
    msg_throughput_out: float | None

    @property
    def msg_rate(self) -> float:
        return float(self.msg_rate_in or 0.0) + float(self.msg_rate_out or 0.0)

    @property
    def msg_throughput(self) -> float:
        return float(self.msg_throughput_in or 0.0) + float(self.msg_throughput_out or 0.0)

    @property
    def cpu_percent(self) -> float:
        return float(self.cpu_usage or 0.0) / float(self.cpu_limit or 1.0) * 100.0


def _good_number(v: float | None) -> bool:
    return v is not None and math.isfinite(v) and v >= 0.0


def is_valid_bundle_sample(s: BundleSample) -> bool:
    """A usable sample: a bundle name, a time, and four finite non-negative traffic figures."""
    if not s.bundle or s.time_ms is None or s.time_ms < 0:
        return False
    return all(
        _good_number(v) for v in (s.msg_rate_in, s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out)
    )


def is_valid_broker_sample(s: BrokerSample) -> bool:
    """A usable broker row, by the Spark job's rule (``service.longterm.compute.compute_capacity``).

    A name and a time; a CPU limit above zero (else there is no percentage); each of CPU usage and the
    four traffic figures finite and non-negative on its own; then the derived CPU percentage and the two
    sums finite too, since two finite values can overflow (``1e308 + 1e308``, or usage over a 1e-320 limit).
    """
    if not s.broker or s.time_ms is None or s.time_ms < 0:
        return False
    if not _good_number(s.cpu_limit) or not s.cpu_limit:
        return False
    fields = (s.cpu_usage, s.msg_rate_in, s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out)
    if not all(_good_number(v) for v in fields):
        return False
    return all(_good_number(v) for v in (s.cpu_percent, s.msg_rate, s.msg_throughput))


# ---- Pulsar's long-term window --------------------------------------------------------------------


def pulsar_long_term(
    samples: Iterable[BundleSample], max_samples: int = LONG_TERM_SAMPLES
) -> TimeAverageMessageData:
    """Feed the samples, in time order, through Pulsar's update rule from an unseeded window."""
    if max_samples < 1:
        raise InvalidInput("max_samples", max_samples, "must be at least 1")
    data = TimeAverageMessageData.with_defaults(max_samples)
    for s in sorted(samples, key=_time_key):
        r_in, r_out, t_in, t_out = s.values()
        data.update_values(r_in, r_out, t_in, t_out)
    return data


def closed_form_weight(rank: int, count: int, max_samples: int = LONG_TERM_SAMPLES) -> float:
    """Weight of the ``rank``-th (1-based) of ``count`` samples in Pulsar's long-term average.

    While ``count <= M`` every sample weighs ``1/count``. Past the cap the first ``M`` samples form a
    mean that then decays by ``(1 - 1/M)`` per later sample, and a later sample enters with ``1/M`` and
    decays from its own step on; hence ``(1 - 1/M) ** (count - max(rank, M)) / M``.
    """
    if not 1 <= rank <= count:
        raise InvalidInput("rank", rank, f"must be within 1..{count}")
    if count <= max_samples:
        return 1.0 / count
    decay = 1.0 - 1.0 / max_samples
    return float(decay ** (count - max(rank, max_samples)) / max_samples)


# ---- time-window statistics ------------------------------------------------------------------------


def percentile_nearest_rank(values: Sequence[float], p: float = P95) -> float:
    """The smallest value with at least ``p`` of the values at or below it (nearest-rank percentile)."""
    if not values:
        raise InvalidInput("values", values, "need at least one value")
    if not 0.0 < p <= 1.0:
        raise InvalidInput("p", p, "must be in (0, 1]")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def hour_of_day(time_ms: int) -> int:
    """UTC hour of day, the bucket daily patterns are read in."""
    return (time_ms // HOUR_MS) % 24


@dataclass(frozen=True)
class BundleLongTerm:
    """Everything the long-term job derives for one bundle over a time range."""

    bundle: str
    samples: int
    first_ms: int
    last_ms: int
    pulsar: TimeAverageMessageData
    mean: tuple[float, float, float, float]  # rate in, rate out, throughput in, throughput out
    p95: tuple[float, float, float, float] | None  # None: not computed (the Spark job computes it on request)
    peak_hour: int  # UTC hour of day with the highest mean msg rate (in + out); ties: earliest hour
    peak_hour_msg_rate: float


def bundle_long_term(bundle: str, samples: Sequence[BundleSample]) -> BundleLongTerm:
    """All long-term figures of one bundle from its valid samples."""
    if not samples:
        raise InvalidInput("samples", bundle, "a bundle needs at least one valid sample")
    columns = list(zip(*(s.values() for s in samples), strict=True))
    mean = tuple(math.fsum(c) / len(c) for c in columns)
    p95 = tuple(percentile_nearest_rank(c) for c in columns)
    by_hour: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        r_in, r_out, _, _ = s.values()
        by_hour[hour_of_day(int(s.time_ms or 0))].append(r_in + r_out)
    hour_means = {h: math.fsum(v) / len(v) for h, v in by_hour.items()}
    peak_hour = min(hour_means, key=lambda h: (-hour_means[h], h))
    times = [int(s.time_ms or 0) for s in samples]
    return BundleLongTerm(
        bundle=bundle,
        samples=len(samples),
        first_ms=min(times),
        last_ms=max(times),
        pulsar=pulsar_long_term(samples),
        mean=(mean[0], mean[1], mean[2], mean[3]),
        p95=(p95[0], p95[1], p95[2], p95[3]),
        peak_hour=peak_hour,
        peak_hour_msg_rate=hour_means[peak_hour],
    )


def long_term_by_bundle(rows: Iterable[BundleSample]) -> tuple[dict[str, BundleLongTerm], int]:
    """Per-bundle figures over all rows, and the number of rows skipped as invalid."""
    groups: dict[str, list[BundleSample]] = defaultdict(list)
    bad = 0
    for r in rows:
        if is_valid_bundle_sample(r):
            groups[str(r.bundle)].append(r)
        else:
            bad += 1
    return {b: bundle_long_term(b, s) for b, s in groups.items()}, bad


def long_term_message_data(result: BundleLongTerm, mode: str) -> TimeAverageMessageData:
    """The ``longTermData`` to store for a mode: Pulsar's window, the plain mean, or the p95."""
    n = min(result.samples, LONG_TERM_SAMPLES)
    if mode == "pulsar":
        return result.pulsar.model_copy()
    if mode in ("mean", "p95"):
        figures = result.mean if mode == "mean" else result.p95
        if figures is None:
            raise InvalidInput("mode", mode, f"no p95 was computed for {result.bundle}")
        r_in, r_out, t_in, t_out = figures
        return TimeAverageMessageData(
            max_samples=LONG_TERM_SAMPLES,
            num_samples=n,
            msg_rate_in=r_in,
            msg_rate_out=r_out,
            msg_throughput_in=t_in,
            msg_throughput_out=t_out,
        )
    raise InvalidInput("mode", mode, "expected pulsar, mean or p95")


# ---- broker capacity --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapacityFit:
    """Least-squares line ``traffic = intercept + per_cpu_point * cpu_percent`` of one broker."""

    broker: str
    samples: int
    cpu_mean: float
    msg_rate_per_cpu_point: float | None  # None: fewer than two samples or CPU never varied
    msg_rate_intercept: float | None
    throughput_per_cpu_point: float | None
    throughput_intercept: float | None


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """(slope, intercept) of the ordinary least-squares line, or None when ``x`` has no spread."""
    n = len(xs)
    if n != len(ys):
        raise InvalidInput("ys", len(ys), f"must have as many points as xs ({n})")
    if n < 2:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    if sxx <= 0.0:
        return None
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return slope, my - slope * mx


def capacity_by_broker(rows: Iterable[BrokerSample]) -> tuple[dict[str, CapacityFit], int]:
    """Per-broker capacity lines over the valid rows, and the number of rows skipped as invalid."""
    groups: dict[str, list[BrokerSample]] = defaultdict(list)
    bad = 0
    for r in rows:
        if is_valid_broker_sample(r):
            groups[str(r.broker)].append(r)
        else:
            bad += 1
    fits: dict[str, CapacityFit] = {}
    for broker, samples in groups.items():
        cpu = [s.cpu_percent for s in samples]
        rate = least_squares(cpu, [s.msg_rate for s in samples])
        tput = least_squares(cpu, [s.msg_throughput for s in samples])
        fits[broker] = CapacityFit(
            broker=broker,
            samples=len(samples),
            cpu_mean=math.fsum(cpu) / len(cpu),
            msg_rate_per_cpu_point=rate[0] if rate else None,
            msg_rate_intercept=rate[1] if rate else None,
            throughput_per_cpu_point=tput[0] if tput else None,
            throughput_intercept=tput[1] if tput else None,
        )
    return fits, bad


def _time_key(s: BundleSample) -> int:
    return int(s.time_ms or 0)
