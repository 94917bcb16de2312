"""Pure helpers for ``bench/pulsar_head_to_head.py``: what a run's samples say, no I/O.

A *rate sample* is ``(t, {broker: msg/s})``; an *ownership sample* is ``(t, {bundle: broker})``.
Times are seconds on one clock (the bench uses ``time.monotonic()``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

BALANCED_RATIO = 1.25

RateSample = tuple[float, Mapping[str, float]]
OwnerSample = tuple[float, Mapping[str, str]]


@dataclass(frozen=True)
class Move:
    """A bundle seen on ``source`` at one poll and on ``destination`` at the next (at ``t``)."""

    t: float
    bundle: str
    source: str
    destination: str


def spread(rates: Mapping[str, float]) -> float:
    """max/min message rate across brokers; ``inf`` when one broker carries nothing and another does."""
    values = list(rates.values())
    if not values:
        return math.inf
    hi, lo = max(values), min(values)
    if hi <= 0:
        return 1.0
    return math.inf if lo <= 0 else hi / lo


def time_to_balance(
    samples: Sequence[RateSample],
    start: float,
    end: float,
    hold_s: float = 60.0,
    ratio: float = BALANCED_RATIO,
) -> float | None:
    """Seconds from ``start`` to the first sample in [start, end] from which max/min <= ``ratio``
    holds at every sample for ``hold_s`` (or, when the phase ends sooner, to its end with at least two
    samples); None when that never happens within the phase."""
    window = [(t, spread(r)) for t, r in samples if start <= t <= end]
    for i, (t0, s0) in enumerate(window):
        if s0 > ratio:
            continue
        held = [(t, s) for t, s in window[i:] if t <= t0 + hold_s]
        if any(s > ratio for _, s in held):
            continue
        reaches = held[-1][0] >= t0 + hold_s * 0.9
        if reaches or (len(held) >= 2 and all(s <= ratio for _, s in window[i:])):
            return t0 - start
    return None


def moves_from_ownership(samples: Sequence[OwnerSample]) -> list[Move]:
    """Ownership changes between consecutive polls of each bundle (a failed lookup, absent from a
    sample, neither starts nor ends a move: the next successful one is compared with the last)."""
    last: dict[str, str] = {}
    out: list[Move] = []
    for t, owners in samples:
        for bundle, broker in sorted(owners.items()):
            prev = last.get(bundle)
            if prev is not None and prev != broker:
                out.append(Move(t, bundle, prev, broker))
            last[bundle] = broker
    return out


def in_windows(t: float, windows: Iterable[tuple[float, float]]) -> bool:
    return any(a <= t < b for a, b in windows)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (Pulsar's and the workload's convention); None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))])


def longest_gap_near(gaps: Iterable[tuple[float, float]], a: float, b: float) -> float:
    """Longest gap ``(start, length)`` overlapping [a, b]; 0 without one."""
    return max((g for s, g in gaps if s <= b and s + g >= a), default=0.0)
