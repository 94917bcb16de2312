"""The rules Pulsar's leader applies around the shedding strategy (doLoadShedding)."""

from __future__ import annotations

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import LoadData
from balancer.shedding.base import LoadSheddingStrategy, SheddingResult


def prune_recently_unloaded(load: LoadData, config: LoadBalancerConfig, now_ms: int) -> list[str]:
    """Forget unloads older than the grace period (strictly older: an entry exactly at the edge
    stays protected). Mutates ``load``; returns the bundles released."""
    cutoff = now_ms - config.grace_period_ms
    recent = load.recently_unloaded_bundles
    released = [b for b, ts in recent.items() if ts < cutoff]
    for b in released:
        del recent[b]
    return released


def shed(
    load: LoadData, config: LoadBalancerConfig, strategy: LoadSheddingStrategy, now_ms: int
) -> SheddingResult:
    """One shedding pass as the leader runs it; the strategy applies its own per-broker rules."""
    released = prune_recently_unloaded(load, config, now_ms)
    protected = len(load.recently_unloaded_bundles)
    if not (config.loadBalancerEnabled and config.loadBalancerSheddingEnabled):
        return SheddingResult(
            summary=explain(
                "shedding_disabled",
                "loadBalancerEnabled or loadBalancerSheddingEnabled is false",
                strategy=strategy.name,
            )
        )
    brokers = len(load.broker_data)
    if brokers < 2:
        return SheddingResult(
            summary=explain(
                "too_few_brokers",
                "shedding needs at least two brokers",
                strategy=strategy.name,
                brokers=brokers,
            )
        )
    # The leader's view lists exactly the live brokers: state kept for others is stale.
    strategy.on_active_brokers_change(set(load.broker_data))
    result = strategy.find_bundles_for_unloading(load, config)
    result.summary.numbers.update(
        releasedFromGracePeriod=len(released),
        protectedByGracePeriod=protected,
        gracePeriodMs=config.grace_period_ms,
    )
    return result
