"""Pulsar's AvgShedder (PIP-364): pair the highest-scored broker with the lowest, the second
highest with the second lowest, and so on; a pair whose score gap keeps exceeding a threshold for
enough consecutive calls splits its traffic difference, and each moved bundle is bound to the
pair's low broker. The same object is also the placement strategy that honours those bindings."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import BundleData, LoadData
from balancer.placement.base import PlacementChoice, planned_or_none_left
from balancer.shedding.base import SheddingResult
from balancer.shedding.selection import ResultBuilder, candidates, msg_rate, throughput

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1


class AvgShedder:
    """Keeps per-broker hit counters (``high``, ``low``) across calls, and this call's bindings."""

    name = "AvgShedder"

    def __init__(self) -> None:
        self.high: dict[str, int] = {}
        self.low: dict[str, int] = {}
        # bundle name -> planned destination (Pulsar #26246 keys plans by name, per shedding attempt).
        self.plans: dict[str, str] = {}

    def on_active_brokers_change(self, active: set[str]) -> None:
        for counters in (self.high, self.low):
            for broker in [b for b in counters if b not in active]:
                del counters[broker]
        for bundle in [b for b, dest in self.plans.items() if dest not in active]:
            del self.plans[bundle]

    # ---- shedding ----------------------------------------------------------------------------
    def find_bundles_for_unloading(self, load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        out = ResultBuilder(self.name)
        self.plans = {}
        weights = config.weights()
        scores = {
            broker: data.local_data.max_resource_usage_with_weight(weights, include_memory=False) * 100
            for broker, data in load.broker_data.items()
        }
        ranked = sorted(scores, key=scores.__getitem__)  # stable: equal scores keep input order
        pairs = self._pair(ranked, scores, config)
        for broker in ranked:
            out.broker(
                broker, "unpaired", "score gap to its partner below the low threshold", score=scores[broker]
            )
        for lo, hi in pairs:
            gap = scores[hi] - scores[lo]
            for me, other in ((lo, hi), (hi, lo)):
                out.broker(
                    me,
                    "paired",
                    f"paired with {other}",
                    score=scores[me],
                    partner=other,
                    gap=gap,
                    lowThreshold=config.loadBalancerAvgShedderLowThreshold,
                    highThreshold=config.loadBalancerAvgShedderHighThreshold,
                    hitCountHigh=self.high.get(me, 0),
                    hitCountLow=self.low.get(me, 0),
                )
        if not pairs:
            self.high.clear()
            self.low.clear()
            return out.build("no_pairs", "no broker pair differs by the low threshold; hit counters cleared")
        for lo, hi in pairs:
            self._shed_pair(out, load, config, lo, hi, scores)
        return out.build(pairs=len(pairs))

    def _pair(
        self, ranked: list[str], scores: dict[str, float], config: LoadBalancerConfig
    ) -> list[tuple[str, str]]:
        """Outermost-first pairing; counters are per broker, so they survive a change of partner."""
        low_thr = config.loadBalancerAvgShedderLowThreshold
        high_thr = config.loadBalancerAvgShedderHighThreshold
        pairs: list[tuple[str, str]] = []
        i, j = 0, len(ranked) - 1
        while i <= j:
            lo, hi = ranked[i], ranked[j]
            gap = scores[hi] - scores[lo]
            if gap < low_thr:
                for b in (hi, lo):
                    self.high.pop(b, None)
                    self.low.pop(b, None)
            else:
                pairs.append((lo, hi))
                self.low[lo] = self.low.get(lo, 0) + 1
                self.low[hi] = self.low.get(hi, 0) + 1
                if gap < high_thr:
                    # Only consecutive high-zone calls count toward the high threshold.
                    self.high.pop(hi, None)
                    self.high.pop(lo, None)
                else:
                    self.high[lo] = self.high.get(lo, 0) + 1
                    self.high[hi] = self.high.get(hi, 0) + 1
            i += 1
            j -= 1
        return pairs

    def _shed_pair(
        self,
        out: ResultBuilder,
        load: LoadData,
        config: LoadBalancerConfig,
        lo: str,
        hi: str,
        scores: dict[str, float],
    ) -> None:
        hc_high = config.loadBalancerAvgShedderHitCountHighThreshold
        hc_low = config.loadBalancerAvgShedderHitCountLowThreshold
        hits = {
            "hitHighLow": self.high.get(lo, 0),
            "hitHighHigh": self.high.get(hi, 0),
            "hitLowLow": self.low.get(lo, 0),
            "hitLowHigh": self.low.get(hi, 0),
            "hitCountHighThreshold": hc_high,
            "hitCountLowThreshold": hc_low,
        }
        triggered = (
            hits["hitHighLow"] >= hc_high
            or hits["hitHighHigh"] >= hc_high
            or hits["hitLowLow"] >= hc_low
            or hits["hitLowHigh"] >= hc_low
        )
        nums: dict[str, float | int | str] = {
            "score": scores[hi],
            "partner": lo,
            "gap": scores[hi] - scores[lo],
            **hits,
        }
        if not triggered:
            out.broker(hi, "hit_count_not_reached", f"paired with {lo}, not yet hit often enough", **nums)
            return
        for counters in (self.high, self.low):
            counters.pop(lo, None)
            counters.pop(hi, None)
        lo_local = load.broker_data[lo].local_data
        hi_local = load.broker_data[hi].local_data
        share = config.maxUnloadPercentage
        msg_req = (hi_local.msg_rate - lo_local.msg_rate) * share
        tp_req = (hi_local.msg_throughput - lo_local.msg_throughput) * share
        nums.update(
            msgRateRequired=msg_req,
            throughputRequired=tp_req,
            minUnloadMessage=config.minUnloadMessage,
            minUnloadMessageThroughput=config.minUnloadMessageThroughput,
        )
        # Message rate first; both minimums are strict.
        if msg_req > config.minUnloadMessage:
            metric_name, metric, remaining = "msgRate", msg_rate, msg_req
        elif tp_req > config.minUnloadMessageThroughput:
            metric_name, metric, remaining = "throughput", throughput, tp_req
        else:
            out.broker(hi, "below_min_unload", f"traffic to move to {lo} is below both minimums", **nums)
            return
        cands = candidates(load, hi_local, metric)
        selected = 0
        for bundle, value in cands.ranked:
            if value > 0 and value <= remaining:
                out.unload(
                    hi,
                    bundle,
                    "fits_budget",
                    f"bundle {metric_name} fits the remaining budget; bound to {lo}",
                    **{metric_name: value},
                    remainingBefore=remaining,
                    destination=lo,
                )
                out.destinations[bundle] = lo
                self.plans[bundle] = lo
                remaining -= value
                selected += 1
        out.broker(
            hi,
            "shed_to_partner",
            f"sheds {metric_name} toward {lo}",
            **nums,
            metric=metric_name,
            **cands.numbers(),
            selected=selected,
            remaining=remaining,
        )
        out.broker(lo, "destination", f"receives bundles from {hi}", score=scores[lo], partner=hi)

    # ---- placement ---------------------------------------------------------------------------
    def select_broker(
        self,
        candidates: Sequence[str],
        bundle: str,
        bundle_data: BundleData,
        load: LoadData,
        config: LoadBalancerConfig,
        rng: random.Random,
    ) -> PlacementChoice:
        early = planned_or_none_left(self.plans, bundle, candidates)
        if early is not None:
            return early
        planned = self.plans.get(bundle)
        ordered = sorted(candidates)
        # Hashing a random int (not the bundle) spreads a dead broker's bundles over the survivors.
        draw = rng.randint(JAVA_INT_MIN, JAVA_INT_MAX)
        code = zlib.crc32(str(draw).encode("utf-8"))
        index = code % len(ordered)
        why = "no plan for this bundle" if planned is None else f"planned broker {planned} is not a candidate"
        return PlacementChoice(
            ordered[index],
            explain(
                "hashed_random",
                f"{why}: crc32 of a random int over the sorted candidates",
                subject=bundle,
                broker=ordered[index],
                draw=draw,
                crc32=code,
                index=index,
                candidates=len(ordered),
            ),
        )
