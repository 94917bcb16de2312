"""The simulation loop: traffic evolves, agents report with one interval of lag, the leader plans a
cycle with :func:`balancer.cycle.plan_shedding_cycle` and the moves are applied.

One cycle = one shedding interval. At cycle ``k`` (``now_ms = k * interval``):

1. scenario events of cycle ``k`` happen (brokers join, leave or restart, consumers pause,
   other processes spike);
2. the leader reads the reports: each live broker lists the bundles it owns *now* (Pulsar writes
   a report as soon as bundles are gained or lost), with bundle stats and host usage measured over
   the previous interval, i.e. before the previous cycle's moves took effect on CPU and NIC;
3. bundles of brokers that left are placed through the placement pipeline with preallocation
   (Pulsar's ``selectBrokerForAssignment``);
4. time-averaged bundle data is updated (:func:`balancer.loaddata.update_bundle_data`) and
   :func:`balancer.cycle.plan_shedding_cycle` runs exactly as on the live leader;
5. the moves are applied; the true state after them is recorded for the metrics.

The events themselves are scheduled and applied by :mod:`balancer.sim.events`.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.cycle import plan_shedding_cycle
from balancer.errors import InvalidInput
from balancer.loaddata import update_bundle_data
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
)
from balancer.placement.base import PlacementStrategy, batch_order
from balancer.placement.context import PlacementContext
from balancer.placement.pipeline import assign_bundle
from balancer.placement.registry import create_placement
from balancer.shedding.base import LoadSheddingStrategy
from balancer.shedding.registry import create_shedder
from balancer.sim.events import apply_event, plan_events
from balancer.sim.model import BrokerAccumulator, BrokerUsage, SimBroker, Traffic, bundle_traffic, other_cpu
from balancer.sim.scenarios import Cluster, Scenario, build


@dataclass(frozen=True)
class StrategyPair:
    """A shedding strategy and a placement strategy, with config keys the pair is run with."""

    label: str
    shedder: str
    placement: str
    config: dict[str, Any] = field(default_factory=dict)


AVG_CONFIG = {"maxUnloadPercentage": 0.5}  # PIP-364's recommendation: split a pair's difference evenly

PAIRS: dict[str, StrategyPair] = {
    p.label: p
    for p in (
        StrategyPair("Threshold+LRUW", "ThresholdShedder", "LeastResourceUsageWithWeight"),
        StrategyPair("Uniform+LLTMR", "UniformLoadShedder", "LeastLongTermMessageRate"),
        StrategyPair("Overload+LLTMR", "OverloadShedder", "LeastLongTermMessageRate"),
        StrategyPair("AvgShedder", "AvgShedder", "AvgShedder", AVG_CONFIG),
        StrategyPair("BalancedShedder", "BalancedShedder", "BalancedShedder"),
    )
}


def pair_named(label: str) -> StrategyPair:
    """A benchmark pair by label, or ``Shedder+Placement`` with any registered names."""
    if label in PAIRS:
        return PAIRS[label]
    if "+" in label:
        shedder, placement = label.split("+", 1)
        return StrategyPair(label, shedder, placement)
    if label in ("AvgShedder", "BalancedShedder"):
        return StrategyPair(label, label, label)
    raise InvalidInput("strategy", label, f"a pair label ({', '.join(PAIRS)}) or SHEDDER+PLACEMENT")


@dataclass
class MoveRecord:
    cycle: int
    bundle: str
    source: str
    destination: str
    msg_rate: float  # the bundle's true traffic in the cycle it moved
    throughput: float
    source_util: float  # true utilisation (percent of own capacity) just before the move
    destination_util: float
    # The same without this interval's Gaussian CPU noise (what the broker's load costs it): uphill
    # moves are judged on these, since no leader can see the noise of an interval not yet reported.
    source_load: float = 0.0
    destination_load: float = 0.0
    # And without this interval's traffic noise either (each bundle at its expected rate): what a
    # leader could at best have known. Heavy-tailed bundle sizes move a broker's load by several
    # points from one interval to the next.
    source_expected: float = 0.0
    destination_expected: float = 0.0


@dataclass
class CycleState:
    """The true state after cycle ``cycle``'s moves, brokers in a fixed order."""

    cycle: int
    brokers: list[str]
    capacity: list[float]
    util: list[float]
    msg_rate: list[float]
    throughput: list[float]
    unloads: int
    placements: int
    # Pre-move states only (the disturbance and later join/leave cycles): each broker's bundles' true
    # msg rates, largest first, for the least-cost bounds in ``balancer.sim.metrics``.
    bundle_rates: list[list[float]] = field(default_factory=list)


