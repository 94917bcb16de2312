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

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData
from balancer.placement.base import weighted_usage

# (usage of a broker or None, brokers with data, average, best, overloaded count)
Smoothed = tuple[Callable[[str], float | None], int, float, list[str], int]


@dataclass
class _Layout:
    """One candidate list: the universe index and name of each candidate with data, in order."""

    candidates: Sequence[str]  # held so its id is not reused while memoised
    idx: list[int]
    names: list[str]
    pos: dict[str, int]
    fresh: list[tuple[int, int]]  # (position, index) of brokers that start afresh on every call


class CycleScope:
    """Broker-indexed W and h for one cycle; :meth:`flush` writes h back into the history dict."""

    def __init__(self, history: dict[str, float], load: LoadData, config: LoadBalancerConfig) -> None:
        self.history, self.load, self.config = history, load, config
        self.h_pct = config.loadBalancerHistoryResourcePercentage
        self.w_pct = 1 - self.h_pct
        self.overload = config.overload_threshold
        self.weights = config.weights()
        self._reset()

    def _reset(self) -> None:
        self.index: dict[str, int | None] = {}  # None: no load data, the broker is skipped
        self.names: list[str] = []
        self.w: list[float] = []
        self.fresh: list[bool] = []
        self.h: list[float] = []
        self.missing: set[int] = set()  # indices with no history yet (their h slot is a placeholder)
        self.touched: set[int] = set()
        self.layouts: dict[int, _Layout] = {}

    def _broker(self, broker: str) -> int | None:
        if broker in self.index:
            return self.index[broker]
        data = self.load.broker_data.get(broker)
        if data is None:
            self.index[broker] = None
            return None
        local = data.local_data
        i = len(self.names)
        self.index[broker] = i
        self.names.append(broker)
        self.w.append(weighted_usage(local, self.weights))
        self.fresh.append(not local.bundles or (local.msg_rate_in == 0 and local.msg_rate_out == 0))
        prev = self.history.get(broker)
        self.h.append(0.0 if prev is None else prev)
        if prev is None:
            self.missing.add(i)
        return i

    def _layout(self, candidates: Sequence[str]) -> _Layout | None:
        hit = self.layouts.get(id(candidates))
        if hit is not None and hit.candidates is candidates:
            return hit
        if len(set(candidates)) != len(candidates):
            return None  # a repeated candidate is smoothed twice per call: the per-call path does that
        idx: list[int] = []
        names: list[str] = []
        for b in candidates:
            i = self._broker(b)
            if i is not None:
                idx.append(i)
                names.append(b)
        pos = {b: j for j, b in enumerate(names)}
        fresh = [(j, i) for j, i in enumerate(idx) if self.fresh[i]]
        hit = _Layout(candidates, idx, names, pos, fresh)
        self.layouts[id(candidates)] = hit
        return hit

    def smooth(self, candidates: Sequence[str], diff: float) -> Smoothed | None:
        """One call's history update and the figures the strategy reports; None: use the per-call path."""
        lay = self._layout(candidates)
        if lay is None:
            self.flush()
            return None
        h, w, hp, wp = self.h, self.w, self.h_pct, self.w_pct
        idx = lay.idx
        new = [h[i] * hp + wp * w[i] for i in idx]
        for j, i in lay.fresh:
            new[j] = w[i]
        if self.missing:
            pos = lay.pos
            for i in [i for i in self.missing if self.names[i] in pos]:
                new[pos[self.names[i]]] = w[i]
                self.missing.discard(i)
        for i, v in zip(idx, new, strict=True):
            h[i] = v
        if len(self.touched) < len(self.names):
            self.touched.update(idx)
        avg = sum(new) / len(new) if new else 0.0
        best = [b for b, v in zip(lay.names, new, strict=True) if v + diff <= avg]
        overloaded = len([v for v in new if v > self.overload])
        position = lay.pos

        def usage_of(broker: str) -> float | None:
            j = position.get(broker)
            return None if j is None else new[j]

        return usage_of, len(new), avg, best, overloaded

    def flush(self) -> None:
        """Write every smoothed h back and forget the per-broker state (the dict may be edited next)."""
        for i in self.touched:
            self.history[self.names[i]] = self.h[i]
        self._reset()
