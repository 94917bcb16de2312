"""Candidate bundles and the two bundle-picking rules the Pulsar shedders share.

Everything here works on plain floats and tuples: a leader cycle may look at 100,000 bundles, so
no model objects are created per bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from balancer.bundles import is_system_bundle
from balancer.explain import Explanation, explain
from balancer.models import BundleData, LoadData, LocalBrokerData
from balancer.shedding.base import SheddingResult

Metric = Callable[[BundleData], float]
# Every system namespace (pulsar/system, heartbeat, SLA monitor) starts with one of these.
SYSTEM_PREFIXES = ("pulsar/", "sla-monitor/")


def throughput(data: BundleData) -> float:
    """Short-term bytes/s in + out: every shedder reads the short-term window only."""
    st = data.short_term_data
    return st.msg_throughput_in + st.msg_throughput_out


def msg_rate(data: BundleData) -> float:
    st = data.short_term_data
    return st.msg_rate_in + st.msg_rate_out


@dataclass
class Candidates:
    """A broker's sheddable bundles, largest first, and how many owned bundles were left out."""

    ranked: list[tuple[str, float]]
    recently_unloaded: int = 0
    system: int = 0
    no_data: int = 0

    def numbers(self) -> dict[str, int]:
        return {
            "candidates": len(self.ranked),
            "skippedRecentlyUnloaded": self.recently_unloaded,
            "skippedSystem": self.system,
            "skippedNoData": self.no_data,
        }


def candidates(load: LoadData, local: LocalBrokerData, metric: Metric) -> Candidates:
    """Owned bundles with data, not system (Pulsar's getBundleDataForLoadShedding), not recently
    unloaded, sorted by ``metric`` descending.

    Pulsar breaks equal-traffic ties by Java hash-map order, which no test asserts; we break them
    by bundle name so that a run is reproducible.
    """
    out = Candidates(ranked=[])
    bundle_data = load.bundle_data
    recent = load.recently_unloaded_bundles
    by_rate = metric is msg_rate
    pairs: list[tuple[str, float]] = []
    for name in local.bundles:
        data = bundle_data.get(name)
        if data is None:
            out.no_data += 1
        # The prefix test keeps the namespace parsing off the path of ordinary bundles.
        elif name.startswith(SYSTEM_PREFIXES) and is_system_bundle(name):
            out.system += 1
        elif name in recent:
            out.recently_unloaded += 1
        else:
            st = data.short_term_data
            if by_rate:
                pairs.append((name, st.msg_rate_in + st.msg_rate_out))
            elif metric is throughput:
                pairs.append((name, st.msg_throughput_in + st.msg_throughput_out))
            else:
                pairs.append((name, metric(data)))
    pairs.sort(key=_rank)
    out.ranked = pairs
    return out


def _rank(p: tuple[str, float]) -> tuple[float, str]:
    return (-p[1], p[0])


def cover(ranked: list[tuple[str, float]], target: float) -> list[tuple[str, float, float]]:
    """Overload/Threshold rule: take bundles, largest first, while the amount taken is below
    ``target`` or nothing is taken yet. Returns (bundle, traffic, taken before it)."""
    taken = 0.0
    out: list[tuple[str, float, float]] = []
    for name, traffic in ranked:
        if taken < target or not out:
            out.append((name, traffic, taken))
            taken += traffic
        else:
            break
    return out


@dataclass
class ResultBuilder:
    """Accumulates a :class:`SheddingResult` while a strategy runs."""

    strategy: str
    unloads: dict[str, list[str]] = field(default_factory=dict)
    destinations: dict[str, str] = field(default_factory=dict)
    decisions: list[Explanation] = field(default_factory=list)
    brokers: dict[str, Explanation] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def broker(self, broker: str, reason: str, message: str, /, **numbers: Any) -> None:
        self.brokers[broker] = explain(reason, message, subject=broker, **numbers)

    def unload(self, broker: str, bundle: str, reason: str, message: str, /, **numbers: Any) -> None:
        self.unloads.setdefault(broker, []).append(bundle)
        self.decisions.append(explain(reason, message, subject=bundle, broker=broker, **numbers))

    def build(self, reason: str | None = None, message: str = "", /, **numbers: Any) -> SheddingResult:
        count = sum(len(v) for v in self.unloads.values())
        if reason is None:
            reason = "unload" if count else "nothing_to_unload"
        if not message:
            message = (
                f"{self.strategy} selected {count} bundle(s) on {len(self.unloads)} broker(s)"
                if count
                else f"{self.strategy} selected nothing"
            )
        summary = explain(reason, message, strategy=self.strategy, bundles=count, **numbers, **self.notes)
        return SheddingResult(
            unloads=self.unloads,
            destinations=self.destinations,
            decisions=self.decisions,
            brokers=self.brokers,
            summary=summary,
        )


def shed_by_cover(
    out: ResultBuilder,
    load: LoadData,
    broker: str,
    local: LocalBrokerData,
    target: float,
    nums: dict[str, float | int],
    reason: str,
) -> None:
    """The tail OverloadShedder and ThresholdShedder share once a broker is over its bar: a broker's
    only bundle is never shed; otherwise its largest bundles are taken until ``target`` is covered."""
    if len(local.bundles) <= 1:
        why = "single_bundle" if local.bundles else "no_bundles"
        out.broker(broker, why, "over the bar, but a broker's only bundle is never shed", **nums)
        return
    cands = candidates(load, local, throughput)
    picked = cover(cands.ranked, target)
    if not picked:
        out.broker(
            broker, "no_candidates", "over the bar, but no bundle may be unloaded", **nums, **cands.numbers()
        )
        return
    out.broker(
        broker,
        reason,
        "sheds its largest bundles until the target throughput is covered",
        **nums,
        **cands.numbers(),
        selected=len(picked),
    )
    for bundle, traffic, before in picked:
        out.unload(
            broker,
            bundle,
            "cover_target",
            "largest remaining bundle while the target is not covered",
            throughput=traffic,
            offloadedBefore=before,
            target=target,
        )


def sheddable(load: LoadData, broker: str, tp_unit: float) -> tuple[list[float], list[str]]:
    """Weights (ascending) and names of the broker's bundles that may move: owned, with data,
    traffic > 0, not a system bundle, not recently unloaded (as every Pulsar shedder filters).
    Equal weights are ordered by name.

    Inline rather than :func:`candidates` because a large cycle ranks ~100,000 bundles.
    """
    get = load.bundle_data.get
    recent = load.recently_unloaded_bundles
    pairs: list[tuple[float, str]] = []
    append = pairs.append
    local = load.broker_data[broker].local_data
    last = local.last_stats
    for name in local.bundles:
        bd = get(name)
        if bd is None or name in recent:
            continue
        # Every system namespace starts with one of the prefixes: ordinary bundles skip the parse.
        if name.startswith(SYSTEM_PREFIXES) and is_system_bundle(name):
            continue
        # The latest report's stats when it has them, as the broker's own traffic W is: the
        # short-term average lags a bundle that just grew, so its weight understated what moving
        # it takes off, and a broker whose namespace tripled shed 11 bundles and ended 19 points
        # below the target.
        st = last.get(name) or bd.short_term_data
        w = st.msg_rate_in + st.msg_rate_out + (st.msg_throughput_in + st.msg_throughput_out) / tp_unit
        if w > 0:
            append((w, name))
    pairs.sort()
    return [w for w, _ in pairs], [name for _, name in pairs]
