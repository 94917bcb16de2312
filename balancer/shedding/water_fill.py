"""BalancedShedder's moves once brokers have triggered: water-filling from the sources above the
target to the destinations below it, the ranking of each source's movable bundles, and the model of
placement's even-distribution filter the fill respects."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator, Mapping

from balancer.bundles import namespace_of
from balancer.explain import explain
from balancer.models import LoadData
from balancer.shedding.capacity import View
from balancer.shedding.exact_plan import PlannerBudget, exact_plan, uphill_moves
from balancer.shedding.least_move import Solves
from balancer.shedding.oversized import Cluster, bigger_home, why_oversized
from balancer.shedding.selection import ResultBuilder, sheddable

# Reported utilisation may invert by up to this many tolerances (one band) in a move: the report is an
# interval old and carries its own CPU noise, and holding it exact dropped sources that still had room
# elsewhere (scale_out: 18 of 20 generated instances balanced within 3 cycles, 20 of 20 with the slack;
# uphill moves beyond 2 points stayed 0 either way).
USED_SLACK = 8

# The widest max/min (traffic-implied) the fill's stopping envelope may span; below the 1.25 the
# claims call balanced, for the traffic noise the final judgement sees.
ENVELOPE_RATIO = 1.15
# Where every broker is of one hardware class, destinations may be filled up to the top of that
# envelope centred on the target, T * (1 + r) with (1 + r) / (1 - r) = ENVELOPE_RATIO, instead of one
# tolerance above it: traffic-implied levels there are plain traffic ratios, with no capacity estimate
# between them, so a plan that ends inside the envelope ends inside it by load. A source's big bundles
# then fit somewhere and fewer of them move (generated hot_bundles: more unloads than AvgShedder at
# equal balance 16 -> 10 of 100). Across hardware classes the estimates' error adds to the envelope, so
# the fill keeps to the tolerance there (heterogeneous clusters must end within 1.25).
ONE_CLASS_REACH = (ENVELOPE_RATIO - 1) / (ENVELOPE_RATIO + 1)
# With that reach, a move between brokers nearer than this many tolerances (about the 2-point uphill
# margin at the default band) is within one interval's noise of going uphill (skewed_sizes #22: a
# destination filled to within a point of its source, 4 points above it by the next interval's load).
MIN_GRADIENT_TOLS = 2


def water_fill(
    load: LoadData,
    v: View,
    sources: list[str],
    dests: list[str],
    tol: float,
    out: ResultBuilder,
    allowed: Callable[[str, str], bool] | None = None,
    others: list[str] | None = None,
    sides: tuple[bool, bool] = (True, True),
    quiet_pairs: tuple[set[str], float] | None = None,
    reach: float | None = None,
    exact: bool = True,
    joining: frozenset[str] = frozenset(),
    budget: PlannerBudget | None = None,
    steady: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Largest excess first: move the source's biggest bundle that neither takes it below
    target - tol nor lifts the least utilised destination above target + reach (``reach``: the
    tolerance unless given, at least the tolerance: see :func:`reach_of`), until every broker is
    within those bounds.
    Returns each source's and destination's projected gap to the target after the moves.

    ``allowed(bundle, destination)`` says whether placement's filters will let the bundle go there
    (a bundle bound to a destination they remove is placed by another rule, or not moved); a
    source whose fitting bundles may not go to the lowest destination tries the next lowest.

    ``others`` are the brokers taking no part whose reports are current: the fill stops at their
    envelope (see :func:`envelope`) rather than at the target's tolerance.

    ``quiet_pairs`` = (the brokers that triggered, a gap): a pair of which neither triggered moves
    only while its traffic-implied levels differ by more than the gap (the band). Two in-band brokers
    a few points apart by a report an interval old are within one interval's noise of each other when
    bundle sizes are heavy-tailed (skewed_sizes #22: a source 9 points lower and a destination 6
    points higher by the interval of the move, 5.5 points uphill).

    ``joining`` are the brokers the join rule fired for (:mod:`balancer.shedding.underloaded`): their
    report is their idle JVM's, so their traffic-implied level stands for it in the report guard.

    ``budget``: the least-move planner's time limit and clock (see :class:`PlannerBudget`).

    ``steady``: each broker's smoothed traffic-implied level (see
    :class:`balancer.shedding.oversized.Cluster`): a swap needs the excess there too."""
    if not sources or not dests:
        return {}
    # Traffic-implied utilisation: what each broker's traffic costs it, by its own capacity.
    capacity = v.capacity
    proj = {b: v.implied(b) for b in v.util}
    used = dict(v.util)
    # A joining broker's report is mostly its idle floor, and a floor does not grow with traffic: a
    # capacity estimated as traffic / utilisation on the others (floor included) made every move to it
    # look like 5 points of its CPU where it cost 1, and the guard stopped the fill half way (join #15:
    # three new brokers at 4,100 msg/s against 8,600, max/min 2.18 for the rest of the run).
    for b in joining:
        used[b] = proj[b]
    start_used = dict(used)
    start_levels = dict(proj)
    target = v.traffic_target
    reach = tol if reach is None else reach
    floor, ceiling = target - tol, target + reach
    min_gradient = MIN_GRADIENT_TOLS * tol if reach > tol else 0.0
    src_stop, dst_stop = envelope([proj[b] for b in others or ()], floor, ceiling)
    src_heap = [(-proj[s], s) for s in sources]
    dst_heap = [(proj[d], d) for d in dests]
    heapq.heapify(src_heap)
    heapq.heapify(dst_heap)
    # The destinations in ascending order, kept up to date move by move, for the walk over them
    # (_in_order): sorting the heap for each move cost O(n log n) a move, 4.7 s of a 7,883-move plan
    # over 1,000 brokers, and popping a copy of it cost as much where placement's filters sent the
    # walk hundreds deep. Entries go stale exactly as the heap's do (a level no longer current).
    ordered = sorted(dst_heap)
    heappop, heappush = heapq.heappop, heapq.heappush
    ranked: dict[str, tuple[list[float], list[str]]] = {}
    # (source, bundle, destination, weight, source's and destination's projections after it)
    moved: list[tuple[str, str, str, float, float, float]] = []
    cluster: Cluster | None = None  # built where a bundle fits nowhere (rare: a large cycle skips it)
    oversized: dict[str, str] = {}  # bundle -> why the oversized-bundle rule moved it
    while src_heap and dst_heap:
        if len(dst_heap) > 2 * len(dests) + 64:
            # Every move pushes its destination again and leaves the old entry stale: drop them, or
            # each walk over the destinations (and bigger_home's) grows with the moves made so far.
            dst_heap[:] = [x for x in dst_heap if x[0] == proj[x[1]]]
            heapq.heapify(dst_heap)
        s = heappop(src_heap)[1]
        while dst_heap[0][0] != proj[dst_heap[0][1]]:
            heappop(dst_heap)  # stale: that destination was filled out of heap order
            if not dst_heap:
                break
        if not dst_heap:
            break
        d = dst_heap[0][1]
        p_s, p_d = proj[s], proj[d]
        room_d = ceiling - p_d
        # Done once the triggered side is inside the envelope of the brokers left out (at least the
        # tolerance): the highest source at most at src_stop, the lowest destination at least at
        # dst_stop. Shedding further only spends unloads on balance the others do not have; an
        # untriggered source inside the tolerance still sheds while a triggered destination is
        # below its stop (a restarted broker is refilled).
        settled = p_s <= target or ((not sides[0] or p_s <= src_stop) and (not sides[1] or p_d >= dst_stop))
        if settled or room_d <= 0:
            if room_d <= 0:
                heappop(dst_heap)
                heappush(src_heap, (-p_s, s))
            continue
        lists = ranked.get(s)
        if lists is None:
            lists = ranked[s] = sheddable(load, s, v.tp_unit)
        ws, names = lists
        k_s = 1 / capacity[s]
        i = -1
        lowest = d
        walk = allowed is not None or quiet_pairs is not None
        for d in _in_order(lowest, ordered, proj, ceiling) if walk else (lowest,):
            p_d = proj[d]
            quiet = quiet_pairs is not None and p_s - p_d < quiet_pairs[1] and not quiet_pairs[0] & {s, d}
            if quiet or p_s - p_d < min_gradient:
                i = -1
                continue
            k_d = 1 / capacity[d]
            # Largest w with w*k_s <= room_s and w*k_d <= room_d, and no inversion of the pair.
            # Nor, beyond the slack, of their reported utilisation: traffic-implied projections
            # ignore other processes' CPU, and moves that were downhill by traffic went up to 6
            # points uphill.
            limit = min(
                (p_s - floor) / k_s,
                (ceiling - p_d) / k_d,
                (p_s - p_d) / (k_s + k_d),
                (used[s] - used[d] + USED_SLACK * tol) / (k_s + k_d),
            )
            i = bisect.bisect_right(ws, limit) - 1
            while i >= 0 and allowed is not None and not allowed(names[i], d):
                i -= 1
            if i >= 0 or p_d >= p_s:
                break
        if i < 0:
            if cluster is None:
                cluster = Cluster(
                    sum(proj[b] * capacity[b] for b in proj),
                    sum(capacity[b] for b in proj),
                    lambda b: sum(sheddable(load, b, v.tp_unit)[0]),
                    steady or {},
                )
            home = bigger_home(s, ws, names, dst_heap, proj, used, capacity, tol, allowed, cluster)
            if home is None:
                continue  # nothing of s fits: s drops out
            i, d, swap = home
            oversized[names[i]] = why_oversized(s, d, swap)
            k_d = 1 / capacity[d]
            p_d = proj[d]
        w, bundle = ws.pop(i), names.pop(i)
        p_s -= w * k_s
        proj[s] = p_s
        used[s] -= w * k_s
        used[d] += w * k_d
        p_d += w * k_d
        heappush(dst_heap, (p_d, d))
        at = bisect.bisect_left(ordered, (proj[d], d))
        if at < len(ordered) and ordered[at] == (proj[d], d):
            del ordered[at]
        bisect.insort(ordered, (p_d, d))
        proj[d] = p_d
        heappush(src_heap, (-p_s, s))
        moved.append((s, bundle, d, w, p_s, p_d))
    planner: dict[str, str] = {}
    if exact:
        # Every broker with a current report takes part: the max/min a plan buys is the cluster's, and a
        # plan levelling only the brokers that fired left it to the others (issue 31: per-plan moved /
        # least p95 2.44 -> 1.52 heterogeneous, 2.15 -> 1.50 skewed sizes on instances 0..19, against
        # 2.95 and 1.89 with the others' levels fixed).
        participants = list(dict.fromkeys((*sources, *dests, *(others or ()))))
        budget = budget or PlannerBudget()
        solves = Solves()
        started = budget.clock() if budget.clock is not None else None
        plan = exact_plan(
            load,
            v,
            participants,
            start_levels,
            moved,
            ranked,
            allowed,
            quiet_pairs,
            # Pairs nearer than this by traffic or by report exchange nothing: the fill never inverts a
            # pair by a move, the planner may, and one interval's noise then makes the move uphill.
            max(min_gradient, MIN_GRADIENT_TOLS * tol),
            start_used,
            budget.time_limit,
            solves,
        )
        if started is not None and budget.clock is not None:
            out.notes["plannerSeconds"] = round(budget.clock() - started, 4)
        out.notes["plannerSolves"] = solves.count
        # Whatever the program's edges allowed, a plan that sends a bundle from a less to a more
        # utilised broker, by the reports this cycle decided on or by traffic-implied level, is not
        # taken (issue 49: one such move in two of five seeds of an unseen scenario; the fill made none).
        # A joining broker's report is its idle floor: its traffic-implied level stands for it, as in
        # the fill's guard (join #15: a plan refused for a new broker reporting 24.5 % beside a source at
        # 24.5 %, its floor 21 % against the source's 20 %, and the fill's plan left it at 1.37).
        uphill = [] if plan is None else uphill_moves(plan.moves, start_used)
        uphill += [] if plan is None else uphill_moves(plan.moves, start_levels)
        if uphill:
            out.notes["planner"] = f"fill: the least-move plan moved uphill ({uphill[0]})"
            out.notes["plannerRejectedUphill"] = len(uphill)
            planner["planner"] = "fill"
        elif solves.timed_out:
            out.notes["planner"] = (
                "fill: the least-move planner ran out of its time"
                f" (loadBalancerBalancedShedderPlannerTimeLimitSeconds={budget.time_limit:g})"
            )
            out.notes["plannerTimedOut"] = True
            planner["planner"] = "fill"
        elif plan is not None:
            moved = []
            proj.update(start_levels)
            for s, bundle, d, w in plan.moves:
                proj[s] -= w / capacity[s]
                proj[d] += w / capacity[d]
                moved.append((s, bundle, d, w, proj[s], proj[d]))
            out.notes["planner"] = "least_move"
            planner["planner"] = "least_move"
        else:
            # Which plan the operator's key got is part of the decision's why.
            out.notes["planner"] = "fill: no cheaper least-move plan within the work limit"
            planner["planner"] = "fill"
    util, unloads, decisions, destinations = v.util, out.unloads, out.decisions, out.destinations
    for s, bundle, d, w, p_s, p_d in moved:
        unloads.setdefault(s, []).append(bundle)
        decisions.append(
            explain(
                "balance",
                oversized.get(bundle) or f"moves {s} toward the target, bound to {d}",
                subject=bundle,
                broker=s,
                weight=w,
                sourceUtil=util[s],
                sourceProjected=p_s,
                destination=d,
                destinationProjected=p_d,
                target=target,
                **planner,
            )
        )
        destinations[bundle] = d
    return {b: proj[b] - target for b in (*sources, *dests)}


