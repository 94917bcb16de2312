"""Pulsar's OverloadShedder: every broker at or above the overload threshold sheds enough of its
largest bundles to come back 5 points under it (usage assumed proportional to throughput)."""

from __future__ import annotations

from balancer.config import LoadBalancerConfig
from balancer.models import LoadData
from balancer.shedding.base import SheddingResult
from balancer.shedding.selection import ResultBuilder, candidates, cover, throughput

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
            if len(local.bundles) <= 1:
                reason = "single_bundle" if local.bundles else "no_bundles"
                out.broker(broker, reason, "overloaded, but a broker's only bundle is never shed", **nums)
                continue
            cands = candidates(load, local, throughput)
            picked = cover(cands.ranked, target)
            if not picked:
                out.broker(
                    broker,
                    "no_candidates",
                    "overloaded, but no bundle may be unloaded",
                    **nums,
                    **cands.numbers(),
                )
                continue
            out.broker(
                broker,
                "overloaded",
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
        return out.build(threshold=threshold)

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Nothing to forget: the strategy keeps no state."""
