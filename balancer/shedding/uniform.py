"""Pulsar's UniformLoadShedder: when the busiest broker's message rate (or throughput) is too far
from the idlest one's, move a share of the gap off the busiest broker, message rate first."""

from __future__ import annotations

from balancer.config import LoadBalancerConfig
from balancer.javamath import INT_MAX, java_int
from balancer.models import LoadData
from balancer.shedding.base import SheddingResult
from balancer.shedding.selection import ResultBuilder, candidates, msg_rate, throughput

# A minimum this close to zero is replaced by 1.0 so that the ratios stay finite.
EPS = 1e-6


class UniformLoadShedder:
    """Stateless; ignores resource usage and looks only at broker msgRate and throughput."""

    name = "UniformLoadShedder"

    def find_bundles_for_unloading(self, load: LoadData, config: LoadBalancerConfig) -> SheddingResult:
        out = ResultBuilder(self.name)
        max_rate = max_tp = -1.0
        min_rate = min_tp = float(INT_MAX)
        max_rate_broker = max_tp_broker = ""
        # Four independent scans (Pulsar #21016): the max-rate and max-throughput brokers may differ.
        for broker, data in load.broker_data.items():
            local = data.local_data
            rate, tp = local.msg_rate, local.msg_throughput
            if rate > max_rate:
                max_rate, max_rate_broker = rate, broker
            if tp > max_tp:
                max_tp, max_tp_broker = tp, broker
            if rate < min_rate:
                min_rate = rate
            if tp < min_tp:
                min_tp = tp
            out.broker(
                broker,
                "considered",
                "broker traffic",
                msgRate=rate,
                throughput=tp,
                bundles=len(local.bundles),
            )
        if -EPS <= min_rate <= EPS:
            min_rate = 1.0
        if -EPS <= min_tp <= EPS:
            min_tp = 1.0
        rate_thr = config.loadBalancerMsgRateDifferenceShedderThreshold
        tp_thr = config.loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold
        rate_diff = (max_rate - min_rate) * 100 / min_rate
        tp_ratio = max_tp / min_tp
        rate_hit = rate_thr > 0 and rate_diff > rate_thr
        tp_hit = tp_thr > 0 and tp_ratio > tp_thr
        nums = {
            "maxMsgRate": max_rate,
            "minMsgRate": min_rate,
            "msgRateDifferencePercent": rate_diff,
            "msgRateThreshold": rate_thr,
            "maxThroughput": max_tp,
            "minThroughput": min_tp,
            "throughputRatio": tp_ratio,
            "throughputThreshold": tp_thr,
        }
        if not (rate_hit or tp_hit):
            return out.build(
                "balanced", "neither msg rate nor throughput spread exceeds its threshold", **nums
            )

        share = config.maxUnloadPercentage
        if rate_hit:
            source, metric_name, metric = max_rate_broker, "msgRate", msg_rate
            budget = java_int((max_rate - min_rate) * share)
            minimum = config.minUnloadMessage
        else:
            source, metric_name, metric = max_tp_broker, "throughput", throughput
            budget = java_int((max_tp - min_tp) * share)
            minimum = config.minUnloadMessageThroughput
        local = load.broker_data[source].local_data
        bnums = {
            **nums,
            "metric": metric_name,
            "required": budget,
            "minimum": minimum,
            "bundles": len(local.bundles),
        }
        # No fallback: if the chosen broker cannot shed, nothing is shed this call.
        if len(local.bundles) <= 1:
            why = "single_bundle" if local.bundles else "no_bundles"
            out.broker(source, why, "most loaded, but a broker's only bundle is never shed", **bnums)
            return out.build(why, f"{source} owns {len(local.bundles)} bundle(s)", **nums)
        if budget < minimum:
            out.broker(source, "below_min_unload", f"{metric_name} to move is below the minimum", **bnums)
            return out.build("below_min_unload", f"{metric_name} to move is below the minimum", **nums)

        cap = config.maxUnloadBundleNumPerShedding
        cands = candidates(load, local, metric)
        selected = capped = 0
        for bundle, value in cands.ranked:
            if cap != -1 and selected >= cap:
                capped += 1
                continue
            if value <= budget:
                out.unload(
                    source,
                    bundle,
                    "fits_budget",
                    f"bundle {metric_name} fits the remaining budget",
                    **{metric_name: value},
                    remainingBefore=budget,
                )
                # Pulsar subtracts the bundle's value truncated toward zero from an int budget.
                budget += java_int(-value)
                selected += 1
        out.broker(
            source,
            "most_loaded",
            f"largest {metric_name}: sheds bundles that fit the budget",
            **bnums,
            **cands.numbers(),
            selected=selected,
            skippedByCap=capped,
            remaining=budget,
        )
        return out.build(**nums)

    def on_active_brokers_change(self, active: set[str]) -> None:
        """Nothing to forget: the strategy keeps no state."""
