"""What-if replay: recorded leader cycles replayed through the simulator under another strategy pair.

Input (built by ``service.longterm.replay_extract`` from the history, pure data here): per recorded
cycle the traffic and owner of every bundle and the usage every present broker reported, plus each
broker's learned capacity line from the long-term job (``msg rate = intercept + slope * cpu%``).

Model (stated in every replay's output, see :data:`ASSUMPTIONS`):

- a bundle's traffic is what was recorded, whoever owns it (independent of its owner);
- a broker's CPU follows its capacity line: ``cpu% = background + msg_rate / slope`` with
  ``background = max(0, -intercept / slope)``; brokers without a usable line (CPU never varied) get the
  fleet's median line; NIC % follows throughput at the ratio each broker recorded;
- brokers come and go as recorded; a bundle first seen later starts on the broker that first listed it;
- a broker's relative strength (the metrics' capacity) is the traffic its line carries at 100% CPU over
  the fleet's median.

Timing follows the engine: the stats the live leader read at recorded cycle ``k`` describe the
interval before it, so engine cycle ``k`` carries the traffic recorded at cycle ``k + 1`` and a replay of
``n`` recorded cycles runs ``n - 1`` cycles. Each replay is the engine's own loop
(:class:`balancer.sim.engine.Simulation`) with the traffic, the presence of brokers and the CPU model
swapped for the recorded ones, so the leader's cycle runs exactly as in ``bench/quality.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from balancer.errors import InvalidInput
from balancer.models import NamespaceBundleStats
from balancer.sim.engine import CycleState, MoveRecord, SimResult, Simulation, StrategyPair
from balancer.sim.model import BrokerAccumulator, BrokerUsage, SimBroker, SimBundle, Traffic
from balancer.sim.replay_data import (
    CapacityLine,
    RecordedBroker,
    RecordedBundle,
    RecordedCycle,
    RecordedDecision,
    ReplayModel,
    build_model,
)
from balancer.sim.replay_fidelity import BrokerError, model_error, replay_error, util_spread
from balancer.sim.scenarios import BrokerGroup, Cluster, Scenario

ASSUMPTIONS = (
    "a bundle's traffic is the recorded traffic, independent of its owner",
    "CPU follows each broker's capacity line from the long-term job (cpu% = background + msg/s / slope);"
    " brokers without a line use the fleet's median line",
    "NIC % follows throughput at the ratio each broker recorded",
    "brokers are present exactly when they reported; new bundles start where they were first listed",
    "the config is the one recorded when the history writer started (later dynamic updates are not seen)",
)


LEADER_KINDS = frozenset({"shedding"})
OPERATOR_KINDS = frozenset({"manual"})


def move_kind(kind: str, reason: str) -> str:
    """The replay's name for a recorded decision: shedding, orphan, placement, split or manual."""
    if kind == "placement":
        return "orphan" if reason == "orphan_assigned" else "placement"
    return kind


@dataclass(frozen=True)
class ObservedMove:
    """A bundle whose owner changed between recorded cycles ``cycle`` and ``cycle + 1``, with the kind of
    the decision behind it: from the recorded decisions when the history has them, else inferred
    (``shedding`` when the old owner still reported, ``orphan`` otherwise), or ``unrecorded``."""

    cycle: int
    time_ms: int  # the recorded cycle that first shows the new owner
    bundle: str
    source: str
    destination: str
    kind: str
    inferred: bool = False


