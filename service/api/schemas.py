"""Request and response bodies of the REST API (camelCase on the wire, like Pulsar's admin API)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SplitAlgorithm = Literal[
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
]
DecisionKind = Literal["shedding", "placement", "split", "manual", "adoption", "drain", "leadership"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class UnloadRequest(_Body):
    destination_broker: str | None = Field(
        None, alias="destinationBroker", min_length=1, description="Broker to move the bundle to"
    )


class DrainRequest(_Body):
    then_shutdown: bool = Field(
        False,
        alias="thenShutdown",
        description="Pulsar mode: Pulsar's graceful shutdown of the broker once only heartbeat "
        "namespaces are left on it",
    )


class SplitRequest(_Body):
    algorithm: SplitAlgorithm | None = Field(
        None, description="Split algorithm; the configured default if omitted"
    )
    # Each position inside Pulsar's hash range, so a bad body is a 422 naming it, never an overflow later.
    positions: list[Annotated[int, Field(ge=0, le=2**32)]] | None = Field(
        None,
        description="Hash positions for specified_positions_divide (0 to 2^32)",
        max_length=64,
    )
    unload: bool = Field(
        False, description="Also unload the children, as `pulsar-admin namespaces split-bundle -u`"
    )


class ErrorBody(BaseModel):
    detail: Any
    error: str


class BrokerSummary(BaseModel):
    broker: str
    usagePercent: dict[str, float]
    maxResourceUsage: float
    msgRateIn: float
    msgRateOut: float
    msgThroughputIn: float
    msgThroughputOut: float
    numBundles: int
    numTopics: int
    lastUpdate: int
    scores: dict[str, float]
    cordoned: bool = False
    draining: bool = False


class BrokerDetail(BrokerSummary):
    bundles: list[str]
    loadReport: dict[str, Any]


class BundleSummary(BaseModel):
    bundle: str
    namespace: str
    owner: str | None
    msgRateIn: float | None = None
    msgRateOut: float | None = None
    msgThroughputIn: float | None = None
    msgThroughputOut: float | None = None
    topics: int | None = None


class BundleDetail(BundleSummary):
    bundleData: dict[str, Any] | None
    recentlyUnloadedAt: int | None


class Lookup(BaseModel):
    topic: str
    bundle: str
    broker: str


class Leader(BaseModel):
    leader: dict[str, Any] | None
    isLeader: bool
    instance: str


class ConfigBody(BaseModel):
    values: dict[str, Any]
    dynamicKeys: list[str]


class DecisionList(BaseModel):
    decisions: list[dict[str, Any]]
    next_cursor: str | None = Field(
        None, alias="nextCursor", description="pass as ?cursor= for the next (older) page; null on the last"
    )


class DryRun(BaseModel):
    moves: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    shedding: dict[str, Any] | None
    schedule: dict[str, Any] | None = Field(
        None, description="when each move would go under the disruption budget: now, or waiting and why"
    )
    changed: bool = Field(False, description="Always false: a dry run changes nothing")


class Health(BaseModel):
    status: str
    details: dict[str, Any] = Field(default_factory=dict)


class NamespaceRow(BaseModel):
    namespace: str
    bundles: int
    namespace_anti_affinity_group: str | None = Field(None, alias="namespaceAntiAffinityGroup")


# Pulsar's NamedEntity characters (Java's \w: ASCII); cluster and policy names become path segments or keys.
NAMED_ENTITY = r"^[-=:.A-Za-z0-9_]+$"


class CreateNamespaceRequest(_Body):
    bundles: int | None = Field(None, ge=1, le=1024, description="Initial bundles (default: the config's)")
    cluster: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        pattern=NAMED_ENTITY,
        description="Replication cluster (default: this one's)",
    )
    namespace_anti_affinity_group: str | None = Field(None, alias="namespaceAntiAffinityGroup", min_length=1)


class IsolationPolicyRequest(_Body):
    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=NAMED_ENTITY,
        description="Policy name in the cluster's namespaceIsolationPolicies",
    )
    primary: list[str] = Field(min_length=1, description="Primary broker host regexes")
    secondary: list[str] = Field(default_factory=list, description="Secondary broker host regexes")
    min_limit: int = Field(
        1, alias="minLimit", ge=0, le=2**31 - 1, description="Use secondaries below this many primaries"
    )
    cluster: str | None = Field(
        None, min_length=1, max_length=256, pattern=NAMED_ENTITY, description="Cluster (default: this one's)"
    )


class NamespacePoliciesRequest(_Body):
    namespace_anti_affinity_group: str | None = Field(
        None, alias="namespaceAntiAffinityGroup", description="Set the group; empty string removes it"
    )
    isolation_policy: IsolationPolicyRequest | None = Field(None, alias="isolationPolicy")


class CordonInfo(BaseModel):
    broker: str
    since: int
    by: str | None = None
    reason: str = ""


class DrainProgress(BaseModel):
    moved: int
    total: int
    fraction: float


class DrainInfo(BaseModel):
    broker: str
    state: Literal["running", "stopped", "done", "failed"]
    startedAt: int
    updatedAt: int
    by: str | None = None
    thenShutdown: bool = False
    total: int
    moved: int
    remaining: int
    recent: list[str]
    inFlight: dict[str, Any] | None = None
    attempts: dict[str, int]
    givenUp: dict[str, str]
    shutdown: str | None = None
    message: str = ""
    progress: DrainProgress


class MaintenanceInfo(BaseModel):
    cordoned: dict[str, CordonInfo]
    drain: DrainInfo | None = None
