"""BalancedShedder's join rule: a broker its traffic says is (nearly) empty is filled at once.

An idle broker's JVM reads 10-25 % CPU, so a broker that has just joined can sit within the fast path's
gap of the target (20 points by default) and wait HitCountLow (8) confirming cycles before anything
moves to it (issue 46: a new real broker filled at minute 16). Its traffic says otherwise: TransferShedder
(Pulsar's Extensible load manager, PR #22321) counts a broker as underloaded when its throughput is below
a fraction of the busiest broker's, whatever its CPU. Here both its msg rate and its throughput must be
below that fraction of the busiest broker's, each per unit of the broker's estimated capacity (a small
broker balanced by utilisation carries a fraction of a big one's traffic and is not joining), or it owns
no bundles at all.
"""

from __future__ import annotations

from balancer.models import LoadData
from balancer.shedding.capacity import View


def joining(load: LoadData, v: View, multiplier: float, brokers: list[str]) -> dict[str, str]:
    """``brokers`` (among those in ``v``) the join rule fires for, each with why; none where
    ``multiplier`` <= 0 or the busiest broker carries no traffic."""
    if multiplier <= 0 or len(v.util) < 2:
        return {}
    rate: dict[str, float] = {}
    tp: dict[str, float] = {}
    for b in v.util:
        local = load.broker_data[b].local_data
        c = v.capacity.get(b) or 1.0
        rate[b], tp[b] = local.msg_rate / c, local.msg_throughput / c
    top_rate, top_tp = max(rate.values()), max(tp.values())
    if top_rate <= 0 and top_tp <= 0:
        return {}
    out: dict[str, str] = {}
    for b in brokers:
        if not load.broker_data[b].local_data.bundles:
            out[b] = "joining: owns no bundles while others carry traffic"
            continue
        r = rate[b] / top_rate if top_rate > 0 else 0.0
        t = tp[b] / top_tp if top_tp > 0 else 0.0
        if r < multiplier and t < multiplier:
            out[b] = (
                f"joining: msg rate {r:.0%} and throughput {t:.0%} of the busiest broker's per unit of"
                f" capacity, both below {multiplier:g} (loadBalancerBalancedShedderUnderloadedMultiplier)"
            )
    return out
