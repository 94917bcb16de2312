"""Every load-balancer key loadmgr reads, with Pulsar's key names, units and defaults.

Attribute names are Pulsar's ``broker.conf`` keys verbatim, so an operator's file, an environment
override and ``GET /config`` all speak the same names. Interval keys accept fractions of a
minute (Pulsar takes whole minutes) so tests and the demo can run on a seconds scale.
Keys marked dynamic may be changed at run time (``PUT /config``), as in Pulsar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from balancer.errors import ConfigError
from balancer.models import MIB, ResourceWeights

IMPL = "org.apache.pulsar.broker.loadbalance.impl."


YEAR_MINUTES = 525_600.0
JAVA_INT_MAX = 2**31 - 1
# Allowed range per numeric key, and why. Pulsar reads these as Java ints/doubles and checks few of
# them; the bounds here keep each key where Pulsar's code gives it a meaning: percentages 0-100,
# fractions 0-1, periods positive and below a year (a longer one cannot be scheduled and means
# "never", which the key's own switch says better), counts where Pulsar documents "<= 0 off" left
# open below, everything else non-negative. A value outside is refused with the key, the value
# and this reason, before anything changes.
_PERIOD = (1e-4, YEAR_MINUTES, "a period in minutes, positive and below a year")
_PCT = (0, 100, "a percentage")
_FRACTION = (0.0, 1.0, "a fraction")
_WEIGHT = (0.0, 1e6, "a non-negative weight")
_COUNT = (0, JAVA_INT_MAX, "a non-negative Java int")
_OFF_BELOW = (-JAVA_INT_MAX, JAVA_INT_MAX, "a Java int; <= 0 turns the check off")
RANGES: dict[str, tuple[float, float, str]] = {
    "loadBalancerSheddingIntervalMinutes": _PERIOD,
    "loadBalancerSheddingGracePeriodMinutes": (0.0, YEAR_MINUTES, "minutes, at most a year"),
    "loadBalancerResourceQuotaUpdateIntervalMinutes": _PERIOD,
    "loadBalancerReportUpdateThresholdPercentage": _PCT,
    "loadBalancerReportUpdateMinIntervalMillis": (
        100,
        86_400_000,
        "ms between report checks, 0.1 s to a day",
    ),
    "loadBalancerReportUpdateMaxIntervalMinutes": _PERIOD,
    "loadBalancerHostUsageCheckIntervalMinutes": _PERIOD,
    "loadBalancerMaxNumberOfBundlesInBundleLoadReport": _OFF_BELOW,
    "loadBalancerBrokerOverloadedThresholdPercentage": _PCT,
    "loadBalancerBrokerThresholdShedderPercentage": _PCT,
    "loadBalancerHistoryResourcePercentage": _FRACTION,
    "loadBalancerBundleUnloadMinThroughputThreshold": (0.0, 1e9, "non-negative MB/s"),
    "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": _PCT,
    "loadBalancerCPUResourceWeight": _WEIGHT,
    "loadBalancerMemoryResourceWeight": _WEIGHT,
    "loadBalancerDirectMemoryResourceWeight": _WEIGHT,
    "loadBalancerBandwidthInResourceWeight": _WEIGHT,
    "loadBalancerBandwidthOutResourceWeight": _WEIGHT,
    "loadBalancerBandwithInResourceWeight": _WEIGHT,
    "loadBalancerBandwithOutResourceWeight": _WEIGHT,
    "loadBalancerMsgRateDifferenceShedderThreshold": (-1e9, 1e9, "percent; <= 0 turns it off"),
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": (
        -1e9,
        1e9,
        "a ratio; <= 0 turns it off",
    ),
    "maxUnloadPercentage": _FRACTION,
    "minUnloadMessage": _COUNT,
    "minUnloadMessageThroughput": _COUNT,
    "maxUnloadBundleNumPerShedding": (-1, JAVA_INT_MAX, "bundles per call; -1 means no cap"),
    "loadBalancerBalancedShedderUnderloadedMultiplier": (0.0, 1.0, "a fraction; 0 turns the rule off"),
    "loadBalancerBalancedShedderPlannerTimeLimitSeconds": (0.01, 3600.0, "seconds, 0.01 to an hour"),
    "loadBalancerAvgShedderLowThreshold": _PCT,
    "loadBalancerAvgShedderHighThreshold": _PCT,
    "loadBalancerAvgShedderHitCountLowThreshold": _COUNT,
    "loadBalancerAvgShedderHitCountHighThreshold": _COUNT,
    "loadBalancerBrokerMaxTopics": _COUNT,
    "loadBalancerOverrideBrokerNicSpeedGbps": (1e-6, 1e6, "a positive NIC speed in Gbit/s"),
    "loadBalancerNamespaceBundleMaxTopics": _OFF_BELOW,
    "loadBalancerNamespaceBundleMaxSessions": _OFF_BELOW,
    "loadBalancerNamespaceBundleMaxMsgRate": _OFF_BELOW,
    "loadBalancerNamespaceBundleMaxBandwidthMbytes": _OFF_BELOW,
    "loadBalancerNamespaceMaximumBundles": (1, JAVA_INT_MAX, "at least one bundle"),
    "flowOrQpsDifferenceThresholdPercentage": _PCT,
    # 65536 ranges keep a new namespace's layout node (13 bytes a boundary) under ZooKeeper's 1 MiB.
    "defaultNumberOfNamespaceBundles": (1, 65_536, "bundles of a new namespace"),
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle": _OFF_BELOW,
    "loadBalanceSheddingDelayInSeconds": (0, 31_536_000, "seconds, at most a year; 0 turns it off"),
    "loadBalancerMaxUnloadsInFlightPerBroker": _OFF_BELOW,
    "loadBalancerMaxUnloadsInFlightPerDestination": _OFF_BELOW,
    "loadBalancerMaxUnloadsInFlight": _OFF_BELOW,
    "loadBalancerUnloadServedTimeoutSeconds": (0.0, 86_400.0, "seconds, at most a day; 0 turns it off"),
    "loadBalancerUnloadSpacingSeconds": (0.0, 3_600.0, "seconds, at most an hour; 0 turns it off"),
}


def _dyn(default: Any, doc: str, dynamic: bool = True) -> Any:
    return Field(default=default, description=doc, json_schema_extra={"dynamic": dynamic})


class LoadBalancerConfig(BaseModel):
    """Pulsar's load-balancer configuration (ModularLoadManagerImpl and its strategies)."""

    # NaN and Infinity are refused for every float key: an interval of Infinity cannot be scheduled
    # and a NaN threshold makes every comparison false.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False)

    # --- switches and classes -------------------------------------------------------------
    # Static in Pulsar's ServiceConfiguration (no ``dynamic = true``): changed by restart only.
    loadBalancerEnabled: bool = _dyn(True, "Master switch for reports and shedding", False)
    loadBalancerSheddingEnabled: bool = _dyn(True, "Run load shedding on the leader")
    loadManagerClassName: str = _dyn(IMPL + "ModularLoadManagerImpl", "This broker's load manager class")
    loadBalancerLoadSheddingStrategy: str = _dyn(
        IMPL + "ThresholdShedder", "Shedding strategy (class or short name)"
    )
    loadBalancerLoadPlacementStrategy: str = _dyn(
        IMPL + "LeastLongTermMessageRate", "Placement strategy (class or short name)", False
    )
    # --- cadence ------------------------------------------------------------------------------
    loadBalancerSheddingIntervalMinutes: float = _dyn(1.0, "Leader shedding period, minutes")
    loadBalancerSheddingGracePeriodMinutes: float = _dyn(30.0, "Recently-unloaded window, minutes")
    loadBalancerResourceQuotaUpdateIntervalMinutes: float = _dyn(
        15.0, "Bundle-data and time-average write period, minutes", False
    )
    loadBalancerReportUpdateThresholdPercentage: int = _dyn(10, "Report change threshold, percent (strict >)")
    loadBalancerReportUpdateMinIntervalMillis: int = _dyn(5000, "Report task period, ms")
    loadBalancerReportUpdateMaxIntervalMinutes: float = _dyn(15.0, "Forced report age, minutes (strict >)")
    loadBalancerHostUsageCheckIntervalMinutes: float = _dyn(1.0, "Host usage sampling period, minutes")
    loadBalancerMaxNumberOfBundlesInBundleLoadReport: int = _dyn(
        10, "Top-K bundles per broker written as bundle data (<=0 all)"
    )
    # --- overload and thresholds ---------------------------------------------------------------
    loadBalancerBrokerOverloadedThresholdPercentage: int = _dyn(
        85, "Overloaded above this weighted usage, percent"
    )
    loadBalancerBrokerThresholdShedderPercentage: int = _dyn(
        10, "ThresholdShedder margin over the average, points"
    )
    loadBalancerHistoryResourcePercentage: float = _dyn(0.9, "Weight of history in smoothed usage (fraction)")
    loadBalancerBundleUnloadMinThroughputThreshold: float = _dyn(10.0, "Minimum throughput to shed, MB/s")
    lowerBoundarySheddingEnabled: bool = _dyn(
        False, "ThresholdShedder sheds toward under-loaded brokers", False
    )
    loadBalancerAverageResourceUsageDifferenceThresholdPercentage: int = _dyn(
        10, "LeastResourceUsageWithWeight margin, percent"
    )
    # --- resource weights ----------------------------------------------------------------------
    loadBalancerCPUResourceWeight: float = _dyn(1.0, "CPU weight")
    loadBalancerMemoryResourceWeight: float = _dyn(0.0, "Heap memory weight (deprecated, 0)")
    loadBalancerDirectMemoryResourceWeight: float = _dyn(0.0, "Direct memory weight")
    loadBalancerBandwidthInResourceWeight: float = _dyn(1.0, "NIC in weight")
    loadBalancerBandwidthOutResourceWeight: float = _dyn(1.0, "NIC out weight")
    loadBalancerBandwithInResourceWeight: float = _dyn(1.0, "Deprecated spelling of the NIC in weight")
    loadBalancerBandwithOutResourceWeight: float = _dyn(1.0, "Deprecated spelling of the NIC out weight")
    # --- UniformLoadShedder / AvgShedder ----------------------------------------------------
    loadBalancerMsgRateDifferenceShedderThreshold: float = _dyn(
        50.0, "Uniform: msg-rate difference, percent (<=0 off)"
    )
    loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold: float = _dyn(
        4.0, "Uniform: throughput ratio (<=0 off)"
    )
    maxUnloadPercentage: float = _dyn(0.2, "Fraction of the max-min gap to move")
    minUnloadMessage: int = _dyn(1000, "Minimum msg/s to move")
    minUnloadMessageThroughput: int = _dyn(1048576, "Minimum bytes/s to move")
    maxUnloadBundleNumPerShedding: int = _dyn(-1, "Uniform: bundles per call (-1 no cap)")
    # ints in Pulsar's ServiceConfiguration: "15.5" in a broker.conf is refused there too.
    loadBalancerAvgShedderLowThreshold: int = _dyn(15, "AvgShedder low score gap, points")
    loadBalancerAvgShedderHighThreshold: int = _dyn(40, "AvgShedder high score gap, points")
    loadBalancerAvgShedderHitCountLowThreshold: int = _dyn(8, "AvgShedder hits needed in the low zone")
    loadBalancerAvgShedderHitCountHighThreshold: int = _dyn(2, "AvgShedder hits needed in the high zone")
    # loadmgr's own key (BalancedShedder is not a Pulsar class): the water-fill decides when and how
    # much, and with "leastMove" (the default since issue 31's seventh round) an exact least-move
    # program (HiGHS through scipy) decides which bundles, where it finds a cheaper plan.
    loadBalancerBalancedShedderPlanner: Literal["fill", "leastMove"] = _dyn(
        "leastMove", "BalancedShedder's plan: leastMove (least-move program on the water-fill) or fill"
    )
    # loadmgr's own key, named like Pulsar's (TransferShedder has no key for it: its multiplier is
    # min(0.5, loadBalancerBrokerLoadTargetStd / 2), 0.125 at Pulsar's defaults). A broker whose msg
    # rate and throughput, per unit of its capacity, are both below this fraction of the busiest
    # broker's (or that owns no bundles) is a joining broker: the next cycle fills it, whatever its idle
    # JVM's CPU says. 0 turns the rule off. 0.125, as Pulsar's: with nothing moving, brokers owning
    # bundles came below 0.25 in spikes 1 of 30 instances (a 1-3 minute spike) and waves_opposite's
    # troughs reach 0.265; below 0.125 in no family balanced on average (instances 0..29, BENCHMARKS).
    loadBalancerBalancedShedderUnderloadedMultiplier: float = _dyn(
        0.125, "BalancedShedder: a broker under this fraction of the busiest's traffic is filled at once"
    )
    # The least-move planner's wall-clock budget per cycle (HiGHS's time limit); when it runs out the
    # water-fill's plan stands. A cycle that plans spends ~0.1-0.8 s there on the bench's clusters on a
    # quiet machine; 2 s ran out on a 700-bundle test cluster with the machine's load at 12 on 2 cores.
    loadBalancerBalancedShedderPlannerTimeLimitSeconds: float = _dyn(
        5.0, "BalancedShedder: least-move planner's time limit per cycle, seconds (then the fill)"
    )
    atLeastOneBundleSelected: bool = _dyn(True, "Unload at least one bundle (Overload/Threshold)")
    namespaceBundleUnloadingTimeoutMs: int = _dyn(60000, "Time allowed to unload one bundle, ms")
    # --- disruption budget: a plan's moves paced (balancer/pacing.py, issue 46) -----------------
    # Extensible's keys, with their names and defaults: brokers shed per cycle, and the delay before
    # a broker that unloaded is shed again (TransferShedder measures it on the broker's load report
    # time; a Modular broker may not report for 15 minutes, so here the plan's time is used).
    loadBalancerMaxNumberOfBrokerSheddingPerCycle: int = _dyn(
        3, "Source brokers one shedding cycle unloads from (<=0 no cap)"
    )
    loadBalanceSheddingDelayInSeconds: int = _dyn(
        180, "Seconds after a broker's last unload before a plan may shed it again (0 off)"
    )
    # loadmgr's own keys. One unload in flight per broker: four at once from one broker cost a p99
    # publish latency of 1,471 ms on real brokers, against 59 ms for ThresholdShedder's one bundle per
    # broker per cycle (BENCHMARKS, "Against Pulsar's own load managers"). Three in the cluster: one
    # per broker Extensible may shed in a cycle. Served timeout: 30 s, over eight times the longest
    # publish gap a move caused there (3.5 s); past it a move no longer holds its broker's slot.
    loadBalancerMaxUnloadsInFlightPerBroker: int = _dyn(
        1, "Unloads from one broker not yet served at their destination (<=0 no cap)"
    )
    # The receiving end too: on real brokers three bundles sent to a joining broker from three
    # sources in one second cost a 6.2 s publish gap and 5.2 s p99 (BENCHMARKS, issue 46); a fresh
    # JVM takes them better one at a time. Cruise Control caps moves per broker at both ends.
    loadBalancerMaxUnloadsInFlightPerDestination: int = _dyn(
        1, "Unloads to one broker not yet served there (<=0 no cap)"
    )
    loadBalancerMaxUnloadsInFlight: int = _dyn(3, "Unloads in the cluster not yet served (<=0 no cap)")
    loadBalancerUnloadServedTimeoutSeconds: float = _dyn(
        30.0, "Seconds an unserved unload holds its broker's slot (0: until served)"
    )
    # Served is not settled: on Modular brokers a plan's moves, each released once the previous was
    # served (0.4-1.2 s), still went within two seconds, and p99 around them was 1,608 ms; moves 30 s
    # apart cost 75 ms (head-to-head seed 1). 15 s keeps one move's reconnects and lookups (gaps up
    # to 6 s measured) clear of the next at the same broker, and a four-move plan within a minute.
    loadBalancerUnloadSpacingSeconds: float = _dyn(
        15.0,
        "Seconds between two unloads at one broker, as source or destination (shedding, drain; "
        "operators' go at once; 0 off)",
    )
    exposeBundlesMetricsInPrometheus: bool = _dyn(
        False, "Export per-bundle pulsar_bundle_* metrics on /metrics", False
    )
    # --- placement filters -------------------------------------------------------------------
    loadBalancerBrokerMaxTopics: int = _dyn(50000, "Max topics per broker for placement")
    loadBalancerDistributeBundlesEvenlyEnabled: bool = _dyn(True, "Spread a namespace's bundles evenly")
    loadBalancerSheddingExcludedNamespaces: list[str] = _dyn([], "Namespaces never shed; placed round-robin")
    preferLaterVersions: bool = _dyn(False, "Place only on brokers of the newest version")
    failureDomainsEnabled: bool = _dyn(False, "Anti-affinity across failure domains")
    enablePersistentTopics: bool = _dyn(True, "Broker serves persistent topics", False)
    enableNonPersistentTopics: bool = _dyn(True, "Broker serves non-persistent topics", False)
    loadBalancerOverrideBrokerNicSpeedGbps: float | None = _dyn(None, "NIC speed override, Gbit/s", False)
    # --- split ---------------------------------------------------------------------------------
    loadBalancerAutoBundleSplitEnabled: bool = _dyn(True, "Split hot bundles")
    loadBalancerAutoUnloadSplitBundlesEnabled: bool = _dyn(True, "Unload children after a split")
    loadBalancerNamespaceBundleMaxTopics: int = _dyn(1000, "Split above this many topics")
    loadBalancerNamespaceBundleMaxSessions: int = _dyn(
        1000, "Split above this many producers+consumers (<=0 off)"
    )
    loadBalancerNamespaceBundleMaxMsgRate: int = _dyn(30000, "Split above this msg/s")
    loadBalancerNamespaceBundleMaxBandwidthMbytes: int = _dyn(100, "Split above this MB/s")
    loadBalancerNamespaceMaximumBundles: int = _dyn(128, "Maximum bundles per namespace")
    supportedNamespaceBundleSplitAlgorithms: list[str] = _dyn(
        [
            "range_equally_divide",
            "topic_count_equally_divide",
            "specified_positions_divide",
            "flow_or_qps_equally_divide",
        ],
        "Split algorithms accepted",
    )
    defaultNamespaceBundleSplitAlgorithm: str = _dyn("range_equally_divide", "Split algorithm of auto splits")
    flowOrQpsDifferenceThresholdPercentage: int = _dyn(10, "flow_or_qps guard, percent")
    defaultNumberOfNamespaceBundles: int = _dyn(4, "Bundles of a new namespace")
    topicBundleAssignmentStrategy: str = _dyn(
        "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner", "Topic to bundle", False
    )

    @field_validator(
        "loadBalancerSheddingExcludedNamespaces", "supportedNamespaceBundleSplitAlgorithms", mode="before"
    )
    @classmethod
    def _comma_list(cls, v: Any) -> Any:
        # broker.conf writes lists as comma-separated text.
        if isinstance(v, str):
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @field_validator("loadBalancerOverrideBrokerNicSpeedGbps", mode="before")
    @classmethod
    def _empty_none(cls, v: Any) -> Any:
        return None if v == "" else v

    @field_validator(*RANGES, mode="after")
    @classmethod
    def _in_range(cls, v: Any, info: Any) -> Any:
        lo, hi, why = RANGES[info.field_name]
        if v is not None and not lo <= v <= hi:
            raise ValueError(f"must be within [{lo:g}, {hi:g}] ({why})")
        return v

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def keys(cls) -> list[str]:
        return list(cls.model_fields)

    @classmethod
    def dynamic_keys(cls) -> set[str]:
        out = set()
        for name, f in cls.model_fields.items():
            extra = f.json_schema_extra
            if isinstance(extra, dict) and extra.get("dynamic"):
                out.add(name)
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], ignore_unknown: bool = False) -> LoadBalancerConfig:
        """Build from key/value pairs; an unknown key or a bad value raises :class:`ConfigError`."""
        known = cls.model_fields
        clean: dict[str, Any] = {}
        for k, v in values.items():
            if k not in known:
                if ignore_unknown:
                    continue
                raise ConfigError(k, v, "unknown load-balancer key")
            clean[k] = v
        try:
            return cls(**clean)
        except ValidationError as e:
            raise _config_error(e, clean) from None

    @classmethod
    def from_broker_conf(cls, text: str, ignore_unknown: bool = True) -> LoadBalancerConfig:
        """Parse ``broker.conf`` text. Unknown keys are ignored by default, since a real broker.conf
        holds hundreds of keys that are not the load balancer's."""
        return cls.from_dict(parse_properties(text), ignore_unknown=ignore_unknown)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str], base: Mapping[str, Any] | None = None
    ) -> LoadBalancerConfig:
        """Overrides from ``PULSAR_PREFIX_<key>`` (Pulsar's container convention) or ``LOADMGR_<key>``."""
        values: dict[str, Any] = dict(base or {})
        values.update(env_overrides(environ))
        return cls.from_dict(values)

    def with_updates(self, updates: Mapping[str, Any], dynamic_only: bool = False) -> LoadBalancerConfig:
        """A copy with ``updates`` applied; with ``dynamic_only`` a static key is refused."""
        if dynamic_only:
            dyn = self.dynamic_keys()
            for k, v in updates.items():
                if k in type(self).model_fields and k not in dyn:
                    raise ConfigError(k, v, "not a dynamic key; change it in the config file and restart")
        merged = self.model_dump()
        merged.update(updates)
        return type(self).from_dict(merged)

    # ---- derived values -------------------------------------------------------------------
    def weights(self) -> ResourceWeights:
        """Effective weights; the misspelled bandwidth keys count only when the new ones are 1.0."""

        def bw(new: float, old: float) -> float:
            if new != 1.0:
                return new
            return old if old != 1.0 else 1.0

        return ResourceWeights(
            cpu=self.loadBalancerCPUResourceWeight,
            memory=self.loadBalancerMemoryResourceWeight,
            direct_memory=self.loadBalancerDirectMemoryResourceWeight,
            bandwidth_in=bw(
                self.loadBalancerBandwidthInResourceWeight, self.loadBalancerBandwithInResourceWeight
            ),
            bandwidth_out=bw(
                self.loadBalancerBandwidthOutResourceWeight, self.loadBalancerBandwithOutResourceWeight
            ),
        )

    @property
    def overload_threshold(self) -> float:
        return self.loadBalancerBrokerOverloadedThresholdPercentage / 100.0

    @property
    def min_unload_throughput_bytes(self) -> float:
        return self.loadBalancerBundleUnloadMinThroughputThreshold * MIB

    @property
    def shedding_interval_ms(self) -> int:
        return int(self.loadBalancerSheddingIntervalMinutes * 60_000)

    @property
    def grace_period_ms(self) -> int:
        return int(self.loadBalancerSheddingGracePeriodMinutes * 60_000)


