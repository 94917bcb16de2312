"""LeastResourceUsageWithWeight's per-cycle state: W per broker once, h smoothed on plain floats.

Pulsar updates every candidate's smoothed usage h on each placement call; a leader cycle makes
~10,000 calls over ~1,000 candidates, so the update itself must stay per call, but W, the
fresh-start test and the candidate lists' layout do not change within a cycle. The arithmetic is
the strategy's own, term for term, so h is bit-identical to the per-call path
(``tests/unit/test_placement_lruw_scope.py`` pins it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData
from balancer.placement.base import weighted_usage

# (usage of a broker or None, brokers with data, average, best, overloaded count)
Smoothed = tuple[Callable[[str], float | None], int, float, list[str], int]


@dataclass
class _Layout:
    """One candidate list: its candidates with data, in order, and what is fixed about them."""

    candidates: Sequence[str]  # held so its id is not reused while memoised
    names: list[str]
    members: frozenset[str]
    get: Callable[[dict[str, float]], tuple[float, ...]]
    w: tuple[float, ...]
    w_term: list[float]  # (1 - H) * W, the second term of every update, fixed within a cycle
    fresh: list[int]  # positions of brokers that start afresh on every call
    called: bool = False
    result: Smoothed | None = None  # once every member is at its fixed point


def _getter(names: list[str]) -> Callable[[dict[str, float]], tuple[float, ...]]:
    if len(names) == 1:
        one = names[0]
        return lambda d: (d[one],)
    return itemgetter(*names)


class CycleScope:
    """W and h per broker for one cycle; :meth:`flush` writes h back into the history dict.

    Every float operation is the per-call path's, in its order (``prev * H + (1 - H) * W``, the
    sum in candidate order, ``h + D <= avg``, ``h > T``); the per-broker lookups are gathered
    once per candidate list (itemgetter) and the updates written back in one ``dict.update``.
    With W fixed, ``h -> h * H + (1 - H) * W`` reaches a fixed point within a few hundred calls
    (in floats too); a candidate list whose brokers all sit at theirs gives the same figures on
    every later call, which are then reused.
    """

    def __init__(self, history: dict[str, float], load: LoadData, config: LoadBalancerConfig) -> None:
        self.history, self.load, self.config = history, load, config
        self.h_pct = config.loadBalancerHistoryResourcePercentage
        self.w_pct = 1 - self.h_pct
        self.overload = config.overload_threshold
        self.weights = config.weights()
        self.loaded = False

    def _load(self) -> None:
        """Read W and h afresh (the history dict may have changed since the last flush)."""
        self.loaded = True
        self.w: dict[str, float] = {}
        self.fresh: set[str] = set()
        self.h: dict[str, float] = {}  # a placeholder 0.0 for brokers in ``missing``
        self.missing: set[str] = set()  # brokers with data but no history yet
        for broker, data in self.load.broker_data.items():
            local = data.local_data
            self.w[broker] = weighted_usage(local, self.weights)
            if not local.bundles or (local.msg_rate_in == 0 and local.msg_rate_out == 0):
                self.fresh.add(broker)
            prev = self.history.get(broker)
            self.h[broker] = 0.0 if prev is None else prev
            if prev is None:
                self.missing.add(broker)
        self.unstable: set[str] = set(self.w)  # brokers whose h may still change under the update
        self.touched: set[str] = set()
        self.layouts: dict[int, _Layout] = {}

    def _layout(self, candidates: Sequence[str]) -> _Layout | None:
        hit = self.layouts.get(id(candidates))
        if hit is not None and hit.candidates is candidates:
            return hit
        members = frozenset(candidates)
        if len(members) != len(candidates):
            return None  # a repeated candidate is smoothed twice per call: the per-call path does that
        w = self.w
        names = list(candidates) if members <= w.keys() else [b for b in candidates if b in w]
        get = _getter(names) if names else (lambda d: ())
        wg = get(w)
        if len(self.fresh) < 8:
            fresh = sorted(names.index(b) for b in self.fresh if b in members)
        else:
            fresh = [j for j, b in enumerate(names) if b in self.fresh]
        hit = _Layout(candidates, names, members, get, wg, [self.w_pct * w_b for w_b in wg], fresh)
        self.layouts[id(candidates)] = hit
        return hit

    def smooth(self, candidates: Sequence[str], diff: float) -> Smoothed | None:
        """One call's history update and the figures the strategy reports; None: use the per-call path."""
        if not self.loaded:
            self._load()
        lay = self._layout(candidates)
        if lay is None:
            self.flush()
            return None
        if lay.result is not None:
            return lay.result
        names, h = lay.names, self.h
        old = lay.get(h)
        if not lay.called:
            lay.called = True
            self.touched.update(names)
        if lay.members.isdisjoint(self.unstable):
            new = list(old)  # every member is at its fixed point: the update would change nothing
        else:
            hp = self.h_pct
            new = [prev * hp + w_term for prev, w_term in zip(old, lay.w_term, strict=True)]
            for j in lay.fresh:
                new[j] = lay.w[j]
            if self.missing:
                for b in [b for b in self.missing if b in lay.members]:
                    new[names.index(b)] = self.w[b]
                    self.missing.discard(b)
            h.update(zip(names, new, strict=True))
            if tuple(new) == old:
                # W is fixed within the cycle, so a value the update maps to itself stays put.
                self.unstable.difference_update(names)
        n = len(new)
        avg = sum(new) / n if n else 0.0
        best = [b for b, v in zip(names, new, strict=True) if v + diff <= avg]
        limit = self.overload
        overloaded = len([v for v in new if v > limit])
        known: dict[str, float | None] = {}

        def usage_of(broker: str) -> float | None:
            if broker not in known:
                has = broker in self.w and broker in lay.members
                known[broker] = new[names.index(broker)] if has else None
            return known[broker]

        result = (usage_of, n, avg, best, overloaded)
        if lay.members.isdisjoint(self.unstable):
            lay.result = result  # nothing in it can change for the rest of the cycle
        return result

    def flush(self) -> None:
        """Write every smoothed h back and forget the per-broker state (the dict may be edited next)."""
        if self.loaded:
            for b in self.touched:
                self.history[b] = self.h[b]
        self.loaded = False
