"""Least-cost bounds: how much traffic, and how many bundles, any strategy must move to take a
simulated state to a given balance. They make costs comparable between runs that ended at different
balance: a run that moved less than the bound for "balanced" cannot have ended balanced.

Ending with every broker's normalised msg rate in ``[m, ratio * m]`` (for some level ``m``) means
moving out each broker's *excess* over ``ratio * m * cap`` and moving in each *deficit* under
``m * cap``. Every moved bundle leaves one broker and enters one. Traffic is frozen at the state
(the simulator's traffic drifts a little afterwards), and any bundle may go anywhere, so these are
lower bounds, not plans.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass

from balancer.sim.engine import CycleState

BALANCED_RATIO = 1.25
_BISECT_STEPS = 100
_INTERVALS = 200  # sub-intervals of the feasible levels for the bundle-count bound
INF = math.inf


@dataclass(frozen=True)
class Bound:
    rate: float  # msg/s that must move
    unloads: int  # bundles that must move


def balance_bound(s: CycleState, ratio: float = BALANCED_RATIO) -> Bound:
    """The least msg rate and the fewest bundles that must move to take ``s`` to a normalised
    msg-rate max/min <= ``ratio``; the bundle count needs ``s.bundle_rates`` (0 without it)."""
    total_c, total_r = sum(s.capacity), sum(s.msg_rate)
    if total_c <= 0 or total_r <= 0 or len(s.capacity) < 2:
        return Bound(0.0, 0)
    b = _Brokers(s, ratio)
    lo, hi = total_r / (ratio * total_c), total_r / total_c  # the feasible levels m
    rate = _min_of_max(b.excess, b.deficit, lo, hi)
    unloads = b.count_bound(lo, hi) if s.bundle_rates else 0
    return Bound(rate, unloads)


def _min_of_max(down: Callable[[float], float], up: Callable[[float], float], lo: float, hi: float) -> float:
    """min over [lo, hi] of max(down, up), ``down`` non-increasing and ``up`` non-decreasing, both
    continuous: they cross once, found by bisection (a lower bound to within rounding)."""
    if down(lo) <= up(lo):
        return up(lo)
    if down(hi) >= up(hi):
        return down(hi)
    a, z = lo, hi
    for _ in range(_BISECT_STEPS):
        mid = (a + z) / 2
        if down(mid) > up(mid):
            a = mid
        else:
            z = mid
    # Left of z the max is >= down(z); right of a it is >= up(a).
    return max(down(z), up(a))


class _Brokers:
    def __init__(self, s: CycleState, ratio: float) -> None:
        self.ratio = ratio
        self.pairs = list(zip(s.msg_rate, s.capacity, strict=True))
        self.eps = 1e-9 * sum(s.msg_rate)
        self.desc = s.bundle_rates  # per broker, largest first
        self.prefix: list[list[float]] = []  # prefix[i][t] = sum of broker i's t largest bundles
        for own in self.desc:
            acc, run = [0.0], 0.0
            for r in own:
                run += r
                acc.append(run)
            self.prefix.append(acc)
        self.largest = max((own[0] for own in self.desc if own), default=0.0)

    def excess(self, m: float) -> float:
        return sum(max(0.0, r - self.ratio * m * c) for r, c in self.pairs)

    def deficit(self, m: float) -> float:
        return sum(max(0.0, m * c - r) for r, c in self.pairs)

    def _cover(self, i: int, amount: float) -> float:
        """Fewest of broker i's bundles adding up to ``amount`` (its largest first)."""
        if amount <= self.eps:
            return 0
        acc = self.prefix[i]
        t = bisect.bisect_left(acc, amount - self.eps)
        return INF if t >= len(acc) else t

    def out_count(self, m: float) -> float:
        """Bundles that must leave the brokers with excess at level m."""
        return sum(self._cover(i, r - self.ratio * m * c) for i, (r, c) in enumerate(self.pairs))

    def in_count(self, m: float) -> float:
        if self.largest <= 0:
            return 0
        return sum(
            math.ceil((m * c - r - self.eps) / self.largest) for r, c in self.pairs if m * c - r > self.eps
        )

    def count_bound(self, lo: float, hi: float) -> int:
        """Out count is non-increasing in m and in count non-decreasing, both step functions: on a
        sub-interval [a, z] of the levels the max of the two is >= max(out(z), in(a)), and the
        minimum of that over the sub-intervals bounds the count from below."""
        best = INF
        step = (hi - lo) / _INTERVALS
        for k in range(_INTERVALS):
            a, z = lo + k * step, (hi if k == _INTERVALS - 1 else lo + (k + 1) * step)
            best = min(best, max(self.out_count(z), self.in_count(a)))
        return 0 if math.isinf(best) else int(best)