def observed_moves(
    cycles: list[RecordedCycle], decisions: list[RecordedDecision] | None
) -> list[ObservedMove]:
    """Every owner change of the recorded cycles with its decision kind.

    With ``decisions`` (histories that record them), an owner change takes the kind of the latest
    applied decision about that bundle made before the cycle that shows it and not used by an earlier
    change; none left is ``unrecorded``. Without (older histories), the kind is inferred as before.
    """
    by_bundle: dict[str, list[RecordedDecision]] = {}
    for d in sorted(decisions or [], key=lambda d: d.time_ms):
        by_bundle.setdefault(d.bundle, []).append(d)
    used: dict[str, int] = {}  # bundle -> how many of its decisions are consumed
    out: list[ObservedMove] = []
    # The owner each bundle last had: an orphan is listed by no broker until its new owner reports, so
    # its move shows only against the owner it had before those cycles.
    last_owner = {name: rb.owner for name, rb in cycles[0].bundles.items()}
    for k in range(len(cycles) - 1):
        prev, cur = cycles[k], cycles[k + 1]
        for name, rb in cur.bundles.items():
            before = last_owner.get(name)
            last_owner[name] = rb.owner
            if before is None or before == rb.owner:
                continue
            old = RecordedBundle(before, 0.0, 0.0, 0.0, 0.0)
            if decisions is None:
                alive = old.owner in cur.brokers and old.owner in prev.brokers
                kind, inferred = ("shedding" if alive else "orphan"), True
            else:
                mine = by_bundle.get(name, [])
                start = used.get(name, 0)
                upto = start
                while upto < len(mine) and mine[upto].time_ms <= cur.time_ms:
                    upto += 1
                if upto > start:
                    d = mine[upto - 1]
                    kind, inferred = move_kind(d.kind, d.reason), False
                    used[name] = upto
                else:
                    kind, inferred = "unrecorded", False
            out.append(ObservedMove(k, cur.time_ms, name, old.owner, rb.owner, kind, inferred))
    return out


class ReplaySimulation(Simulation):
    """The engine's loop on recorded traffic and brokers (see the module docstring for the model)."""

    def __init__(
        self,
        cycles: list[RecordedCycle],
        model: ReplayModel,
        pair: StrategyPair,
        config: dict[str, Any],
        seed: int = 1,
        operator: list[ObservedMove] | None = None,
    ) -> None:
        if len(cycles) < 2:
            raise InvalidInput("history", len(cycles), "a replay needs at least two recorded cycles")
        # A one-broker, bundle-less scenario only to let the engine set itself up; the cluster,
        # its events and its traffic are replaced by the recorded ones below.
        scenario = Scenario(
            name="replay",
            description="recorded history",
            cycles=len(cycles) - 1,
            groups=[BrokerGroup(prefix="replay-setup", count=1, bundles=0)],
            config=dict(config),
        )
        super().__init__(scenario, pair, seed, with_jitter=False)
        self.recorded = cycles
        self.model = model
        brokers = sorted({b for c in cycles for b in c.brokers})
        first_owner: dict[str, str] = {}
        for c in cycles:
            for name, rb in c.bundles.items():
                first_owner.setdefault(name, rb.owner)
        alive = set(cycles[0].brokers)
        self.cluster = Cluster(
            brokers={
                b: SimBroker(b, capacity=model.strength[b], background=model.background[b], alive=b in alive)
                for b in brokers
            },
            bundles={name: SimBundle(name, rate=0.0) for name in first_owner},
            owners=first_owner,
            groups={},
        )
        self.stats = {name: NamespaceBundleStats() for name in first_owner}
        self.schedule = {}
        for k in range(1, len(cycles) - 1):
            before, now = set(cycles[k - 1].brokers), set(cycles[k].brokers)
            events = [{"type": "_down", "broker": b} for b in sorted(before - now)]
            events += [{"type": "_up", "broker": b} for b in sorted(now - before)]
            if events:
                self.schedule[k] = events
        # An operator's moves are not the strategy's to decide: every replay makes them when the operator
        # did (engine cycle k carries recorded cycle k + 1, the first to show the move).
        for m in operator or []:
            if m.cycle < len(cycles) - 1:
                self.schedule.setdefault(m.cycle, []).append(
                    {"type": "_assign", "bundle": m.bundle, "broker": m.destination}
                )
        self._zero = Traffic(0.0, 0.0, 0.0, 0.0)

    def _traffic(self, k: int) -> dict[str, Traffic]:
        rows = self.recorded[min(k + 1, len(self.recorded) - 1)].bundles
        out: dict[str, Traffic] = {}
        for name in self.cluster.bundles:
            r = rows.get(name)
            out[name] = self._zero if r is None else Traffic(r.rate_in, r.rate_out, r.tp_in, r.tp_out)
        return out

    def _measure(self, traffic: dict[str, Traffic], cpu: dict[str, float]) -> dict[str, BrokerUsage]:
        acc = {n: BrokerAccumulator() for n, b in self.cluster.brokers.items() if b.alive}
        for bundle, owner in self.cluster.owners.items():
            a = acc.get(owner)
            if a is not None:
                a.add(bundle, traffic[bundle])
        m = self.model
        return {
            n: BrokerUsage(
                cpu=cpu[n] + a.rate / m.slope[n],  # cpu[n] is the broker's background
                bw_in=a.tp_in * m.nic_in[n],
                bw_out=a.tp_out * m.nic_out[n],
                msg_rate=a.rate,
                throughput=a.tp_in + a.tp_out,
            )
            for n, a in acc.items()
        }


