"""BalancedShedder's near-least-cost plan: once the triggers have decided *when* to move, which bundles
to move so that the balance the water-fill would reach (or a better one, where the fill is stuck) is
reached with the least moved.

The water-fill (:mod:`balancer.shedding.water_fill`) takes every participant to within a tolerance of
the target, while the max/min the cluster ends at is usually set by brokers that took no part; the
least any plan must move for that max/min leaves the sources at its top and the destinations at its
bottom (issue 19's eighth round: our plans cost 1.13-1.55 times that least at their own decision
traffic). This solves the assignment exactly, as a small mixed-integer program (HiGHS through
scipy): binary x[bundle, destination] over a restricted candidate set (a few of the largest and
smallest movable bundles of each participant, and the bundles the fill chose), a level m, and
every participant's projected level within [m, aim * m], the brokers taking no part bounding m.
Minimise what is moved (plus a small charge per unload). The unit is the caller's:
:mod:`balancer.shedding.exact_plan` plans in msg rate, with the traffic as a guard.

The fill's guards carry over as the candidate edges: a bundle may only go from a broker to one whose
traffic-implied level and reported utilisation are both lower (the uphill guard), only to a broker
placement's filters let it go to (even distribution), never between a quiet pair. Chains are
allowed (a hot broker's big bundle to the broker with most room, that broker's smaller ones on to
lower ones): a bundle bigger than any destination's room then moves, where the fill left it.

The work limit is HiGHS's node count and the problem's size, so that a plan does not depend on how
loaded the machine is; a wall-clock limit (HiGHS's own timer, the operator's key) bounds a cycle's time
besides, and a solve it stops is not used (issue 49: what a loaded machine cuts short would differ from
run to run). No solution within the limits, or no scipy: the fill's plan stands. HiGHS logs nothing
(``disp`` off); what it writes past its own options (HiGHS 1.12's stray line, issue 49) the process's
entry point keeps off stdout through :func:`set_solve_guard`, which every solve runs inside.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

# Candidates per participant: its this-many largest and smallest movable bundles. Issue 31's run on
# instances 0..19 of five least-cost families: 3 candidates, 4 destinations and 20 nodes left per-run
# moved / least at median 1.18-1.35 (skewed_sizes 1.35 / 2.25); 8, 10 and 500 took it to 1.05-1.18
# (skewed_sizes 1.18 / 1.57) for about 8 times the CPU (0.1 -> ~0.8 s a call); 25, 16 and 2,000 bought
# no more (1.04-1.21). On by default: a cycle that plans pays that, bounded by the limits below.
CANDIDATES_EACH_END = 8
# Destinations per candidate: the this-many lowest participants below its owner.
DESTINATIONS_EACH = 10
# Beyond this many (bundle, destination) pairs the program is not built: the fill's plan stands
# (a 1,000-broker cluster firing at once); keeps a cycle's work bounded whatever the cluster.
MAX_EDGES = 20000
# HiGHS's branch-and-bound node limit: the deterministic work limit.
NODE_LIMIT = 500
# Relative optimality gap at which HiGHS stops: 2% of the least is below what the claims resolve.
MIP_GAP = 0.02
# Charge per unload, as a fraction of the mean candidate weight: an unload is a moment the bundle's
# topics are unavailable, whatever its rate, and a plan least by rate alone chose many small bundles.
# At 0.02 the planner made 11 unloads a hot_bundles run (median) where the fill made 8, and lost 22
# of 100 comparisons with AvgShedder on unloads there; at 0.3, 8.5 on instances 0..29, per-plan
# moved / least 1.04 / 1.17 -> 1.06 / 1.24 (issue 31's fifth round, docs/strategy.md).
UNLOAD_CHARGE = 0.3

# What every HiGHS solve runs inside. HiGHS 1.12 (the one scipy 1.17 bundles) writes a line to C's
# stdout when it repairs an incumbent, whatever its options say; where that stdout is the service's
# or a bench's, the entry point sets a guard that keeps it off (service/leader/solver_output.py).
# Process-wide as the stream it guards is; the core itself does no I/O.
_solve_guard: Callable[[], AbstractContextManager[object]] = nullcontext


def set_solve_guard(guard: Callable[[], AbstractContextManager[object]] | None) -> None:
    """Run every later solve of this process inside ``guard()`` (None: inside nothing)."""
    global _solve_guard
    _solve_guard = guard if guard is not None else nullcontext


@dataclass(frozen=True)
class Plan:
    moves: list[tuple[str, str, str, float]]  # (source, bundle, destination, weight)
    levels: dict[str, float]  # participant -> projected traffic-implied level after the moves
    moved: float  # traffic moved
    aim: float  # the max/min (traffic-implied) the plan keeps everyone within
    charge: float = 0.0  # what the program charged per unload, in the unit of ``moved``


@dataclass
class Solves:
    """What the planner's solves in one cycle did: how many ran, and whether the time limit stopped one."""

    count: int = 0
    timed_out: bool = False
    statuses: list[int] = field(default_factory=list)


