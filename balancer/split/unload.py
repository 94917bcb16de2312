"""Whether an automatic split unloads its children (``ModularLoadManagerImpl.checkNamespaceBundleSplit``).

Pulsar asks for the unload only when ``loadBalancerAutoUnloadSplitBundlesEnabled`` is on AND the
namespace policies leave another broker for the bundle (``shouldNamespacePoliciesUnload``) AND the
anti-affinity rule allows moving it (``shouldAntiAffinityNamespaceUnload``): unloading children that
can only come back to the same broker would cost their clients a reconnect for nothing. Manual
splits are not decided here: ``pulsar-admin namespaces split-bundle`` unloads only with ``-u``.
"""

from __future__ import annotations

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import LoadData
from balancer.placement.context import PlacementContext
from balancer.placement.filters import anti_affinity_allows_unload
from balancer.placement.pipeline import PipelineCache


def split_unload(
    bundle: str,
    broker: str,
    load: LoadData,
    config: LoadBalancerConfig,
    ctx: PlacementContext,
    cache: PipelineCache | None = None,
) -> tuple[bool, Explanation]:
    """(unload the children?, why) for an automatic split of ``bundle`` reported by ``broker``."""
    if not config.loadBalancerAutoUnloadSplitBundlesEnabled:
        return False, explain(
            "split_unload_disabled", "loadBalancerAutoUnloadSplitBundlesEnabled is false", subject=bundle
        )
    c = cache if cache is not None else PipelineCache(load, config, ctx)
    ns = namespace_of(bundle)
    policy, _ = c.policy_set(ns, bundle)
    if not any(b != broker for b in policy):
        return False, explain(
            "split_unload_no_other_broker",
            "no other broker satisfies the namespace policies; the children stay",
            subject=bundle,
            broker=broker,
            policy_brokers=len(policy),
        )
    group = ctx.anti_affinity_groups.get(ns)
    if group is not None:
        blocked = anti_affinity_allows_unload(broker, policy, c.anti_affinity_counts(group))
        if blocked is not None:
            blocked.subject = bundle
            return False, blocked
    return True, explain(
        "split_unload", "the children are unloaded and placed afresh", subject=bundle, broker=broker
    )
