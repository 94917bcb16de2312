"""Where the least-move planner (:mod:`balancer.shedding.least_move`) replaces the water-fill's plan,
and in what unit it plans.

The triggers fire on what brokers report (Pulsar's load: the highest resource usage), and the fill
levels traffic (msg rate plus bytes / 6 KiB, what that usage follows). The planner decides *what* to
move in **msg rate**, for the moved msg rate and the msg-rate max/min (capacity weighted): that is
what issue 31's claim prices and balances, and what Pulsar's default placement
(LeastLongTermMessageRate) evens out. The two differ per bundle by up to a quarter where message
sizes differ, so the plan least in traffic is not the least in msg rate: planned in traffic, the
planner's per-plan moved / least was 1.07-1.20 at the median and 1.26-1.55 at p95 on instances 0..29
of the four least-cost families; in msg rate, 1.04 and 1.11-1.41 (docs/strategy.md, issue 31's fifth
round). The traffic stays a guard: no move inverts its pair by traffic-implied level or by report.

Where the fill's plan narrows the msg-rate max/min not at all (a cluster bound by its NICs, whose
bytes the fill levels), there is nothing to aim at in msg rate and the fill's plan stands.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from balancer.models import LoadData
from balancer.shedding.capacity import View
from balancer.shedding.least_move import (
    CANDIDATES_EACH_END,
    DESTINATIONS_EACH,
    MAX_EDGES,
    Plan,
    Solves,
    least_move_plan,
    spread,
)
from balancer.shedding.selection import sheddable

# The balance (msg-rate max/min) the planner aims at where the fill's plan would leave the cluster
# wider than this (a bundle bigger than any destination's room, issue 31): the fill's envelope.
EXACT_AIM = 1.15

# (source, bundle, destination, traffic, source's and destination's projections after it)
Move = tuple[str, str, str, float, float, float]


def exact_plan(
    load: LoadData,
    v: View,
    participants: list[str],
    start: dict[str, float],
    fill: list[Move],
    ranked: dict[str, tuple[list[float], list[str]]],
    allowed: Callable[[str, str], bool] | None,
    quiet_pairs: tuple[set[str], float] | None,
    min_gradient: float,
    reported: dict[str, float] | None = None,
    time_limit: float | None = None,
    solves: Solves | None = None,
) -> Plan | None:
    """The planner's plan, its moves weighted in traffic as the fill's are, where it reaches the fill's
    msg-rate balance for less msg rate, or a better balance where the fill's is beyond EXACT_AIM; else
    None and the fill's plan stands. ``start`` holds the traffic-implied levels before any move,
    ``ranked`` the fill's rankings (its moves popped off them), ``reported`` the levels the report guard
    compares (each broker's reported utilisation, or what stands for it: the fill's; ``v.util`` when
    None). ``time_limit`` (seconds) is shared among the solves, so a cycle's planning stays within it; once a
    solve runs out of it, None (``solves`` says so)."""
    if len(participants) < 2 or spread([start[b] for b in participants]) <= 1.0:
        return None
    if len(participants) * 2 * CANDIDATES_EACH_END * DESTINATIONS_EACH > MAX_EDGES:
        return None  # too big a program: the fill's plan (and no ranking of every broker's bundles)
    cap = v.capacity
    traffic: dict[str, float] = {}  # bundle -> traffic, the guard's and the caller's unit
    movable: dict[str, tuple[list[float], list[str]]] = {}  # broker -> msg rates ascending, names
    for b in participants:
        got = ranked.get(b)
        ws, names = got if got is not None else sheddable(load, b, v.tp_unit)
        ws, names = list(ws), list(names)
        # The fill popped its moves off ``ranked``: they are candidates again.
        for s, bundle, _d, w, _ps, _pd in fill:
            if s == b:
                i = bisect.bisect_left(ws, w)
                ws.insert(i, w)
                names.insert(i, bundle)
        traffic.update(zip(names, ws, strict=True))
        by_rate = sorted((_rate(load, b, n), n) for n in names)
        movable[b] = ([r for r, _ in by_rate], [n for _, n in by_rate])
    levels = {b: load.broker_data[b].local_data.msg_rate / cap[b] for b in participants}
    after = dict(levels)
    fill_moved = 0.0
    for s, bundle, d, _w, _ps, _pd in fill:
        r = _rate(load, s, bundle)
        after[s] -= r / cap[s]
        after[d] += r / cap[d]
        fill_moved += r
    r_now, r_fill = spread(list(levels.values())), spread(list(after.values()))
    aims = [r_fill] if r_fill <= EXACT_AIM else [EXACT_AIM, (EXACT_AIM + r_fill) / 2, r_fill]
    aims = [a for a in aims if a < r_now]
    quiet = None
    if quiet_pairs is not None:
        fired, gap = quiet_pairs

        def quiet(s: str, d: str) -> bool:
            return start[s] - start[d] < gap and not fired & {s, d}

    used = {b: (v.util if reported is None else reported)[b] for b in participants}
    share = None if time_limit is None or not aims else time_limit / len(aims)
    for aim in aims:
        plan = least_move_plan(
            levels,
            used,
            cap,
            movable,
            participants,
            [],
            aim,
            must_consider={m[1]: m[2] for m in fill},
            allowed=allowed,
            quiet=quiet,
            min_gradient=min_gradient,
            guard=(start, traffic),
            time_limit=share,
            solves=solves,
        )
        if solves is not None and solves.timed_out:
            return None
        # At the fill's balance the planner's plan must be cheaper by the measure the program chose it
        # by, its charge per unload included: by moved rate alone, a plan within the solver's gap
        # could replace one of the fill's moves with two smaller ones.
        cheaper = plan is not None and plan.moved + plan.charge * len(
            plan.moves
        ) < fill_moved + plan.charge * len(fill)
        if plan is not None and (aim < r_fill * (1 - 1e-9) or cheaper):
            moves = [(s, n, d, traffic[n]) for s, n, d, _r in plan.moves]
            return Plan(moves, plan.levels, plan.moved, aim)
    return None


@dataclass(frozen=True)
class PlannerBudget:
    """The planner's limits in one cycle: HiGHS's time limit (seconds, shared among its solves) and the
    clock its time is reported by (injected: the pure core reads no clock; without one, no time)."""

    time_limit: float | None = None
    clock: Callable[[], float] | None = None


def uphill_moves(moves: list[tuple[str, str, str, float]], reported: dict[str, float]) -> list[str]:
    """The moves (as "bundle: source u% -> destination u%") whose source was less utilised than their
    destination at decision time, by the reports the cycle decided on (or what stands for them)."""
    return [
        f"{bundle}: {s} {reported[s]:.1f}% -> {d} {reported[d]:.1f}%"
        for s, bundle, d, _w in moves
        if reported[s] < reported[d]
    ]


def _rate(load: LoadData, broker: str, bundle: str) -> float:
    """A bundle's msg rate (in + out) from the stats :func:`sheddable` weighed it by."""
    last = load.broker_data[broker].local_data.last_stats
    st = last.get(bundle) or load.bundle_data[bundle].short_term_data
    return st.msg_rate_in + st.msg_rate_out
