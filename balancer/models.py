"""Pulsar's load data, with the JSON member names Pulsar writes into ZooKeeper.

Attributes are snake_case in Python and camelCase on the wire (``model_dump(by_alias=True)``,
or :func:`to_json`). Readers ignore unknown members and accept ``null`` where Pulsar may write it,
because brokers of other versions write slightly different shapes. Derived values
(``percentUsage``, the max resource usage) are computed, never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from balancer.javamath import f32
from balancer.models_base import (
    DEFAULT_MSG_RATE,
    DEFAULT_MSG_THROUGHPUT,
    LONG_TERM_SAMPLES,
    MIB,
    SHORT_TERM_SAMPLES,
    NamespaceBundleStats,
    PulsarModel,
    ResourceUsage,
    ResourceWeights,
    SystemResourceUsage,
)
from balancer.time_averages import BundleData, ResourceQuota, TimeAverageBrokerData, TimeAverageMessageData

__all__ = [
    "DEFAULT_MSG_RATE",
    "DEFAULT_MSG_THROUGHPUT",
    "LONG_TERM_SAMPLES",
    "MIB",
    "SHORT_TERM_SAMPLES",
    "BrokerData",
    "BundleData",
    "LoadData",
    "LocalBrokerData",
    "NamespaceBundleStats",
    "PulsarModel",
    "ResourceQuota",
    "ResourceUsage",
    "ResourceWeights",
    "SystemResourceUsage",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
]


class LocalBrokerData(PulsarModel):
    """What a broker publishes about itself at ``/loadbalance/brokers/<brokerId>``."""

    web_service_url: str | None = None
    web_service_url_tls: str | None = None
    pulsar_service_url: str | None = None
    pulsar_service_url_tls: str | None = None
    persistent_topics_enabled: bool = True
    non_persistent_topics_enabled: bool = True
    cpu: ResourceUsage = Field(default_factory=ResourceUsage)
    memory: ResourceUsage = Field(default_factory=ResourceUsage)
    direct_memory: ResourceUsage = Field(default_factory=ResourceUsage)
    bandwidth_in: ResourceUsage = Field(default_factory=ResourceUsage)
    bandwidth_out: ResourceUsage = Field(default_factory=ResourceUsage)
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    last_update: int = 0
    last_stats: dict[str, NamespaceBundleStats] = Field(default_factory=dict)
    num_topics: int = 0
    num_bundles: int = 0
    num_consumers: int = 0
    num_producers: int = 0
    bundles: set[str] = Field(default_factory=set)
    last_bundle_gains: set[str] = Field(default_factory=set)
    last_bundle_losses: set[str] = Field(default_factory=set)
    broker_version_string: str | None = None
    protocols: dict[str, str] = Field(default_factory=dict)
    advertised_listeners: dict[str, Any] = Field(default_factory=dict)
    load_report_type: Literal["LocalBrokerData"] = "LocalBrokerData"
    load_manager_class_name: str | None = None
    start_timestamp: int | None = None

    @field_validator("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out", mode="before")
    @classmethod
    def _usage_null(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator(
        "last_stats",
        "protocols",
        "advertised_listeners",
        "bundles",
        "last_bundle_gains",
        "last_bundle_losses",
        mode="before",
    )
    @classmethod
    def _collection_null(cls, v: Any, info: Any) -> Any:
        if v is None:
            return {} if info.field_name in ("last_stats", "protocols", "advertised_listeners") else set()
        return v

    @field_validator("msg_throughput_in", "msg_throughput_out", "msg_rate_in", "msg_rate_out", mode="before")
    @classmethod
    def _traffic_null(cls, v: Any) -> Any:
        return 0.0 if v is None else v

    @field_validator("load_report_type", mode="before")
    @classmethod
    def _report_type(cls, v: Any) -> Any:
        # The SimpleLoadManager's LoadReport shares the node; it is not ours to read as LocalBrokerData.
        if v not in (None, "LocalBrokerData"):
            raise ValueError(f"loadReportType {v!r} is not LocalBrokerData")
        return "LocalBrokerData"

    # ---- derived values -------------------------------------------------------------------
    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out

    def usages(self) -> SystemResourceUsage:
        return SystemResourceUsage(
            cpu=self.cpu,
            memory=self.memory,
            direct_memory=self.direct_memory,
            bandwidth_in=self.bandwidth_in,
            bandwidth_out=self.bandwidth_out,
        )

    def max_resource_usage(self) -> float:
        """Unweighted max of cpu, directMemory, bandwidthIn/Out as a fraction (float32 steps).

        Heap memory is excluded, as in Pulsar since late 2022.
        """
        p = max(
            self.cpu.percent_usage(),
            self.direct_memory.percent_usage(),
            self.bandwidth_in.percent_usage(),
            self.bandwidth_out.percent_usage(),
        )
        return f32(f32(p) / f32(100.0))

    def max_resource_usage_with_weight(self, w: ResourceWeights, include_memory: bool = True) -> float:
        """Weighted max usage as a fraction, unclipped (Pulsar's ``getMaxResourceUsageWithWeight``).

        ``include_memory=False`` is the four-weight form AvgShedder and placement use; with the
        default memory weight 0 both forms agree.
        """
        best = -float("inf")
        pairs = [
            (self.cpu, w.cpu),
            (self.direct_memory, w.direct_memory),
            (self.bandwidth_in, w.bandwidth_in),
            (self.bandwidth_out, w.bandwidth_out),
        ]
        if include_memory:
            pairs.insert(1, (self.memory, w.memory))
        for usage, weight in pairs:
            v = usage.percent_usage() * weight
            if v > best:
                best = v
        return best / 100.0

    # ---- Pulsar's update rule -------------------------------------------------------------
    def update(self, system: SystemResourceUsage, bundle_stats: Mapping[str, NamespaceBundleStats]) -> None:
        """Apply a fresh sample: usages, bundle gains/losses since the last write, re-summed totals."""
        self.cpu = system.cpu.model_copy()
        self.memory = system.memory.model_copy()
        self.direct_memory = system.direct_memory.model_copy()
        self.bandwidth_in = system.bandwidth_in.model_copy()
        self.bandwidth_out = system.bandwidth_out.model_copy()
        for b in list(self.bundles):
            if b not in bundle_stats:
                self.bundles.discard(b)
                self.last_bundle_losses.add(b)
        for b in bundle_stats:
            if b not in self.bundles:
                self.bundles.add(b)
                self.last_bundle_gains.add(b)
        self.msg_rate_in = sum(s.msg_rate_in for s in bundle_stats.values())
        self.msg_rate_out = sum(s.msg_rate_out for s in bundle_stats.values())
        self.msg_throughput_in = sum(s.msg_throughput_in for s in bundle_stats.values())
        self.msg_throughput_out = sum(s.msg_throughput_out for s in bundle_stats.values())
        self.num_topics = sum(s.topics for s in bundle_stats.values())
        self.num_consumers = sum(s.consumer_count for s in bundle_stats.values())
        self.num_producers = sum(s.producer_count for s in bundle_stats.values())
        self.num_bundles = len(bundle_stats)
        self.last_stats = dict(bundle_stats)

    def mark_written(self, now_ms: int) -> None:
        """After a successful write: stamp the time and start a new gains/losses window."""
        self.last_update = now_ms
        self.last_bundle_gains = set()
        self.last_bundle_losses = set()

    def to_json_dict(self) -> dict[str, Any]:
        d = super().to_json_dict()
        # Sets serialise in arbitrary order; sorted lists make reports diffable and stable.
        for k in ("bundles", "lastBundleGains", "lastBundleLosses"):
            d[k] = sorted(d[k])
        # Jackson also writes LocalBrokerData.getMaxResourceUsage() (a fraction); readers of the
        # node such as Pulsar's admin tools expect it there.
        d["maxResourceUsage"] = self.max_resource_usage()
        return d


class BrokerData(PulsarModel):
    """The leader's in-memory view of one broker (never written as a whole)."""

    local_data: LocalBrokerData = Field(default_factory=LocalBrokerData)
    time_average_data: TimeAverageBrokerData = Field(default_factory=TimeAverageBrokerData)
    preallocated_bundle_data: dict[str, BundleData] = Field(default_factory=dict)


class LoadData(PulsarModel):
    """The leader's whole view: brokers, bundle data, and recently unloaded bundles (epoch ms)."""

    broker_data: dict[str, BrokerData] = Field(default_factory=dict)
    bundle_data: dict[str, BundleData] = Field(default_factory=dict)
    recently_unloaded_bundles: dict[str, int] = Field(default_factory=dict)

    def owner_of(self, bundle: str) -> str | None:
        for broker, data in self.broker_data.items():
            if bundle in data.local_data.bundles:
                return broker
        return None
