"""Quality metrics of one simulated run. Definitions (all on the simulator's true state, never on
the lagging reports the leader saw):

- *normalised* msg rate / throughput of a broker = its value divided by its capacity (1.0 = a
  standard broker), so on heterogeneous hardware "balanced" means proportional to strength;
  on homogeneous clusters it is the plain value.
- ``rate_ratio(state)`` = max / min normalised msg rate over live brokers (``inf`` if min is 0);
  ``tp_ratio`` the same for throughput; ``cpu_range`` = max - min utilisation (percentage points of
  each broker's own capacity; utilisation = max of CPU, NIC in, NIC out).
- *balanced* = ``rate_ratio <= 1.25``. ``cycles_to_balanced`` = ``c - disturbance_at + 1`` for the
  first cycle ``c >= disturbance_at`` whose post-move state is balanced (the number of shedding
  cycles run since the disturbance, its own included); ``None`` if never.
  ``minutes_to_balanced`` = that times the shedding interval.
- ``final_*`` = the values in the last cycle's post-move state.
- ``unloads`` = bundles moved by shedding (placements of orphaned bundles are counted apart in
  ``placements``); ``moved_rate`` / ``moved_throughput`` = the moved bundles' true traffic in the
  cycle they moved.
- ``lower_bound_rate`` = traffic above the mean on overloaded brokers in the pre-move state of
  the disturbance cycle: ``LB(s) = sum(max(0, rate_b - cap_b * R / C))`` with ``R`` the total msg
  rate and ``C`` the total capacity; no strategy can balance with less. When brokers join or leave
  again later (rolling restarts), each such cycle ``k`` adds the imbalance it created:
  ``max(0, LB(pre-move state of k) - LB(post-move state of k-1))``. ``moved_vs_lower_bound`` =
  ``moved_rate / lower_bound_rate`` (``None`` when both are 0, ``inf`` when only the bound is 0).
- ``balance_bound_rate`` / ``balance_bound_unloads`` = the least msg rate and the fewest bundles any
  strategy must move to end balanced, from the pre-move state of the last disturbance (the last
  join or leave, else the disturbance cycle; after it only unloads move traffic), at that state's
  traffic: see :func:`balancer.sim.bounds.balance_bound`. ``final_bound_rate`` /
  ``final_bound_unloads`` = the same bound for ending at this run's own final rate max/min (what
  reaching its result costs at least). A run that moved less than ``balance_bound_rate`` cannot
  have ended balanced but for traffic drift: its lower cost is not comparable with a run that
  balanced.
- ``uphill_moves`` = moves whose source's utilisation was below its destination's just before
  the move. ``uphill_beyond_margin`` = moves whose destination's *load* (utilisation without this
  interval's Gaussian CPU noise, which no leader can have seen) exceeded the source's by more than
  ``UPHILL_MARGIN`` points: traffic noise between the report and the move shifts a broker's load by
  well under a point at the simulated sizes, so beyond the margin the strategy chose wrongly.
  ``uphill_expected`` = the same on each broker's load at its bundles' expected traffic (no traffic
  noise either): with heavy-tailed bundle sizes one interval's traffic noise moves a broker's load by
  several points (``skewed_sizes``), which no leader can have seen either.
- ``averaged_rate_ratio`` = max / min over brokers (live in every cycle of the second half) of the
  normalised msg rate averaged over the second half of the run: the balance that counts under
  periodic load, which sways every instant's ratio. ``late_unloads`` = unloads in the second half.
- ``jitter_unloads`` = unloads of the run minus unloads of the same run (same seed) with the
  scenario's jitter events removed, floored at 0 (``None`` for scenarios without jitter events).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from balancer.sim.bounds import BALANCED_RATIO, Bound, balance_bound
from balancer.sim.engine import CycleState, SimResult

UPHILL_MARGIN = 2.0  # points


def _ratio(values: list[float]) -> float:
    if not values:
        return math.inf
    lo, hi = min(values), max(values)
    return math.inf if lo <= 0 else hi / lo


def rate_ratio(s: CycleState) -> float:
    return _ratio([r / c for r, c in zip(s.msg_rate, s.capacity, strict=True)])


def tp_ratio(s: CycleState) -> float:
    return _ratio([t / c for t, c in zip(s.throughput, s.capacity, strict=True)])


def cpu_range(s: CycleState) -> float:
    return max(s.util) - min(s.util) if s.util else 0.0


def lower_bound(s: CycleState) -> float:
    total_c = sum(s.capacity)
    if total_c <= 0:
        return 0.0
    mean = sum(s.msg_rate) / total_c
    return sum(max(0.0, r - c * mean) for r, c in zip(s.msg_rate, s.capacity, strict=True))


def last_disturbance(r: SimResult) -> CycleState:
    """The pre-move state after which only unloads move traffic (no more joins, leaves or orphans)."""
    return r.pre_events[-1] if r.pre_events else r.pre_disturbance


@dataclass
class Quality:
    scenario: str
    strategy: str
    seed: int
    cycles: int
    cycles_to_balanced: int | None
    minutes_to_balanced: float | None
    final_rate_ratio: float
    final_tp_ratio: float
    final_cpu_range: float
    unloads: int
    placements: int
    moved_rate: float
    moved_throughput: float
    lower_bound_rate: float
    moved_vs_lower_bound: float | None
    balance_bound_rate: float
    balance_bound_unloads: int
    final_bound_rate: float
    final_bound_unloads: int
    uphill_moves: int
    jitter_unloads: int | None
    uphill_beyond_margin: int = 0
    uphill_expected: int = 0
    averaged_rate_ratio: float = math.inf
    late_unloads: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in d.items()} | {
            k + "_is_inf": True for k, v in d.items() if isinstance(v, float) and math.isinf(v)
        }


def quality(r: SimResult, without_jitter: SimResult | None = None) -> Quality:
    start = min(r.disturbance_at, len(r.cycles) - 1)
    first = next((s.cycle for s in r.cycles[start:] if rate_ratio(s) <= BALANCED_RATIO), None)
    cycles_to = None if first is None else first - start + 1
    moved_rate = sum(m.msg_rate for m in r.moves)
    lb = lower_bound(r.pre_disturbance)
    for pre in r.pre_events:
        lb += max(0.0, lower_bound(pre) - lower_bound(r.cycles[pre.cycle - 1]))
    if lb > 0:
        vs_lb: float | None = moved_rate / lb
    else:
        vs_lb = None if moved_rate == 0 else math.inf
    jitter = None if without_jitter is None else max(0, len(r.moves) - len(without_jitter.moves))
    last = r.cycles[-1]
    start_state = last_disturbance(r)
    to_balance = balance_bound(start_state)
    final_ratio = rate_ratio(last)
    to_final = balance_bound(start_state, final_ratio) if math.isfinite(final_ratio) else Bound(0.0, 0)
    return Quality(
        scenario=r.scenario,
        strategy=r.pair.label,
        seed=r.seed,
        cycles=len(r.cycles),
        cycles_to_balanced=cycles_to,
        minutes_to_balanced=None if cycles_to is None else cycles_to * r.interval_minutes,
        final_rate_ratio=rate_ratio(last),
        final_tp_ratio=tp_ratio(last),
        final_cpu_range=cpu_range(last),
        unloads=len(r.moves),
        placements=r.placements,
        moved_rate=moved_rate,
        moved_throughput=sum(m.throughput for m in r.moves),
        lower_bound_rate=lb,
        moved_vs_lower_bound=vs_lb,
        balance_bound_rate=to_balance.rate,
        balance_bound_unloads=to_balance.unloads,
        final_bound_rate=to_final.rate,
        final_bound_unloads=to_final.unloads,
        uphill_moves=sum(1 for m in r.moves if m.source_util < m.destination_util),
        jitter_unloads=jitter,
        uphill_beyond_margin=sum(1 for m in r.moves if m.destination_load - m.source_load > UPHILL_MARGIN),
        uphill_expected=sum(1 for m in r.moves if m.destination_expected - m.source_expected > UPHILL_MARGIN),
        averaged_rate_ratio=averaged_ratio(r.cycles[len(r.cycles) // 2 :]),
        late_unloads=sum(1 for m in r.moves if m.cycle >= len(r.cycles) // 2),
    )


def averaged_ratio(states: list[CycleState]) -> float:
    """Max/min over brokers present in every state of their normalised msg rate averaged over them."""
    if not states:
        return math.inf
    common = set(states[0].brokers).intersection(*(s.brokers for s in states[1:]))
    sums: dict[str, float] = dict.fromkeys(common, 0.0)
    for s in states:
        for b, r, c in zip(s.brokers, s.msg_rate, s.capacity, strict=True):
            if b in sums:
                sums[b] += r / c
    return _ratio(list(sums.values()))