@dataclass
class SimResult:
    scenario: str
    pair: StrategyPair
    seed: int
    interval_minutes: float
    disturbance_at: int
    cycles: list[CycleState]
    moves: list[MoveRecord]
    placements: int
    jitter_cycles: set[int]
    pre_disturbance: CycleState  # the true state just before the disturbance cycle's moves
    # Pre-move states of later cycles where brokers joined or left (rolling restarts, late joins).
    pre_events: list[CycleState] = field(default_factory=list)
    # Each bundle's true msg rate in the last of those pre-move states, and who owns what at the end:
    # the final assignment judged at that frozen traffic (``balancer.sim.family_claims``).
    frozen_rates: dict[str, float] = field(default_factory=dict)
    final_owners: dict[str, str] = field(default_factory=dict)
    # The same moment in load (CPU points each bundle's traffic costs a standard broker), with who
    # owned what then: costs judged on load, which is what the strategy balances.
    frozen_load: dict[str, float] = field(default_factory=dict)
    frozen_owners: dict[str, str] = field(default_factory=dict)
    # Each bundle's true msg rate in the last cycle: where traffic keeps moving after the disturbance
    # (drift), the fewest unloads any strategy needs is judged at the traffic the run ends on.
    final_rates: dict[str, float] = field(default_factory=dict)


