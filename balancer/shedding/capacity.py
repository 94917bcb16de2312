"""BalancedShedder's view of one cycle: each broker's utilisation, traffic and estimated capacity
(traffic per utilisation point, learnt from its reports), and the cluster's target utilisation.

The estimator's state (smoothed estimates, held-back outliers) lives on the shedder, which owns it
across calls; :func:`build_view` reads and updates it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import pairwise

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData

CAPACITY_SMOOTHING = 0.3  # weight of the newest capacity sample
# Traffic unit: one msg/s plus 6 KiB/s (per-message work dominates a broker's CPU for typical
# messages). Fixed, not relative to the cluster's totals, so that capacity estimates stay
# comparable across cycles when brokers join or traffic grows.
BYTES_PER_UNIT = 6 * 1024.0
OUTLIER = 0.25  # a capacity sample this far from the estimate is held back as a possible spike
SAME_HARDWARE = 0.15  # capacity estimates this close to the median are noise, not different hardware
# Estimates of brokers that declare the same size within this factor of their median are one class
# (same_declared_size): a joining real broker read 2.5x its peers' CPU per message for a whole run.
SAME_DECLARED = 3.0
MIN_UTIL = 1.0  # below this (points) a broker's traffic says nothing about its capacity
# Below this fraction of the mean utilisation, fixed overhead (other processes, the JVM) dominates a
# broker's usage and W/u underestimates its capacity: a nearly idle broker would look weak and be
# left under-filled within the band.
MIN_UTIL_OF_MEAN = 0.5


def same_class(c: float, median: float) -> float:
    """Snap an estimate within +-15% of the median to the median: background CPU and message-size
    mix make equal brokers look slightly different, and balancing on that noise would skew traffic."""
    return median if abs(c / median - 1) < SAME_HARDWARE else c


def hardware_classes(est: dict[str, float], median: float) -> dict[str, float]:
    """Snap each estimate to its hardware class: within 15% of the median to the median (unless
    the median falls between two classes), and the others, in ascending order, to the median of a
    run spanning at most 30%. A big broker's own estimate carries its CPU noise (+-10% under 3
    points of noise at 30% utilisation): balancing on it left a 2x broker 13% below its class's msg
    rate for 30 minutes (heterogeneous #97)."""
    near = sorted(c for c in est.values() if same_class(c, median) == median)
    if all(hi <= lo * (1 + SAME_HARDWARE) for lo, hi in pairwise(near)):
        out = {b: same_class(c, median) for b, c in est.items()}
        rest = sorted((c, b) for b, c in out.items() if c != median)
    else:
        # The estimates around the median have a gap as wide as a class's noise among them: the
        # median falls between two classes and is no class itself. Snapping to it merged 2x and
        # 3x brokers into one (heterogeneous #31 stayed at max/min 1.49 with every broker inside
        # the band); every estimate goes into the runs below instead.
        out = dict(est)
        rest = sorted((c, b) for b, c in out.items())
    i = 0
    while i < len(rest):
        j = i
        while j < len(rest) and rest[j][0] <= rest[i][0] * (1 + 2 * SAME_HARDWARE):
            j += 1
        centre = statistics.median(c for c, _ in rest[i:j])
        for _, b in rest[i:j]:
            out[b] = centre
        i = j
    return out


@dataclass
class View:
    """One cycle's numbers per broker: utilisation u (points), traffic W (normalised units),
    capacity c (traffic units per point, smoothed) and the cluster's target utilisation."""

    util: dict[str, float]
    traffic: dict[str, float]
    capacity: dict[str, float]
    target: float
    traffic_target: float
    rate_unit: float
    tp_unit: float

    def weight(self, rate: float, tp: float) -> float:
        return rate / self.rate_unit + tp / self.tp_unit

    def implied(self, broker: str) -> float:
        """The utilisation the broker's traffic implies by its capacity (no CPU noise in it)."""
        return self.traffic[broker] / self.capacity[broker]

    def spread(self) -> float:
        """Max/min of the utilisation the brokers' traffic implies (infinite with an idle broker)."""
        levels = [self.implied(b) for b in self.util if self.capacity.get(b)]
        return max(levels) / min(levels) if levels and min(levels) > 0 else float("inf")

    def level(self, broker: str, slack: float) -> float:
        """The utilisation the broker's traffic implies by its capacity, unless its reported one is
        more than ``slack`` points above that (CPU that something besides its traffic takes). A
        report carries one interval's CPU noise, which no later interval repeats."""
        u = self.util.get(broker, 0.0)
        if broker not in self.traffic or broker not in self.capacity:
            return u
        return max(self.implied(broker), u - slack)


def build_view(
    load: LoadData,
    config: LoadBalancerConfig,
    *,
    learn: bool,
    estimates: dict[str, float],
    outliers: dict[str, int],
    touched: dict[str, int],
    calls: int,
) -> View:
    """This cycle's view. With ``learn``, fold the reports into ``estimates`` (each broker's smoothed
    capacity) and ``outliers`` (consecutive disagreeing samples), both updated in place; a broker
    ``touched`` by a move in the last call is not sampled, its report predating the move."""
    weights = config.weights()
    util: dict[str, float] = {}
    rates: dict[str, float] = {}
    tps: dict[str, float] = {}
    for broker, data in load.broker_data.items():
        local = data.local_data
        util[broker] = local.max_resource_usage_with_weight(weights, include_memory=False) * 100
        rates[broker] = local.msg_rate
        tps[broker] = local.msg_throughput
    rate_unit, tp_unit = 1.0, BYTES_PER_UNIT
    traffic = {b: rates[b] / rate_unit + tps[b] / tp_unit for b in util}
    mean_util = sum(util.values()) / max(1, len(util))
    min_util = max(MIN_UTIL, MIN_UTIL_OF_MEAN * mean_util)
    idle = _idle(rates, tps, util, mean_util, config)
    low: dict[str, float] = {}  # samples of under-filled brokers: lower bounds on their capacity
    for b, u in util.items():
        fresh = touched.get(b, -10) < calls - 1
        if learn and fresh and (MIN_UTIL < u <= min_util or (b in idle and u > MIN_UTIL)) and traffic[b] > 0:
            low[b] = traffic[b] / u
        if learn and fresh and u > min_util and b not in idle and traffic[b] > 0:
            sample = traffic[b] / u
            old = estimates.get(b)
            if old is not None and abs(sample / old - 1) > OUTLIER:
                # Another process's CPU spike looks like a capacity drop; believe it only
                # once it has lasted as long as the slow trigger needs.
                outliers[b] = outliers.get(b, 0) + 1
                if outliers[b] < config.loadBalancerAvgShedderHitCountLowThreshold:
                    continue
                old = None
            outliers.pop(b, None)
            estimates[b] = sample if old is None else old + CAPACITY_SMOOTHING * (sample - old)
    known = [estimates[b] for b in util if b in estimates]
    prior = statistics.median(known) if known else 1000.0
    # Fixed overhead inflates an under-filled broker's usage, so W/u can only underestimate its
    # capacity: it may raise the estimate, never lower it. Without this a 3x broker that started
    # at 18% against a 40% mean stayed "median capacity" for ever and was never filled.
    for b, sample in low.items():
        if sample > estimates.get(b, prior) * (1 + SAME_HARDWARE):
            estimates[b] = sample
            outliers.pop(b, None)
    if low:
        known = [estimates[b] for b in util if b in estimates]
        prior = statistics.median(known) if known else 1000.0
    est = same_declared_size(
        {b: estimates.get(b, prior) for b in util},
        load,
        util,
        config.loadBalancerBrokerOverloadedThresholdPercentage,
    )
    capacity = hardware_classes(est, prior)
    total_c = sum(capacity.values()) or 1.0
    target = sum(util[b] * capacity[b] for b in util) / total_c
    traffic_target = sum(traffic.values()) / total_c
    return View(util, traffic, capacity, target, traffic_target, rate_unit, tp_unit)


def declared_size(load: LoadData, broker: str) -> tuple[float, float, float] | None:
    """The size a broker declares in its report: its CPU and NIC limits (Pulsar fills them from the
    host's cores or its cgroup quota, and the NIC's speed). None when they say nothing: no CPU limit,
    or every resource at a limit of exactly 100 (usages that are percentages already, as Extensible
    brokers' metrics give them)."""
    local = load.broker_data[broker].local_data
    limits = (local.cpu.limit, local.bandwidth_in.limit, local.bandwidth_out.limit)
    if not limits[0] > 0 or all(x == 100.0 for x in (*limits, local.memory.limit, local.direct_memory.limit)):
        return None
    return limits


def same_declared_size(
    est: dict[str, float], load: LoadData, util: dict[str, float], overloaded: float
) -> dict[str, float]:
    """Brokers that declare the same size get one capacity, their estimates' median, unless an estimate
    is more than SAME_DECLARED times off it or the broker's utilisation is at the overload threshold
    (``overloaded``, percent). Their traffic per CPU point differs by what they carry rather than what
    they are: on real brokers of equal quotas (issue 46, 0.4 cores each), the one that had owned every
    bundle and the one that had just joined read 5.5-7.4 msg/s per CPU point against 9-12 on the
    others (estimates 30-90 % apart; a joiner 2.5x below its peers for the whole of one run), so the
    fill took them for weaker hardware, held them at equal CPU and left msg rates at max/min 1.5-2.3
    after the join. Balancing equal brokers by traffic is what their operators measure, until a
    broker's CPU says it is overloaded (another process at 55 points of a 95 % broker): then its own
    estimate stands and it is shed as a weaker one."""
    groups: dict[tuple[float, float, float], list[str]] = {}
    for b in est:
        key = declared_size(load, b)
        if key is not None:
            groups.setdefault(key, []).append(b)
    out = dict(est)
    for members in groups.values():
        if len(members) > 1:
            centre = statistics.median(est[b] for b in members)
            for b in members:
                near = centre / SAME_DECLARED <= est[b] <= centre * SAME_DECLARED
                if near and util.get(b, 0.0) < overloaded:
                    out[b] = centre
    return out


def _idle(
    rates: dict[str, float],
    tps: dict[str, float],
    util: dict[str, float],
    mean_util: float,
    config: LoadBalancerConfig,
) -> set[str]:
    """Brokers whose usage is mostly their idle floor: msg rate and throughput both below the join
    rule's fraction of the busiest broker's, and usage below the mean by more than half the band. Their
    traffic / usage says little about their capacity (a new broker with health-check traffic at 18 %
    looked like a broker of a sixtieth of the others' capacity, as busy as they were), so it may raise
    their estimate, never lower it. A small broker balanced by utilisation is near the mean: sampled."""
    m = config.loadBalancerBalancedShedderUnderloadedMultiplier
    if m <= 0 or not util:
        return set()
    top_rate, top_tp = max(rates.values()), max(tps.values())
    below = mean_util - config.loadBalancerAvgShedderLowThreshold / 4
    return {b for b, u in util.items() if rates[b] < m * top_rate and tps[b] <= m * top_tp and u < below}
