"""The water-fill's one exception to "a move fits the destination's room": a bundle bigger than every
room, moved to a broker of larger capacity where that lowers the pair's peak (issue 31)."""

from __future__ import annotations

from collections.abc import Callable


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
) -> tuple[int, str] | None:
    """Where nothing of ``s`` fits any destination's room: its smallest bundle placement lets go to a
    destination of larger capacity, if that lowers the higher of the pair by at least a tolerance,
    by traffic and by report; the destination with the lowest such peak. (index, destination) or None.

    Without it a bundle bigger than every room never moved and its host was drained around it: a
    standard broker kept two bundles at 1.6-2x the mean beside 2x brokers at 0.7x (issue 31,
    oversized_bundles: balanced where reachable 77/100). The destination may end above its room and
    above the source: it sheds smaller bundles the next cycle, which is the move back an exact plan
    makes. The larger capacity keeps this from trading one hot broker for another of its kind."""
    if not ws:
        return None
    k_s = 1 / capacity[s]
    best: tuple[float, int, str] | None = None
    for p, d in dst_heap:
        if p != proj[d] or capacity[d] <= capacity[s]:
            continue  # stale heap entry, or no bigger a home than s
        k_d = 1 / capacity[d]
        i = next((j for j in range(len(ws)) if allowed is None or allowed(names[j], d)), -1)
        if i < 0:
            continue
        w = ws[i]
        peak = max(proj[s] - w * k_s, proj[d] + w * k_d)
        peak_used = max(used[s] - w * k_s, used[d] + w * k_d)
        if peak <= proj[s] - tol and peak_used <= used[s] - tol and (best is None or (peak, i, d) < best):
            best = (peak, i, d)
    return None if best is None else (best[1], best[2])
