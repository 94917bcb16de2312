"""How faithful a what-if replay is (:mod:`balancer.sim.replay`): per broker, how far the modelled
utilisation is from the recorded one, for the model alone and for a replayed run, and each cycle's
utilisation spread."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from balancer.sim.engine import SimResult
from balancer.sim.replay_data import RecordedCycle, ReplayModel


@dataclass(frozen=True)
class BrokerError:
    """How far modelled utilisation is from the recorded one for one broker, percentage points."""

    broker: str
    samples: int
    mean_abs: float
    rmse: float
    bias: float  # mean of modelled - recorded
    recorded_mean: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def replay_error(run: SimResult, cycles: list[RecordedCycle]) -> dict[str, BrokerError]:
    """Per broker: replayed post-move utilisation of cycle ``k`` against the usage recorded at ``k + 1``."""
    pairs: dict[str, list[tuple[float, float]]] = {}
    for s in run.cycles:
        rec = cycles[s.cycle + 1].brokers if s.cycle + 1 < len(cycles) else {}
        for name, util in zip(s.brokers, s.util, strict=True):
            r = rec.get(name)
            if r is not None:
                pairs.setdefault(name, []).append((util, r.utilisation))
    return {b: _error(b, p) for b, p in sorted(pairs.items())}


def model_error(cycles: list[RecordedCycle], model: ReplayModel) -> dict[str, BrokerError]:
    """Per broker: the model's utilisation of the bundles it really owned against what it recorded.

    This isolates the model (traffic independence, capacity line, NIC ratio) from the strategy's
    decisions: the recorded-strategy replay error adds to it whatever the replayed decisions did
    differently (timing, randomness, the config changes the history does not hold).
    """
    pairs: dict[str, list[tuple[float, float]]] = {}
    for c in cycles:
        rate: dict[str, float] = dict.fromkeys(c.brokers, 0.0)
        tin: dict[str, float] = dict.fromkeys(c.brokers, 0.0)
        tout: dict[str, float] = dict.fromkeys(c.brokers, 0.0)
        for rb in c.bundles.values():
            if rb.owner in rate:
                rate[rb.owner] += rb.rate
                tin[rb.owner] += rb.tp_in
                tout[rb.owner] += rb.tp_out
        for b, r in c.brokers.items():
            util = max(model.cpu(b, rate[b]), tin[b] * model.nic_in[b], tout[b] * model.nic_out[b])
            pairs.setdefault(b, []).append((util, r.utilisation))
    return {b: _error(b, p) for b, p in sorted(pairs.items())}


def _error(broker: str, pairs: list[tuple[float, float]]) -> BrokerError:
    diffs = [m - r for m, r in pairs]
    n = len(diffs)
    return BrokerError(
        broker=broker,
        samples=n,
        mean_abs=sum(abs(d) for d in diffs) / n,
        rmse=math.sqrt(sum(d * d for d in diffs) / n),
        bias=sum(diffs) / n,
        recorded_mean=sum(r for _, r in pairs) / n,
    )


def util_spread(run: SimResult) -> list[float]:
    """Max - min utilisation of each cycle's post-move state (what the plots show)."""
    return [max(s.util) - min(s.util) if s.util else 0.0 for s in run.cycles]
