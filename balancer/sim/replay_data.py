"""The recorded run a what-if replay starts from (:mod:`balancer.sim.replay`), as pure data: each
recorded cycle's bundles and brokers, the recorded decisions, and the CPU/NIC model built from them and
the long-term job's capacity lines (the model's assumptions are :data:`balancer.sim.replay.ASSUMPTIONS`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from balancer.errors import InvalidInput


@dataclass(frozen=True)
class RecordedBundle:
    owner: str
    rate_in: float
    rate_out: float
    tp_in: float
    tp_out: float

    @property
    def rate(self) -> float:
        return self.rate_in + self.rate_out


@dataclass(frozen=True)
class RecordedBroker:
    """What one broker reported in one cycle; usages are percent of its own limits."""

    cpu: float
    bw_in: float
    bw_out: float
    msg_rate: float
    tp_in: float
    tp_out: float

    @property
    def utilisation(self) -> float:
        return max(self.cpu, self.bw_in, self.bw_out)


@dataclass
class RecordedCycle:
    time_ms: int
    bundles: dict[str, RecordedBundle]
    brokers: dict[str, RecordedBroker]


@dataclass(frozen=True)
class RecordedDecision:
    """A decision about a bundle as the history's ``moves`` dataset holds it (the leader's decision log)."""

    time_ms: int
    bundle: str
    source: str | None
    destination: str | None
    kind: str  # shedding, placement, split, manual
    reason: str = ""


# Who decided a move, by its kind: the replay re-decides only the leader's shedding moves.
@dataclass(frozen=True)
class CapacityLine:
    """The long-term job's per-broker fit ``msg rate = intercept + slope * cpu%`` (None: no spread)."""

    broker: str
    slope: float | None
    intercept: float | None


@dataclass
class ReplayModel:
    """Per-broker CPU and NIC model, derived once from the recorded data and the capacity lines."""

    slope: dict[str, float]  # msg/s per CPU point
    background: dict[str, float]  # CPU points at zero traffic
    nic_in: dict[str, float]  # NIC-in percent per byte/s
    nic_out: dict[str, float]
    strength: dict[str, float]  # relative capacity, fleet median 1.0
    fallback: list[str] = field(default_factory=list)  # brokers on the fleet's median line

    def cpu(self, broker: str, rate: float) -> float:
        return self.background[broker] + rate / self.slope[broker]


def build_model(cycles: list[RecordedCycle], lines: dict[str, CapacityLine]) -> ReplayModel:
    brokers = sorted({b for c in cycles for b in c.brokers})
    if not brokers:
        raise InvalidInput("history", "brokers", "no broker rows in the range: nothing to replay")
    usable = {
        b: (ln.slope, ln.intercept or 0.0)
        for b, ln in lines.items()
        if ln.slope is not None and math.isfinite(ln.slope) and ln.slope > 0
    }
    if usable:
        med_slope = statistics.median(s for s, _ in usable.values())
        med_bg = statistics.median(max(0.0, -i / s) for s, i in usable.values())
    else:  # no broker's CPU varied: proportional to traffic at the fleet's recorded ratio
        cpu = sum(r.cpu for c in cycles for r in c.brokers.values())
        rate = sum(r.msg_rate for c in cycles for r in c.brokers.values())
        med_slope, med_bg = (rate / cpu if cpu > 0 and rate > 0 else 1.0), 0.0
    model = ReplayModel({}, {}, {}, {}, {})
    for b in brokers:
        if b in usable:
            s, i = usable[b]
            model.slope[b], model.background[b] = s, max(0.0, -i / s)
        else:
            model.slope[b], model.background[b] = med_slope, med_bg
            model.fallback.append(b)
        samples = [c.brokers[b] for c in cycles if b in c.brokers]
        model.nic_in[b] = _ratio(sum(r.bw_in for r in samples), sum(r.tp_in for r in samples))
        model.nic_out[b] = _ratio(sum(r.bw_out for r in samples), sum(r.tp_out for r in samples))
    full = {b: model.slope[b] * max(1.0, 100.0 - model.background[b]) for b in brokers}
    med = statistics.median(full.values())
    model.strength = {b: full[b] / med if med > 0 else 1.0 for b in brokers}
    return model


def _ratio(pct: float, amount: float) -> float:
    return pct / amount if amount > 0 and pct > 0 else 0.0