def spread(levels: list[float]) -> float:
    """Max/min of ``levels`` (infinite where the lowest is 0 or there are none)."""
    lo = min(levels) if levels else 0.0
    return float("inf") if lo <= 0 else max(levels) / lo


def least_move_plan(
    levels: dict[str, float],
    used: dict[str, float],
    capacity: dict[str, float],
    movable: dict[str, tuple[list[float], list[str]]],
    participants: list[str],
    others: list[float],
    aim: float,
    *,
    must_consider: dict[str, str] | None = None,
    allowed: Callable[[str, str], bool] | None = None,
    quiet: Callable[[str, str], bool] | None = None,
    min_gradient: float = 0.0,
    guard: tuple[dict[str, float], dict[str, float]] | None = None,
    time_limit: float | None = None,
    solves: Solves | None = None,
) -> Plan | None:
    """The cheapest plan found within the work limit that keeps every participant's level
    (``levels``, after the plan) and the ``others``' fixed levels within max/min ``aim``; None
    when there is none within the limit, the program is too big, or scipy is missing.

    ``must_consider`` maps the fill's moves (bundle -> its destination): each is a candidate, and
    its own move an edge whatever the margins.
    ``movable[b]`` = (weights ascending, names) of broker b's movable bundles, in the unit ``levels``
    are in (``levels[b]`` = b's total / ``capacity[b]``); ``used`` its reported utilisation;
    ``quiet(s, d)`` says a pair may not exchange anything. ``guard`` = (traffic-implied levels,
    each bundle's traffic) where the plan is in another unit (msg rate): a move must not invert its
    pair by those either. ``time_limit``: seconds HiGHS may spend (by its own clock); a solve it stops
    gives None, and ``solves`` records that."""
    try:
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix
    except ImportError:  # pragma: no cover - the optional dependency is missing
        return None
    must = must_consider or {}
    cands: list[tuple[str, str, float]] = []  # (owner, bundle, weight)
    for s in participants:
        ws, names = movable.get(s, ([], []))
        n = len(ws)
        picks = set(range(min(CANDIDATES_EACH_END, n))) | set(range(max(0, n - CANDIDATES_EACH_END), n))
        picks |= {i for i, name in enumerate(names) if name in must}
        cands += [(s, names[i], ws[i]) for i in sorted(picks)]
    edges: list[tuple[int, str]] = []  # (candidate index, destination)
    lowest = sorted(participants, key=lambda b: (levels[b], b))
    g_levels, g_weight = guard if guard is not None else (levels, {})
    for ci, (s, bundle, w) in enumerate(cands):
        k = 1 / capacity[s]
        g_w = g_weight.get(bundle, w)
        # As the fill's pairs: the move alone does not invert the pair, by traffic or by report (and
        # by the plan's own unit where that is another).
        below = [
            d
            for d in lowest
            if min(g_levels[s] - g_levels[d], used[s] - used[d]) - min_gradient >= g_w * (k + 1 / capacity[d])
            and levels[s] - levels[d] >= w * (k + 1 / capacity[d])
        ]
        dests = below[:DESTINATIONS_EACH]
        own = must.get(bundle)
        if own is not None and own not in dests:
            # The fill's own move stays an edge: the fill judged it by its rules, move by move, and
            # without it the gradient margin can leave no plan that reaches the fill's balance (the
            # fill's plan then stood at 1.41 times the least: heterogeneous #16, issue 31).
            dests.append(own)
        for d in dests:
            if d == s:
                continue
            if quiet is not None and quiet(s, d):
                continue
            if allowed is not None and not allowed(bundle, d):
                continue
            edges.append((ci, d))
    if not edges or len(edges) > MAX_EDGES:
        return None
    at = {b: j for j, b in enumerate(participants)}
    ne, nb, nj = len(edges), len(cands), len(participants)
    m_col = ne  # the level m
    mean_w = sum(w for _, _, w in cands) / nb
    cost = np.zeros(ne + 1)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    # Rows 0..nb-1: each candidate moves at most once. Rows nb+j: L_j - m >= 0. Rows nb+nj+j:
    # L_j - aim*m <= 0, with L_j = level_j + (in - out) / capacity_j.
    for e, (ci, d) in enumerate(edges):
        s, _bundle, w = cands[ci]
        cost[e] = w + UNLOAD_CHARGE * mean_w
        rows.append(ci)
        cols.append(e)
        vals.append(1.0)
        for j, sign in ((at[s], -1.0), (at[d], 1.0)):
            k = sign * w / capacity[participants[j]]
            rows += [nb + j, nb + nj + j]
            cols += [e, e]
            vals += [k, k]
    lo = np.zeros(nb + 2 * nj)
    hi = np.zeros(nb + 2 * nj)
    hi[:nb] = 1.0
    for j, b in enumerate(participants):
        rows += [nb + j, nb + nj + j]
        cols += [m_col, m_col]
        vals += [-1.0, -aim]
        lo[nb + j], hi[nb + j] = -levels[b], np.inf
        lo[nb + nj + j], hi[nb + nj + j] = -np.inf, -levels[b]
    a = coo_matrix((vals, (rows, cols)), shape=(nb + 2 * nj, ne + 1)).tocsr()
    m_lo = max(others) / aim if others else 0.0
    m_hi = min(others) if others else max(levels[b] for b in participants)
    if m_lo > m_hi:
        return None
    options: dict[str, float | bool] = {"node_limit": NODE_LIMIT, "mip_rel_gap": MIP_GAP, "disp": False}
    if time_limit is not None:
        options["time_limit"] = max(1e-3, time_limit)
    integrality = np.ones(ne + 1)
    integrality[m_col] = 0
    with _solve_guard():
        res = milp(
            cost,
            constraints=LinearConstraint(a, lo, hi),
            integrality=integrality,
            bounds=Bounds(np.r_[np.zeros(ne), m_lo], np.r_[np.ones(ne), m_hi]),
            options=options,
        )
    if solves is not None:
        solves.count += 1
        solves.statuses.append(int(res.status))
    if res.status == 1 and "time limit" in str(res.message).lower():
        # Whatever HiGHS had found by then depends on the machine's load: not a plan to act on.
        if solves is not None:
            solves.timed_out = True
        return None
    if res.x is None:
        return None
    after = {b: levels[b] for b in participants}
    moves: list[tuple[str, str, str, float]] = []
    for e, (ci, d) in enumerate(edges):
        if res.x[e] > 0.5:
            s, bundle, w = cands[ci]
            moves.append((s, bundle, d, w))
            after[s] -= w / capacity[s]
            after[d] += w / capacity[d]
    moves = _by_name(moves, cands, allowed)
    if spread([*after.values(), *others]) > aim * (1 + 1e-6):
        return None  # rounding left it outside: do not trust it
    return Plan(moves, after, sum(w for *_, w in moves), aim, UNLOAD_CHARGE * mean_w)


def _by_name(
    moves: list[tuple[str, str, str, float]],
    cands: list[tuple[str, str, float]],
    allowed: Callable[[str, str], bool] | None,
) -> list[tuple[str, str, str, float]]:
    """Among a broker's candidates of equal weight, the last names move first (as the fill picks them):
    the solver's choice between equal bundles is arbitrary, a plan should not be."""
    pool: dict[tuple[str, float], list[str]] = {}
    for s, bundle, w in cands:
        pool.setdefault((s, w), []).append(bundle)
    for names in pool.values():
        names.sort(reverse=True)
    out = []
    for s, _bundle, d, w in sorted(moves, key=lambda m: (m[0], m[2], m[1])):
        names = pool[(s, w)]
        pick = next((n for n in names if allowed is None or allowed(n, d)), None)
        if pick is None:
            return moves  # a filter tells equal bundles apart: the solver's names stand
        names.remove(pick)
        out.append((s, pick, d, w))
    return out