ENV_PREFIXES = ("PULSAR_PREFIX_", "LOADMGR_")


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    keys = set(LoadBalancerConfig.model_fields)
    out: dict[str, str] = {}
    for name, value in environ.items():
        for prefix in ENV_PREFIXES:
            if name.startswith(prefix) and name[len(prefix) :] in keys:
                out[name[len(prefix) :]] = value
    return out


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """A Java ``.properties`` text (Pulsar's ``broker.conf``) as Java reads it: ``key=value``,
    ``key: value`` and ``key value``, ``\\`` line continuations, escapes (``\\t``, ``\\uXXXX``), ``#`` and
    ``!`` comments; a repeated key keeps its last value (the ``javaproperties`` library). Values are
    trimmed, as Pulsar's configuration loader trims them. A malformed ``\\u`` escape is a ConfigError
    naming the key, the escape and where it is (``source``, line), as Java refuses the file."""
    import javaproperties

    out: dict[str, str] = {}
    line = 1  # where the next element starts
    elements = javaproperties.parse(text)
    while True:
        try:
            element = next(elements)
        except StopIteration:
            return out
        except ValueError as e:  # javaproperties' InvalidUEscapeError
            rest = text.splitlines()[line - 1 :] or [""]
            at = next((i for i, raw in enumerate(rest) if raw.strip() and raw.lstrip()[0] not in "#!"), 0)
            key = re.split(r"(?<!\\)[=:\s]", rest[at].strip(), maxsplit=1)[0]
            escape = getattr(e, "escape", str(e))
            raise ConfigError(key, escape, f"invalid \\u escape in {source}, line {line + at}") from None
        line += element.source.count("\n")
        if isinstance(element, javaproperties.KeyValue):
            out[str(element.key)] = str(element.value).strip()


def _config_error(e: ValidationError, values: Mapping[str, Any]) -> ConfigError:
    err = e.errors()[0]
    key = str(err["loc"][0]) if err["loc"] else "?"
    return ConfigError(key, values.get(key, err.get("input")), err["msg"])


def describe(config: LoadBalancerConfig, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Rows of key, value, default, dynamic and description: what ``config show`` prints."""
    dyn = config.dynamic_keys()
    rows = []
    for name, f in type(config).model_fields.items():
        if keys is not None and name not in keys:
            continue
        rows.append(
            {
                "key": name,
                "value": getattr(config, name),
                "default": f.default,
                "dynamic": name in dyn,
                "description": f.description or "",
            }
        )
    return rows