def reach_of(v: View, tol: float) -> float:
    """How far above the target the fill may take a destination: the envelope's top (ONE_CLASS_REACH)
    where every broker is of one hardware class, else the tolerance."""
    return max(tol, ONE_CLASS_REACH * v.traffic_target) if len(set(v.capacity.values())) == 1 else tol


def even_spread(load: LoadData, v: View) -> Callable[[str, str], bool]:
    """Whether placement's even-distribution filter lets a bundle go to a broker: only brokers holding
    the fewest bundles of its namespace survive it. A bundle bound to a broker it removes was placed
    by the reported utilisation instead (a 2x broker 10% under the target was sent nothing for 20
    minutes while its bound bundles went elsewhere or stayed, heterogeneous #95)."""
    counts: dict[str, dict[str, int]] = {}
    for b in v.util:
        data = load.broker_data[b]
        for names in (data.local_data.last_stats, data.preallocated_bundle_data):
            for bundle in names:
                per = counts.setdefault(namespace_of(bundle), {})
                per[b] = per.get(b, 0) + 1
    least: dict[str, int] = {}

    def allowed(bundle: str, broker: str) -> bool:
        ns = namespace_of(bundle)
        per = counts.get(ns, {})
        if ns not in least:
            least[ns] = 0 if len(per) < len(v.util) else min(per.values())
        return per.get(broker, 0) == least[ns]

    return allowed


def envelope(levels: list[float], floor: float, ceiling: float) -> tuple[float, float]:
    """Where the fill may stop: sources at the highest level among ``levels`` (brokers taking no
    part), destinations at the lowest, never nearer the target than ``floor`` / ``ceiling`` and never
    wider than ENVELOPE_RATIO. Moving a participant deeper inside than the rest of the cluster buys
    no balance: the brokers left out set the max/min the run ends at, and the least-cost bound for
    that balance leaves the sources there."""
    if not levels or floor <= 0:
        return ceiling, floor
    hi, lo = max(levels), min(levels)
    src_stop = max(ceiling, min(hi, ENVELOPE_RATIO * min(lo, floor)))
    dst_stop = min(floor, max(lo, max(hi, ceiling) / ENVELOPE_RATIO))
    return src_stop, dst_stop


def _in_order(
    first: str, ordered: list[tuple[float, str]], proj: dict[str, float], ceiling: float
) -> Iterator[str]:
    """The lowest destination, then the others with room, lowest first (``ordered``: ascending)."""
    yield first
    for p, e in ordered:
        if p >= ceiling:
            return  # the rest are no lower
        if e != first and p == proj[e]:
            yield e
