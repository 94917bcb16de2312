"""Each shedding cycle's plan judged on its own (issue 31's cost claim): the msg rate a cycle's moves
move, at the traffic they were decided on (the reports of the interval before), over the least any
plan must move there to reach the balance those moves reach (:func:`balancer.sim.bounds.balance_bound`).
Per run, the sum of its plans' moved over the sum of their least. A plan that reaches no better
balance than it started from has no least cost and is left out (as is a cycle that moved nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from balancer.sim.bounds import balance_bound
from balancer.sim.engine import CycleState, MoveRecord, SimResult, Simulation
from balancer.sim.metrics import last_disturbance
from balancer.sim.model import Traffic


class Recording(Simulation):
    """The simulation, keeping each interval's bundle msg rates and who owned what before its moves."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.seen: dict[int, tuple[dict[str, float], dict[str, str]]] = {}

    def _traffic(self, k: int) -> dict[str, Traffic]:
        t = super()._traffic(k)
        self.seen[k] = ({b: x.rate for b, x in t.items()}, dict(self.cluster.owners))
        return t


def judged(
    start: CycleState, rates: dict[str, float], before: dict[str, str], after: dict[str, str]
) -> float | None:
    """moved / least at ``rates``, for the balance ``after`` has there (as ``family_claims._cost``)."""
    cap = dict(zip(start.brokers, start.capacity, strict=True))
    per: dict[str, list[float]] = {b: [] for b in start.brokers}
    for b, o in before.items():
        if o in per:
            per[o].append(rates.get(b, 0.0))
    state = CycleState(
        cycle=start.cycle,
        brokers=start.brokers,
        capacity=start.capacity,
        util=[0.0] * len(start.brokers),
        msg_rate=[sum(per[b]) for b in start.brokers],
        throughput=[0.0] * len(start.brokers),
        unloads=0,
        placements=0,
        bundle_rates=[sorted(per[b], reverse=True) for b in start.brokers],
    )
    load = dict.fromkeys(start.brokers, 0.0)
    for b, o in after.items():
        if o in load:
            load[o] += rates.get(b, 0.0)
    norm = [load[b] / cap[b] for b in start.brokers]
    moved = sum(rates.get(b, 0.0) for b, o in after.items() if before.get(b, o) != o)
    if min(norm) <= 0 or moved <= 0:
        return None
    least = balance_bound(state, max(norm) / min(norm)).rate
    return moved / least if least > 0 else None


@dataclass(frozen=True)
class PlanCosts:
    plans: list[float]  # moved / least of each plan since the last disturbance, in cycle order
    run: float | None  # sum of the plans' moved over the sum of their least


def plan_costs(sim: Recording, r: SimResult) -> PlanCosts:
    """Every plan of ``r`` (run by ``sim``) since the last disturbance, judged on its own."""
    start = last_disturbance(r)
    by_cycle: dict[int, list[MoveRecord]] = {}
    for m in r.moves:
        if m.cycle >= start.cycle:
            by_cycle.setdefault(m.cycle, []).append(m)
    plans: list[float] = []
    moved_sum = least_sum = 0.0
    for k, moves in sorted(by_cycle.items()):
        if k - 1 not in sim.seen or k not in sim.seen or k >= len(r.cycles):
            continue
        rates, before = sim.seen[k - 1][0], sim.seen[k][1]
        after = dict(before)
        for m in moves:
            after[m.bundle] = m.destination
        ratio = judged(r.cycles[k], rates, before, after)
        if ratio is None:
            continue
        moved = sum(rates.get(m.bundle, 0.0) for m in moves)
        plans.append(ratio)
        moved_sum += moved
        least_sum += moved / ratio
    return PlanCosts(plans, moved_sum / least_sum if least_sum > 0 else None)
