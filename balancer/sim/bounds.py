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
_TOP_SOURCES = 3  # sources (largest excess first) checked for bundles too big for any broker's room
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
        self.asc = [own[::-1] for own in self.desc]

    def excess(self, m: float) -> float:
        if not self.desc:
            return sum(max(0.0, r - self.ratio * m * c) for r, c in self.pairs)
        return sum(self._least_out(i, r - self.ratio * m * c) for i, (r, c) in enumerate(self.pairs))

    def _least_out(self, i: int, e: float) -> float:
        """A lower bound on the traffic of broker i's bundles that moving out ``e`` takes: ``e``, or,
        when its bundles smaller than ``e`` add up to less, its smallest bundle of at least ``e``
        (whole bundles move: a broker 5 points over whose every bundle weighs 20 sheds 20, not 5).
        Non-decreasing in ``e``, as the bisection needs."""
        if e <= self.eps:
            return 0.0
        asc = self.asc[i]
        k = bisect.bisect_left(asc, e - self.eps)  # asc[:k] are the bundles smaller than e
        acc = self.prefix[i]
        small = acc[-1] - acc[len(asc) - k]
        if small >= e - self.eps or k >= len(asc):
            return e
        return asc[k]

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

    def room(self, j: int, m: float) -> float:
        r, c = self.pairs[j]
        return self.ratio * m * c - r

    def one_source(self, i: int, a: float, z: float) -> float:
        """For levels in [a, z], the fewest bundles that moving broker i's excess takes, counting its
        receivers' own shedding: either every bundle it moves fits some broker's room (the free ones
        cover the excess), or the largest one it moves, u, fits nowhere: then the others moved are no
        larger than u, and u's receiver j sheds at least (u - room_j) of its own bundles. Excess falls
        and rooms grow with m, so the excess and rooms at z bound from below; a bundle can be too big
        somewhere in [a, z] only if it is above the largest room at a. (Charging the receiver's
        shedding only for the smallest such bundle, while covering the excess with the largest, made
        a hot bundle of 40,000 msg/s look movable alone: hot_bundles #8 bounded by 1 unload where
        moving it forces its receiver to shed five more.)"""
        own = self.desc[i]
        e = -self.room(i, z)
        if e <= self.eps:
            return 0
        n = len(own)
        ascending = own[::-1]
        rooms_z = [self.room(j, z) for j in range(len(self.pairs))]
        free_z = bisect.bisect_right(ascending, max(rooms_z))
        best = self._cover_from(i, e, n - free_z)
        k = bisect.bisect_right(ascending, max(self.room(j, a) for j in range(len(self.pairs))))
        last = -1.0
        for u in ascending[k:]:
            if u == last:
                continue  # equal bundles give equal terms
            last = u
            sheds = min(
                (self._cover(j, u - rooms_z[j]) for j in range(len(self.pairs)) if j != i), default=INF
            )
            if sheds >= best:
                break  # sheds only grow with u
            best = min(best, self._cover_from(i, e, n - bisect.bisect_right(ascending, u)) + sheds)
        return best

    def _cover_from(self, i: int, amount: float, start: int) -> float:
        """Fewest of broker i's bundles from its ``start``-th largest on adding up to ``amount``."""
        acc = self.prefix[i]
        t = bisect.bisect_left(acc, acc[start] + amount - self.eps, lo=start)
        return INF if t >= len(acc) else t - start

    def in_count(self, m: float) -> float:
        if self.largest <= 0:
            return 0
        return sum(
            math.ceil((m * c - r - self.eps) / self.largest) for r, c in self.pairs if m * c - r > self.eps
        )

    def count_bound(self, lo: float, hi: float) -> int:
        """Out count is non-increasing in m and in count non-decreasing, both step functions: on a
        sub-interval [a, z] of the levels the count is >= max(out(z), in(a)), and >= what each of
        the few largest sources costs alone with its receivers' shedding (:meth:`one_source`); the
        minimum over the sub-intervals bounds the count from below."""
        best = INF
        step = (hi - lo) / _INTERVALS
        n = len(self.pairs)
        for k in range(_INTERVALS):
            a, z = lo + k * step, (hi if k == _INTERVALS - 1 else lo + (k + 1) * step)
            here = max(self.out_count(z), self.in_count(a))
            top = sorted(range(n), key=lambda i: self.room(i, z))[:_TOP_SOURCES]
            here = max(here, *(self.one_source(i, a, z) for i in top))
            best = min(best, here)
        return 0 if math.isinf(best) else int(best)


def reachable(s: CycleState, ratio: float = BALANCED_RATIO) -> bool:
    """Whether some assignment of ``s``'s bundles (``s.bundle_rates``) puts every broker's normalised
    msg rate within max/min ``ratio``, as far as longest-processing-time-first finds one (each bundle,
    largest first, to the broker it leaves least loaded per capacity). False may mean LPT missed one:
    the claims that use it count only instances it shows reachable."""
    caps = [c for c in s.capacity]
    if len(caps) < 2 or min(caps) <= 0:
        return False
    load = [0.0] * len(caps)
    for w in sorted((w for own in s.bundle_rates for w in own), reverse=True):
        j = min(range(len(caps)), key=lambda i: ((load[i] + w) / caps[i], i))
        load[j] += w
    norm = [x / c for x, c in zip(load, caps, strict=True)]
    return min(norm) > 0 and max(norm) / min(norm) <= ratio