def replay(
    cycles: list[RecordedCycle],
    model: ReplayModel,
    pair: StrategyPair,
    config: dict[str, Any],
    seed: int = 1,
    operator: list[ObservedMove] | None = None,
) -> SimResult:
    return ReplaySimulation(cycles, model, pair, config, seed, operator).run()


def recorded_result(
    cycles: list[RecordedCycle],
    model: ReplayModel,
    pair: StrategyPair,
    interval_minutes: float,
    observed: list[ObservedMove] | None = None,
) -> SimResult:
    """What the live leader did, as a :class:`SimResult` on the same cycle numbering as a replay.

    State ``k`` is the usage reported at recorded cycle ``k + 1`` (the interval after cycle ``k``'s
    moves). Its moves are the leader's own shedding moves only (:func:`observed_moves`; by default
    inferred); orphan placements count as placements; operator and unrecorded moves are neither.
    """
    states: list[CycleState] = []
    moves: list[MoveRecord] = []
    placements = 0
    seen = observed if observed is not None else observed_moves(cycles, None)
    per_cycle: dict[int, list[ObservedMove]] = {}
    for m in seen:
        per_cycle.setdefault(m.cycle, []).append(m)
    for k in range(len(cycles) - 1):
        prev, cur = cycles[k], cycles[k + 1]
        moved = 0
        for m in per_cycle.get(k, []):
            if m.kind in LEADER_KINDS:
                rb = cur.bundles[m.bundle]
                src, dst = prev.brokers.get(m.source), prev.brokers.get(m.destination)
                moves.append(
                    MoveRecord(
                        k,
                        m.bundle,
                        m.source,
                        m.destination,
                        rb.rate,
                        rb.tp_in + rb.tp_out,
                        src.utilisation if src else 0.0,
                        dst.utilisation if dst else 0.0,
                    )
                )
                moved += 1
            elif m.kind in ("orphan", "placement"):
                placements += 1
        states.append(_recorded_state(k, cur, model, moved))
    pre = _recorded_state(0, cycles[0], model, 0)
    return SimResult(
        scenario="recorded",
        pair=pair,
        seed=0,
        interval_minutes=interval_minutes,
        disturbance_at=0,
        cycles=states,
        moves=moves,
        placements=placements,
        jitter_cycles=set(),
        pre_disturbance=pre,
    )


def _recorded_state(k: int, c: RecordedCycle, model: ReplayModel, unloads: int) -> CycleState:
    names = sorted(c.brokers)
    per: dict[str, list[float]] = {n: [] for n in names}
    for rb in c.bundles.values():
        if rb.owner in per:
            per[rb.owner].append(rb.rate)
    return CycleState(
        cycle=k,
        brokers=names,
        capacity=[model.strength.get(n, 1.0) for n in names],
        util=[c.brokers[n].utilisation for n in names],
        msg_rate=[c.brokers[n].msg_rate for n in names],
        throughput=[c.brokers[n].tp_in + c.brokers[n].tp_out for n in names],
        unloads=unloads,
        placements=0,
        bundle_rates=[sorted(per[n], reverse=True) for n in names],
    )


# The recorded run's data and the replay's fidelity live beside this module; their names stay importable here.
__all__ = [
    "ASSUMPTIONS",
    "BrokerError",
    "CapacityLine",
    "ObservedMove",
    "RecordedBroker",
    "RecordedBundle",
    "RecordedCycle",
    "RecordedDecision",
    "ReplayModel",
    "ReplaySimulation",
    "build_model",
    "model_error",
    "observed_moves",
    "recorded_result",
    "replay",
    "replay_error",
    "util_spread",
]
