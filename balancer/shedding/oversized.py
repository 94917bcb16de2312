"""The water-fill's one exception to "a move fits the destination's room": a bundle bigger than every
room, moved to a broker of larger capacity where that lowers the pair's peak, at once or once the
destination has given smaller bundles back (a swap, issue 31)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# A source left standing more than this max/min above the rest of the cluster's mean level (capacity
# weighted) can only be balanced by moving the bundle that pins it: levelling the rest around it no
# longer brings their minimum within the 1.25 called balanced once the bundles' sizes and one
# interval's noise are counted (generated oversized_bundles: the 14 clusters left unbalanced where a
# balance was reachable each ended with a standard broker holding one bundle at 1.21-1.51x the rest's
# mean by msg rate). A little above the fill's envelope (water_fill.ENVELOPE_RATIO, 1.15): at 1.15 two
# pinned brokers that crept just past it (1.152, 1.158 by load) swapped in a run's last cycles, where
# a swap costs more than it buys; at 1.17 the swaps that balanced a cluster all still fire (1.171 up).
SWAP_ABOVE_REST = 1.17


@dataclass
class Cluster:
    """What the swap test needs beyond the pair: every reporting broker's traffic (level x capacity,
    which no move changes) and capacity, summed, and the traffic each broker may give back (read
    once a broker, by ``read_movable``)."""

    traffic: float
    capacity: float
    read_movable: Callable[[str], float]
    # Each broker's smoothed traffic-implied level before this plan's moves (the strategy's smoothed
    # gap, as the slow-drift count reads it, from the target); absent: none kept yet.
    steady: Mapping[str, float] = field(default_factory=dict)
    _movable: dict[str, float] = field(default_factory=dict)

    def movable(self, broker: str) -> float:
        if broker not in self._movable:
            self._movable[broker] = self.read_movable(broker)
        return self._movable[broker]


def bigger_home(
    s: str,
    ws: list[float],
    names: list[str],
    dst_heap: list[tuple[float, str]],
    proj: dict[str, float],
    used: dict[str, float],
    capacity: dict[str, float],
    tol: float,
    allowed: Callable[[str, str], bool] | None,
    cluster: Cluster | None = None,
) -> tuple[int, str, bool] | None:
    """Where nothing of ``s`` fits any destination's room: its smallest bundle placement lets go to a
    destination of larger capacity, if that lowers the higher of the pair by at least a tolerance,
    by traffic and by report; the destination with the lowest such peak. (index, destination, whether
    it is the first half of a swap) or None.

    Without it a bundle bigger than every room never moved and its host was drained around it: a
    standard broker kept two bundles at 1.6-2x the mean beside 2x brokers at 0.7x (issue 31,
    oversized_bundles: balanced where reachable 77/100). The destination may end above its room and
    above the source: it sheds smaller bundles the next cycle, which is the move back an exact plan
    makes. The larger capacity keeps this from trading one hot broker for another of its kind.

    With ``cluster``, a move that raises the pair's peak is still taken as the first half of a swap
    where ``s`` stands more than :data:`SWAP_ABOVE_REST` above the rest's mean level, both as projected
    after the plan's moves so far and by its smoothed level before the plan (``cluster.steady``: one
    report's excursion of a lone bundle is no reason to empty its broker; docs/strategy.md gives the
    instances), and the pair's common level (what it reaches once the destination gives back the
    excess) is a tolerance below ``s``, by traffic and by report, and the destination has the traffic
    to give back that takes it a tolerance below where ``s`` stood (bundles it got recently may not
    move again).
    The give-back is the destination's own shedding in later cycles, always downhill then (the
    source is empty): done here in the same plan it would go to a broker that was above it."""
    if not ws:
        return None
    c_s = capacity[s]
    k_s = 1 / c_s
    swap = cluster is not None and all(
        level > SWAP_ABOVE_REST * (cluster.traffic - level * c_s) / max(cluster.capacity - c_s, 1e-12)
        for level in (proj[s], cluster.steady.get(s, proj[s]))
    )
    best: tuple[bool, float, int, str] | None = None
    for p, d in dst_heap:
        c_d = capacity[d]
        if p != proj[d] or c_d <= c_s:
            continue  # stale heap entry, or no bigger a home than s
        k_d = 1 / c_d
        i = next((j for j in range(len(ws)) if allowed is None or allowed(names[j], d)), -1)
        if i < 0:
            continue
        w = ws[i]
        peak = max(proj[s] - w * k_s, proj[d] + w * k_d)
        peak_used = max(used[s] - w * k_s, used[d] + w * k_d)
        if peak <= proj[s] - tol and peak_used <= used[s] - tol:
            key = (False, peak, i, d)
        elif swap and cluster is not None:
            level = (proj[s] * c_s + proj[d] * c_d) / (c_s + c_d)
            level_used = (used[s] * c_s + used[d] * c_d) / (c_s + c_d)
            # What d must give back to stand a tolerance below where s stood.
            give_back = (proj[d] + w * k_d - proj[s] + tol) * c_d
            if level > proj[s] - tol or level_used > used[s] - tol or cluster.movable(d) < give_back:
                continue
            key = (True, level, i, d)
        else:
            continue
        if best is None or key < best:
            best = key
    return None if best is None else (best[2], best[3], best[0])


def why_oversized(s: str, d: str, swap: bool) -> str:
    """The explanation of a move :func:`bigger_home` chose (an operator sees it in the decision)."""
    head = f"moves {s}'s bundle, bigger than every destination's room, to {d} (larger capacity): "
    if swap:
        return head + f"the first half of a swap, {d} gives smaller bundles back once settled"
    return head + "that lowers the pair's peak"
