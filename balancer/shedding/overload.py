"""Pulsar's OverloadShedder: every broker at or above the overload threshold sheds enough of its
largest bundles to come back 5 points under it (usage assumed proportional to throughput)."""

from __future__ import annotations

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData
from balancer.shedding.base import SheddingResult
from balancer.shedding.selection import ResultBuilder, shed_by_cover

# Pulsar's fixed margin: shed down to 5 points below the threshold, not just to it.
MARGIN = 0.05


class OverloadShedder:
    """Stateless; unweighted max resource usage (cpu, direct memory, NIC in/out)."""

    name = "OverloadShedder"

    def find_bundles_for_unloading(self, load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        out = ResultBuilder(self.name)
        threshold = config.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        for broker, data in load.broker_data.items():
            local = data.local_data
            usage = local.max_resource_usage()
            tp = local.msg_throughput
            nums = {"usage": usage, "threshold": threshold, "throughput": tp, "bundles": len(local.bundles)}
            # Pulsar skips only strictly below: a broker exactly at the threshold is overloaded.
            if usage < threshold:
                out.broker(
                    broker, "not_overloaded", "max resource usage below the overload threshold", **nums
                )
                continue
            target = tp * (usage - threshold + MARGIN)
            nums["target"] = target
            shed_by_cover(out, load, broker, local, target, nums, "overloaded")
        return out.build(threshold=threshold)

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Nothing to forget: the strategy keeps no state."""