class Simulation:
    """A seeded run of one scenario against one strategy pair."""

    def __init__(
        self, scenario: Scenario, pair: StrategyPair, seed: int, *, with_jitter: bool = True
    ) -> None:
        self.s = scenario
        self.pair = pair
        self.seed = seed
        self.rng = random.Random(seed)
        self.leader_rng = random.Random(seed + 1)
        self.cluster: Cluster = build(scenario, self.rng)
        self.config = LoadBalancerConfig.from_dict(
            {
                **scenario.config,
                **pair.config,
                "loadBalancerLoadSheddingStrategy": pair.shedder,
                "loadBalancerLoadPlacementStrategy": pair.placement,
            }
        )
        self.shedder: LoadSheddingStrategy = create_shedder(pair.shedder)
        self.placement: PlacementStrategy = create_placement(pair.placement, self.shedder)
        self.ctx = PlacementContext()
        self.load = LoadData()
        self.stats = {name: NamespaceBundleStats() for name in self.cluster.bundles}
        self.reported: dict[str, BrokerUsage] = {}
        self.orphans: list[str] = []
        self.schedule: dict[int, list[dict[str, Any]]] = {}
        self.jitter_cycles: set[int] = set()
        plan_events(self.cluster, self.s, with_jitter, self.schedule, self.jitter_cycles)

    # ---- one cycle --------------------------------------------------------------------------
    def _traffic(self, k: int) -> dict[str, Traffic]:
        var = self.s.variation
        return {name: bundle_traffic(b, k, var, self.rng) for name, b in self.cluster.bundles.items()}

    def _measure(self, traffic: dict[str, Traffic], cpu: dict[str, float]) -> dict[str, BrokerUsage]:
        acc = {n: BrokerAccumulator() for n, b in self.cluster.brokers.items() if b.alive}
        for bundle, owner in self.cluster.owners.items():
            a = acc.get(owner)
            if a is not None:
                a.add(bundle, traffic[bundle])
        return {n: a.usage(self.cluster.brokers[n], cpu[n]) for n, a in acc.items()}

    def _report(self, broker: SimBroker, owned: list[str], usage: BrokerUsage) -> LocalBrokerData:
        stats = {b: self.stats[b] for b in owned}
        local = LocalBrokerData.model_construct()
        local.cpu = ResourceUsage.model_construct(usage=usage.cpu * broker.cores, limit=100.0 * broker.cores)
        nic_kb = broker.nic_bytes / 1024
        local.bandwidth_in = ResourceUsage.model_construct(usage=usage.bw_in * nic_kb / 100, limit=nic_kb)
        local.bandwidth_out = ResourceUsage.model_construct(usage=usage.bw_out * nic_kb / 100, limit=nic_kb)
        local.msg_rate_in = sum(s.msg_rate_in for s in stats.values())
        local.msg_rate_out = sum(s.msg_rate_out for s in stats.values())
        local.msg_throughput_in = sum(s.msg_throughput_in for s in stats.values())
        local.msg_throughput_out = sum(s.msg_throughput_out for s in stats.values())
        local.last_stats = stats
        local.bundles = set(owned)
        local.num_bundles = len(owned)
        local.load_manager_class_name = self.config.loadManagerClassName
        return local

    def _set_stats(self, traffic: dict[str, Traffic]) -> None:
        for name, t in traffic.items():
            # Plain field writes: 100,000 validated setattrs per cycle would dominate a large run.
            self.stats[name].__dict__.update(
                msg_rate_in=t.rate_in,
                msg_rate_out=t.rate_out,
                msg_throughput_in=t.tp_in,
                msg_throughput_out=t.tp_out,
                topics=10,
            )

    def run(self) -> SimResult:
        interval_ms = self.config.shedding_interval_ms
        states: list[CycleState] = []
        moves: list[MoveRecord] = []
        placements_total = 0
        pre: CycleState | None = None
        pre_events: list[CycleState] = []
        frozen: dict[str, Traffic] = {}
        frozen_owners: dict[str, str] = {}
        traffic = self._traffic(0)
        self._set_stats(traffic)
        for k in range(self.s.cycles):
            now_ms = k * interval_ms
            for ev in self.schedule.get(k, []):
                apply_event(ev, k, self.cluster, self.schedule, self.rng, self.reported, self.orphans)
            brokers = self.cluster.brokers
            cpu = {n: other_cpu(b, self.s.variation, self.rng) for n, b in brokers.items() if b.alive}
            steady_cpu = {n: b.background + b.spike for n, b in brokers.items() if b.alive}
            owned: dict[str, list[str]] = {n: [] for n in cpu}
            for bundle, owner in self.cluster.owners.items():
                if owner in owned:
                    owned[owner].append(bundle)
            first_look = self._measure(traffic, cpu) if any(n not in self.reported for n in cpu) else {}
            self.load.broker_data = {
                n: BrokerData(
                    local_data=self._report(brokers[n], owned[n], self.reported.get(n) or first_look[n])
                )
                for n in cpu
            }
            # Bundle data of orphans is dropped by the pass (no report lists them); the leader
            # reseeds it from what it last wrote, which this snapshot stands for.
            stored = dict(self.load.bundle_data) if self.orphans else {}
            update_bundle_data(self.load, now_ms, {}, {})
            self.ctx.refresh(self.load)
            placements = self._place_orphans(stored)
            placements_total += placements
            traffic = self._traffic(k)
            before = self._measure(traffic, cpu)
            if k == min(self.s.disturbance_at, self.s.cycles - 1):
                pre = self._state(k, before, 0, placements, traffic)
                frozen, frozen_owners = traffic, dict(self.cluster.owners)
            elif pre is not None and any(ev["type"] in ("_up", "_down") for ev in self.schedule.get(k, [])):
                pre_events.append(self._state(k, before, 0, placements, traffic))
                frozen, frozen_owners = traffic, dict(self.cluster.owners)
            plan = plan_shedding_cycle(
                self.load, self.config, self.shedder, self.placement, self.ctx, now_ms, self.leader_rng
            )
            # Measured before any move is applied, and only when there are moves (large runs).
            steady = self._measure(traffic, steady_cpu) if plan.moves else before
            calm = self._measure(self._expected(k), steady_cpu) if plan.moves else before
            for m in plan.moves:
                if self.cluster.owners.get(m.bundle) != m.source or m.destination not in before:
                    continue
                t = traffic[m.bundle]
                moves.append(
                    MoveRecord(
                        k,
                        m.bundle,
                        m.source,
                        m.destination,
                        t.rate,
                        t.throughput,
                        before[m.source].utilisation,
                        before[m.destination].utilisation,
                        steady[m.source].utilisation,
                        steady[m.destination].utilisation,
                        calm[m.source].utilisation,
                        calm[m.destination].utilisation,
                    )
                )
                self.cluster.owners[m.bundle] = m.destination
            after = self._measure(traffic, cpu)
            # The last cycle keeps its bundles' rates: whether a balance of them exists is a claim's test.
            last = traffic if k == self.s.cycles - 1 else None
            states.append(self._state(k, after, sum(1 for m in moves if m.cycle == k), placements, last))
            # What the agents will report at the next cycle: this interval's stats and usage.
            self.reported = before
            self._set_stats(traffic)
        return SimResult(
            scenario=self.s.name,
            pair=self.pair,
            seed=self.seed,
            interval_minutes=self.config.loadBalancerSheddingIntervalMinutes,
            disturbance_at=self.s.disturbance_at,
            cycles=states,
            moves=moves,
            placements=placements_total,
            jitter_cycles=self.jitter_cycles,
            pre_disturbance=pre if pre is not None else states[0],
            pre_events=pre_events,
            frozen_rates={b: t.rate for b, t in frozen.items()},
            final_owners=dict(self.cluster.owners),
            frozen_load={b: t.cpu_points for b, t in frozen.items()},
            frozen_owners=frozen_owners,
            final_rates={b: t.rate for b, t in traffic.items()},
        )

    def _expected(self, k: int) -> dict[str, Traffic]:
        """Each bundle's traffic in cycle ``k`` without the per-interval noise (draws no numbers)."""
        var = dataclasses.replace(self.s.variation, noise=0.0)
        return {name: bundle_traffic(b, k, var, self.rng) for name, b in self.cluster.bundles.items()}

    def _state(
        self,
        k: int,
        usage: dict[str, BrokerUsage],
        unloads: int,
        placements: int,
        traffic: dict[str, Traffic] | None = None,
    ) -> CycleState:
        names = sorted(usage)
        rates: list[list[float]] = []
        if traffic is not None:
            per: dict[str, list[float]] = {n: [] for n in names}
            for bundle, owner in self.cluster.owners.items():
                own = per.get(owner)
                if own is not None:
                    own.append(traffic[bundle].rate)
            rates = [sorted(per[n], reverse=True) for n in names]
        return CycleState(
            cycle=k,
            brokers=names,
            capacity=[self.cluster.brokers[n].capacity for n in names],
            util=[usage[n].utilisation for n in names],
            msg_rate=[usage[n].msg_rate for n in names],
            throughput=[usage[n].throughput for n in names],
            unloads=unloads,
            placements=placements,
            bundle_rates=rates,
        )

    def _place_orphans(self, stored: dict[str, BundleData]) -> int:
        placed = 0
        pending, self.orphans = self.orphans, []
        for bundle in batch_order(self.placement, pending, self.load, stored):
            decision = assign_bundle(
                bundle,
                self.load,
                self.config,
                self.placement,
                self.ctx,
                self.leader_rng,
                stored_bundle_data=stored.get(bundle),
            )
            if decision.broker is None:
                self.orphans.append(bundle)
                continue
            self.cluster.owners[bundle] = decision.broker
            placed += 1
        return placed


def simulate(scenario: Scenario, pair: StrategyPair, seed: int, *, with_jitter: bool = True) -> SimResult:
    return Simulation(scenario, pair, seed, with_jitter=with_jitter).run()
