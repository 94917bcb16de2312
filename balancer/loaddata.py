"""Time-averaged load data and the report rules around it (Pulsar's ModularLoadManagerImpl).

- :func:`update_bundle_data`: one sample per bundle per broker listing it, seeding unknown bundles
  from stored data, a resource quota, or Pulsar's defaults; drops vanished bundles; recomputes
  every broker's time-averaged totals.
- :func:`need_report_update`: whether a broker should rewrite its report now, and why.
- :func:`top_k_bundles_to_write`: which bundles the leader persists each write period.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from balancer.bundles import namespace_of
from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain
from balancer.models import BundleData, LoadData, LocalBrokerData, NamespaceBundleStats, ResourceQuota
from balancer.placement.base import weighted_usage


def initial_bundle_data(
    bundle: str, stored: Mapping[str, BundleData], quotas: Mapping[str, ResourceQuota]
) -> tuple[BundleData, str]:
    """Pulsar's get-or-default: stored bundle data, else the bundle's quota (as full history),
    else the default stats with no samples. Returns the data and where it came from."""
    s = stored.get(bundle)
    if s is not None:
        # Field by field: pydantic's generic deep copy cost a live leader's first sync of 100,000
        # bundles ~30 s; both windows hold only numbers, so shallow copies of them are deep.
        copied = s.model_copy(
            update={
                "short_term_data": s.short_term_data.model_copy(),
                "long_term_data": s.long_term_data.model_copy(),
            }
        )
        return copied, "stored"
    q = quotas.get(bundle)
    if q is not None:
        return BundleData.from_quota(q), "quota"
    return BundleData.default(), "default"


def update_bundle_data(
    load: LoadData,
    now_ms: int,
    stored_bundle_data: Mapping[str, BundleData],
    quotas: Mapping[str, ResourceQuota],
) -> list[str]:
    """One ``updateBundleData`` pass over ``load`` (mutated). Returns the names of dropped bundles."""
    bundle_data = load.bundle_data
    active: set[str] = set()
    for data in load.broker_data.values():
        local = data.local_data
        for bundle, stats in local.last_stats.items():
            active.add(bundle)
            bd = bundle_data.get(bundle)
            if bd is None:
                bd, _ = initial_bundle_data(bundle, stored_bundle_data, quotas)
                bundle_data[bundle] = bd
            add_sample(bd, stats)
        # A preallocated bundle the broker now reports is plain ownership from here on.
        for bundle in [b for b in data.preallocated_bundle_data if b in local.last_stats]:
            del data.preallocated_bundle_data[bundle]
    dropped = [b for b in bundle_data if b not in active]
    for b in dropped:
        del bundle_data[b]
    for data in load.broker_data.values():
        data.time_average_data.reset(data.local_data.last_stats.keys(), bundle_data)
    return dropped


_WINDOW_FIELDS = ("num_samples", "msg_throughput_in", "msg_throughput_out", "msg_rate_in", "msg_rate_out")


def add_sample(bd: BundleData, stats: NamespaceBundleStats) -> None:
    """``BundleData.update`` with the same arithmetic on plain floats, written straight into the
    models' ``__dict__`` (pydantic's ``__setattr__`` per field dominated a 100,000-bundle pass)."""
    r_in, r_out = stats.msg_rate_in, stats.msg_rate_out
    tp_in, tp_out = stats.msg_throughput_in, stats.msg_throughput_out
    for window in (bd.short_term_data, bd.long_term_data):
        d = window.__dict__
        n = min(d["num_samples"] + 1, d["max_samples"])
        d["num_samples"] = n
        d["msg_throughput_in"] = ((n - 1) * d["msg_throughput_in"] + tp_in) / n
        d["msg_throughput_out"] = ((n - 1) * d["msg_throughput_out"] + tp_out) / n
        d["msg_rate_in"] = ((n - 1) * d["msg_rate_in"] + r_in) / n
        d["msg_rate_out"] = ((n - 1) * d["msg_rate_out"] + r_out) / n
        window.__pydantic_fields_set__.update(_WINDOW_FIELDS)
    bd.__dict__["topics"] = stats.topics
    bd.__pydantic_fields_set__.add("topics")


def percent_change(old: float, new: float) -> float:
    """Pulsar's relative change in percent: 0 for 0->0, +inf from 0 to anything else."""
    if old == 0:
        return 0.0 if new == 0 else math.inf
    return 100 * abs((old - new) / old)


def need_report_update(
    last: LocalBrokerData, current: LocalBrokerData, config: LoadBalancerConfig, now_ms: int
) -> Explanation | None:
    """None when the broker's report need not be rewritten; otherwise which figure says it must.

    ``last`` is the data as last written, ``current`` the freshly updated data (its
    ``last_update`` is the time of the last write). The task itself runs every
    ``loadBalancerReportUpdateMinIntervalMillis``; see :func:`report_task_due`.
    """
    max_age_ms = config.loadBalancerReportUpdateMaxIntervalMinutes * 60_000
    age = now_ms - current.last_update
    if age > max_age_ms:
        return explain(
            "max_interval", "report older than the maximum interval", age_ms=age, max_interval_ms=max_age_ms
        )
    w = config.weights()
    figures = {
        "msg_rate": percent_change(last.msg_rate, current.msg_rate),
        "msg_throughput": percent_change(last.msg_throughput, current.msg_throughput),
        "num_bundles": percent_change(last.num_bundles, current.num_bundles),
        "resource_usage": 100 * abs(weighted_usage(last, w) - weighted_usage(current, w)),
    }
    threshold = config.loadBalancerReportUpdateThresholdPercentage
    which = max(figures, key=lambda k: figures[k])
    if figures[which] > threshold:
        unit = "points" if which == "resource_usage" else "%"
        return Explanation(
            reason=f"{which}_changed",
            message=f"{which} changed by {figures[which]:.4g} {unit} > {threshold}",
            numbers={"threshold": threshold, **figures},
        )
    return None


def report_task_due(last_run_ms: int | None, now_ms: int, config: LoadBalancerConfig) -> bool:
    """The report task's cadence: at most once per ``loadBalancerReportUpdateMinIntervalMillis``."""
    return last_run_ms is None or now_ms - last_run_ms >= config.loadBalancerReportUpdateMinIntervalMillis


def top_k_bundles_to_write(load: LoadData, config: LoadBalancerConfig) -> list[str]:
    """Bundles to persist, hottest first: all when K <= 0, else the top K x max(1, brokers).

    Namespaces excluded from shedding are never written. Ties keep name order, for stable output.
    """
    excluded = set(config.loadBalancerSheddingExcludedNamespaces)
    names = [b for b in load.bundle_data if namespace_of(b) not in excluded]
    k = config.loadBalancerMaxNumberOfBundlesInBundleLoadReport
    ranked = sorted(sorted(names), key=lambda b: load.bundle_data[b].order_key(), reverse=True)
    if k <= 0:
        return ranked
    return ranked[: k * max(1, len(load.broker_data))]
