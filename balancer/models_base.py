"""The building blocks of Pulsar's load data: the camelCase base model, resource usages, a bundle's
stats as a broker reports them, and the window sizes and defaults Pulsar seeds data with.
:mod:`balancer.models` re-exports all of them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from balancer.javamath import percent_usage

SHORT_TERM_SAMPLES = 10
LONG_TERM_SAMPLES = 1000
DEFAULT_MSG_RATE = 50.0
DEFAULT_MSG_THROUGHPUT = 50_000.0
MIB = 1024 * 1024


class PulsarModel(BaseModel):
    """Base: camelCase aliases, unknown members ignored, plain mutable objects."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        validate_assignment=False,
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The object as Pulsar would serialise it: camelCase members, and null members left out, as
        Pulsar's ObjectMapperFactory mapper does (``Include.NON_NULL``)."""
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


def _none_to_zero(v: Any) -> Any:
    return 0.0 if v is None else v


class ResourceUsage(PulsarModel):
    """One resource: ``usage`` and ``limit`` (units only matter as a ratio)."""

    usage: float = 0.0
    limit: float = 0.0

    _nz = field_validator("usage", "limit", mode="before")(_none_to_zero)

    def percent_usage(self) -> float:
        """Pulsar's float32 ``usage/limit*100``; 0 when the limit is not set."""
        return percent_usage(self.usage, self.limit)


class SystemResourceUsage(PulsarModel):
    """The five host resources a broker reports about itself."""

    cpu: ResourceUsage = Field(default_factory=ResourceUsage)
    memory: ResourceUsage = Field(default_factory=ResourceUsage)
    direct_memory: ResourceUsage = Field(default_factory=ResourceUsage)
    bandwidth_in: ResourceUsage = Field(default_factory=ResourceUsage)
    bandwidth_out: ResourceUsage = Field(default_factory=ResourceUsage)


class NamespaceBundleStats(PulsarModel):
    """Per-bundle traffic of the latest report (value type of ``lastStats``)."""

    msg_rate_in: float = 0.0
    msg_throughput_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_out: float = 0.0
    consumer_count: int = 0
    producer_count: int = 0
    topics: int = 0
    cache_size: int = 0

    _nz = field_validator(
        "msg_rate_in", "msg_throughput_in", "msg_rate_out", "msg_throughput_out", mode="before"
    )(_none_to_zero)

    @property
    def msg_rate(self) -> float:
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        return self.msg_throughput_in + self.msg_throughput_out


class ResourceWeights(BaseModel):
    """Multipliers of the weighted max resource usage (Pulsar's ``loadBalancer*ResourceWeight``)."""

    model_config = ConfigDict(frozen=True)

    cpu: float = 1.0
    memory: float = 0.0
    direct_memory: float = 0.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0
