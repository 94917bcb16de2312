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


# ---- sequence numbers: what was acknowledged, what a consumer received ---------------------------------
class SeqSet:
    """The sequence numbers ``0, 1, 2, ...`` of one topic seen so far, one bit each (a run sends
    millions). Not thread-safe: the caller serialises ``add``."""

    __slots__ = ("_bits", "count")

    def __init__(self, seqs: Iterable[int] = ()) -> None:
        self._bits = bytearray()
        self.count = 0
        for s in seqs:
            self.add(s)

    def add(self, seq: int) -> bool:
        """Mark ``seq``; True when it was not marked before."""
        if seq < 0:
            raise ValueError(f"sequence number must be >= 0, got {seq}")
        i, mask = seq >> 3, 1 << (seq & 7)
        if i >= len(self._bits):
            self._bits.extend(bytes(max(i + 1 - len(self._bits), len(self._bits))))
        if self._bits[i] & mask:
            return False
        self._bits[i] |= mask
        self.count += 1
        return True

    def __contains__(self, seq: object) -> bool:
        if not isinstance(seq, int) or seq < 0:
            return False
        i = seq >> 3
        return i < len(self._bits) and bool(self._bits[i] & (1 << (seq & 7)))

    def __len__(self) -> int:
        return self.count

    def missing_from(self, other: SeqSet) -> list[int]:
        """Numbers marked here and not in ``other`` (ascending): acknowledged but never received."""
        out: list[int] = []
        theirs = other._bits
        for i, mine in enumerate(self._bits):
            diff = mine & ~(theirs[i] if i < len(theirs) else 0)
            if diff:
                out.extend(8 * i + b for b in range(8) if diff & (1 << b))
        return out


class ReceivedSequence:
    """What one topic's consumer saw, in arrival order: every number received, and how the order
    went (a redelivery after a reconnect is a duplicate; a jump over numbers not yet received is a
    gap, which the end of the run settles: received later, or lost)."""

    __slots__ = ("duplicates", "gaps", "highest", "late", "seen")

    def __init__(self) -> None:
        self.seen = SeqSet()
        self.highest = -1
        self.duplicates = 0  # received before
        self.gaps = 0  # arrived past numbers not received yet
        self.late = 0  # arrived after a higher number

    def receive(self, seq: int) -> None:
        if not self.seen.add(seq):
            self.duplicates += 1
            return
        if seq > self.highest + 1:
            self.gaps += 1
        elif seq < self.highest:
            self.late += 1
        self.highest = max(self.highest, seq)


def phase_of_seq(starts: Mapping[str, int], seq: int, before: str = "outside") -> str:
    """The phase a topic's message ``seq`` was sent in, from the first sequence number each phase
    began with (``{phase: first seq}``, in the order the phases ran); ``before`` when it precedes
    them all."""
    best, best_start = before, -1
    for phase, first in starts.items():  # chronological: of two phases starting at one number, the
        if best_start <= first <= seq:  # later one sent it (the earlier sent nothing)
            best, best_start = phase, first
    return best


def count_by_phase(
    seqs_by_topic: Mapping[str, Iterable[int]], starts_by_phase: Mapping[str, Mapping[str, int]]
) -> dict[str, int]:
    """How many of each topic's ``seqs`` fall in each phase (``starts_by_phase``: phase -> topic ->
    first seq of that phase; a topic missing from a phase's marks does not start it)."""
    out: dict[str, int] = {}
    for topic, seqs in seqs_by_topic.items():
        starts = {p: m[topic] for p, m in starts_by_phase.items() if topic in m}
        for s in seqs:
            p = phase_of_seq(starts, s)
            out[p] = out.get(p, 0) + 1
    return out


def merge_windows(windows: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping or touching ``[a, b)`` windows joined, sorted: a message sent in two moves'
    windows counts once."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(windows):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
