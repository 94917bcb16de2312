"""Pulsar's ThresholdShedder: brokers whose smoothed weighted usage is ``threshold`` points above
the cluster average shed bundles; optionally (lower-boundary shedding) the busiest broker sheds a
little toward an under-loaded one when nobody is above the bar."""

from __future__ import annotations

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData, ResourceWeights
from balancer.shedding.base import SheddingResult
from balancer.shedding.selection import ResultBuilder, shed_by_cover

MARGIN = 0.05
# Lower-boundary shedding moves only half of the threshold's share of the source's traffic.
LOWER_BOUNDARY_MARGIN = 0.5


class ThresholdShedder:
    """Keeps a smoothed usage ("history") per broker across calls."""

    name = "ThresholdShedder"

    def __init__(self) -> None:
        self.history: dict[str, float] = {}

    def on_active_brokers_change(self, active: set[str]) -> None:
        for broker in [b for b in self.history if b not in active]:
            del self.history[broker]

    def _average(self, load: LoadData, h: float, weights: ResourceWeights) -> float:
        """Fold this call's usage into every present broker's history; return the mean history."""
        total = 0.0
        for broker, data in load.broker_data.items():
            usage = data.local_data.max_resource_usage_with_weight(weights, include_memory=True)
            old = self.history.get(broker)
            # The first sample seeds the history as is (Pulsar #13136), instead of blending with 0.
            new = usage if old is None else old * h + (1 - h) * usage
            self.history[broker] = new
            total += new
        n = len(load.broker_data)
        return total / n if n > 0 else 0.0

    def find_bundles_for_unloading(self, load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        out = ResultBuilder(self.name)
        t = config.loadBalancerBrokerThresholdShedderPercentage / 100.0
        h = config.loadBalancerHistoryResourcePercentage
        min_tp = config.min_unload_throughput_bytes
        weights = config.weights()
        avg = self._average(load, h, weights)
        if avg == 0:
            for broker in load.broker_data:
                out.broker(broker, "zero_average", "average usage is 0", usage=self.history.get(broker, 0.0))
            return out.build("zero_average", "average usage is 0: nothing to compare against", average=avg)

        for broker, data in load.broker_data.items():
            local = data.local_data
            cur = self.history[broker]
            tp = local.msg_throughput
            nums = {
                "usage": cur,
                "average": avg,
                "threshold": t,
                "bar": avg + t,
                "throughput": tp,
                "bundles": len(local.bundles),
            }
            if cur < avg + t:
                out.broker(broker, "below_threshold", "smoothed usage below average + threshold", **nums)
                continue
            target = tp * (cur - avg - t + MARGIN)
            nums["target"] = target
            nums["minThroughput"] = min_tp
            if target < min_tp:
                out.broker(broker, "below_min_throughput", "traffic to move is below the minimum", **nums)
                continue
            shed_by_cover(out, load, broker, local, target, nums, "over_threshold")

        if not out.unloads and config.lowerBoundarySheddingEnabled:
            self._lower_boundary(out, load, t, h, min_tp, weights)
        return out.build(average=avg, threshold=t)

    def _lower_boundary(
        self,
        out: ResultBuilder,
        load: LoadData,
        t: float,
        h: float,
        min_tp: float,
        weights: ResourceWeights,
    ) -> None:
        # Pulsar recomputes the average here, folding the same sample into the history a second time.
        avg = self._average(load, h, weights)
        lower = avg - t
        source = ""
        best = lower
        below = False
        for broker, data in load.broker_data.items():
            cur = self.history.get(broker, 0.0)
            if cur > best and len(data.local_data.bundles) > 1:
                best = cur
                source = broker
            if cur < lower:
                below = True
        nums: dict[str, float | int] = {"average": avg, "lowerBound": lower, "threshold": t}
        if not source:
            out.notes["lowerBoundary"] = "skipped: no broker with more than one bundle above the lower bound"
            return
        if not below:
            out.notes["lowerBoundary"] = "skipped: no broker below the lower bound"
            out.broker(source, "lower_boundary_skipped", "no broker is below the lower bound", **nums)
            return
        local = load.broker_data[source].local_data
        tp = local.msg_throughput
        target = tp * t * LOWER_BOUNDARY_MARGIN
        nums.update(usage=self.history[source], throughput=tp, target=target, minThroughput=min_tp)
        if min_tp > target:
            out.broker(source, "below_min_throughput", "lower-boundary target is below the minimum", **nums)
            return
        shed_by_cover(out, load, source, local, target, nums, "lower_boundary")
