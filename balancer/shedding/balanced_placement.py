"""BalancedShedder's placement rules as functions over its view: the candidate a new or orphaned
bundle goes to, where a shed bundle goes when placement's filters removed its bound destination, and
the order a batch of unowned bundles is placed in. :class:`BalancedShedder` keeps the state (what
it placed since the view, the cycle's plan) and the explanations."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from balancer.models import BundleData, LoadData
from balancer.shedding.capacity import BYTES_PER_UNIT, View


def least_projected(
    candidates: Sequence[str], weight: float, v: View, pending: Mapping[str, float], slack: float
) -> tuple[str, float, float]:
    """(broker, its projected utilisation, the points the bundle adds there): the candidate least
    utilised after taking the bundle, by the utilisation its traffic implies (:meth:`View.level`)
    plus what was placed on it since the view; ties by name. By traffic, not the reported CPU:
    placing by the report sent a dead broker's bundles to whichever broker's noise was lowest
    (scale_in: less balanced than AvgShedder in 10 of 100 instances where both balance, 0 by
    traffic). ``slack`` keeps other processes' CPU counted beyond it, as the fill's does."""
    prior = statistics.median(v.capacity.values()) if v.capacity else 1000.0
    best, best_score = candidates[0], float("inf")
    for c in candidates:
        score = v.level(c, slack) + pending.get(c, 0.0) + weight / v.capacity.get(c, prior)
        if score < best_score or (score == best_score and c < best):
            best, best_score = c, score
    return best, best_score, weight / v.capacity.get(best, prior)


def preallocated_points(load: LoadData, v: View) -> dict[str, float]:
    """broker -> the utilisation points of the bundles preallocated to it that its report does not
    list yet (placed by an earlier view: a drain's moves, orphans), by the same measure as
    :func:`least_projected`'s. A view starts its ``pending`` from these: without them a drain that
    outlived a shedding cycle sent every later bundle to the broker whose report still predated the
    earlier ones (4 of 4 to one broker in the unit drain with a shedding cycle between its moves)."""
    prior = statistics.median(v.capacity.values()) if v.capacity else 1000.0
    out: dict[str, float] = {}
    for broker, data in load.broker_data.items():
        if not data.preallocated_bundle_data:
            continue
        reported = data.local_data.last_stats
        cap = v.capacity.get(broker, prior)
        for bundle, bd in data.preallocated_bundle_data.items():
            if bundle not in reported:
                lt = bd.long_term_data
                out[broker] = out.get(broker, 0.0) + v.weight(lt.msg_rate, lt.msg_throughput) / cap
    return out


def re_placement(
    candidates: Sequence[str],
    source: str,
    weight: float,
    v: View,
    plan_gaps: Mapping[str, float],
    tol: float,
    pending: Mapping[str, float],
) -> tuple[str | None, float]:
    """(broker or None, its projected gap to the target after the move) for a shed bundle whose bound
    destination the filters removed (even distribution, isolation): the candidate least above the
    target after taking it, if that keeps it within the tolerance and below the source; None when
    nobody has room, and the bundle stays. Placing it by the reported utilisation instead sent it to
    whichever broker's CPU noise was lowest, often one above the target (a 0.5x broker given a bundle
    from its equal twin, heterogeneous #32 ended at msg-rate max/min 1.43)."""
    best, best_after = None, min(tol, plan_gaps.get(source, 0.0))
    for c in candidates:
        if c == source or c not in v.capacity:
            continue
        after = plan_gaps.get(c, 0.0) + pending.get(c, 0.0) + weight / v.capacity[c]
        if after <= best_after:
            best, best_after = c, after
    return best, best_after


def largest_first(bundles: Sequence[str], load: LoadData, stored: Mapping[str, BundleData]) -> list[str]:
    """Largest long-term weight first (ties by name). Pulsar's even-distribution filter hands a
    namespace's unowned bundles out in rounds, one per broker, so a round's last bundle has one
    candidate left; in arrival order a big bundle drawn late was forced onto a broker already full
    (generated ``scale_in``: less balanced than AvgShedder in 22 of 86 instances where both balance;
    10 largest first, median final max/min 1.13 -> 1.09)."""

    def weight(bundle: str) -> float:
        data = load.bundle_data.get(bundle) or stored.get(bundle)
        if data is None:
            return 0.0
        lt = data.long_term_data
        return lt.msg_rate + lt.msg_throughput / BYTES_PER_UNIT

    return sorted(bundles, key=lambda b: (-weight(b), b))
