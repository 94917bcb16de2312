"""LoadBalancerConfig: Pulsar's keys and defaults, three sources, clear errors."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig, describe
from balancer.errors import ConfigError


def test_defaults_are_pulsars() -> None:
    c = LoadBalancerConfig()
    assert c.loadBalancerBrokerOverloadedThresholdPercentage == 85
    assert c.loadBalancerSheddingGracePeriodMinutes == 30
    assert c.loadBalancerHistoryResourcePercentage == 0.9
    assert c.minUnloadMessageThroughput == 1048576
    assert c.loadBalancerNamespaceMaximumBundles == 128
    assert c.loadBalancerLoadSheddingStrategy.endswith(".ThresholdShedder")
    assert c.grace_period_ms == 30 * 60_000 and c.overload_threshold == 0.85


def test_broker_conf_parses_known_keys_and_ignores_the_rest() -> None:
    text = """
    # a real broker.conf holds many unrelated keys
    clusterName=standalone
    loadBalancerBrokerOverloadedThresholdPercentage=70
    loadBalancerSheddingExcludedNamespaces=public/a, public/b
    lowerBoundarySheddingEnabled=true
    loadBalancerOverrideBrokerNicSpeedGbps=
    """
    c = LoadBalancerConfig.from_broker_conf(text)
    assert c.loadBalancerBrokerOverloadedThresholdPercentage == 70
    assert c.loadBalancerSheddingExcludedNamespaces == ["public/a", "public/b"]
    assert c.lowerBoundarySheddingEnabled is True
    assert c.loadBalancerOverrideBrokerNicSpeedGbps is None


def test_env_overrides_both_prefixes() -> None:
    c = LoadBalancerConfig.from_env(
        {
            "PULSAR_PREFIX_maxUnloadPercentage": "0.5",
            "LOADMGR_loadBalancerSheddingIntervalMinutes": "0.05",
            "HOME": "/root",
        }
    )
    assert c.maxUnloadPercentage == 0.5 and c.shedding_interval_ms == 3000


@pytest.mark.parametrize(
    ("values", "key", "value"),
    [
        (
            {"loadBalancerBrokerOverloadedThresholdPercentage": "eighty"},
            "loadBalancerBrokerOverloadedThresholdPercentage",
            "eighty",
        ),
        (
            {"loadBalancerBrokerOverloadedThresholdPercentage": 85.5},
            "loadBalancerBrokerOverloadedThresholdPercentage",
            85.5,
        ),
        ({"lowerBoundarySheddingEnabled": "maybe"}, "lowerBoundarySheddingEnabled", "maybe"),
        ({"loadBalancerNoSuchKey": 1}, "loadBalancerNoSuchKey", 1),
        ({"loadBalancerBalancedShedderPlanner": "exact"}, "loadBalancerBalancedShedderPlanner", "exact"),
    ],
)
def test_errors_name_the_key_and_value(values: dict[str, object], key: str, value: object) -> None:
    with pytest.raises(ConfigError) as e:
        LoadBalancerConfig.from_dict(values)
    assert e.value.field == key and e.value.value == value
    assert key in str(e.value)


def test_dynamic_updates_only() -> None:
    c = LoadBalancerConfig()
    assert "loadBalancerBrokerOverloadedThresholdPercentage" in c.dynamic_keys()
    assert "topicBundleAssignmentStrategy" not in c.dynamic_keys()
    c2 = c.with_updates({"loadBalancerBrokerOverloadedThresholdPercentage": 70}, dynamic_only=True)
    assert (
        c2.loadBalancerBrokerOverloadedThresholdPercentage == 70
        and c.loadBalancerBrokerOverloadedThresholdPercentage == 85
    )
    with pytest.raises(ConfigError, match="topicBundleAssignmentStrategy"):
        c.with_updates({"topicBundleAssignmentStrategy": "x"}, dynamic_only=True)


def test_deprecated_bandwidth_weight_spelling_counts_when_new_key_is_default() -> None:
    c = LoadBalancerConfig(loadBalancerBandwithInResourceWeight=0.5)
    assert c.weights().bandwidth_in == 0.5
    c = LoadBalancerConfig(
        loadBalancerBandwidthInResourceWeight=2.0, loadBalancerBandwithInResourceWeight=0.5
    )
    assert c.weights().bandwidth_in == 2.0


def test_describe_lists_every_key_once() -> None:
    rows = describe(LoadBalancerConfig())
    assert len(rows) == len(LoadBalancerConfig.keys())
    assert all({"key", "value", "default", "dynamic", "description"} <= set(r) for r in rows)


def test_dynamic_flags_and_types_follow_pulsars_service_configuration() -> None:
    dyn = LoadBalancerConfig.dynamic_keys()
    for static in (
        "loadBalancerEnabled",
        "loadBalancerLoadPlacementStrategy",
        "lowerBoundarySheddingEnabled",
        "loadBalancerResourceQuotaUpdateIntervalMinutes",
        "exposeBundlesMetricsInPrometheus",
    ):
        assert static not in dyn, static
    assert {"loadBalancerHostUsageCheckIntervalMinutes", "namespaceBundleUnloadingTimeoutMs"} <= dyn
    c = LoadBalancerConfig()
    assert c.namespaceBundleUnloadingTimeoutMs == 60000 and c.exposeBundlesMetricsInPrometheus is False
    assert (
        isinstance(c.loadBalancerAvgShedderLowThreshold, int) and c.loadBalancerAvgShedderHighThreshold == 40
    )
    with pytest.raises(ConfigError) as e:
        LoadBalancerConfig.from_dict({"loadBalancerAvgShedderLowThreshold": 15.5})
    assert e.value.field == "loadBalancerAvgShedderLowThreshold"
    with pytest.raises(ConfigError):
        c.with_updates({"loadBalancerEnabled": False}, dynamic_only=True)


def test_broker_conf_is_read_as_java_reads_properties() -> None:
    """Issue 34: the hand-written parser missed continuations, escapes and the ``key value`` form."""
    from balancer.config import parse_properties

    text = (
        "loadBalancerSheddingExcludedNamespaces=public/a, \\\n"
        "    public/b\n"
        "loadBalancerBrokerOverloadedThresholdPercentage 70\n"
        "loadBalancerLoadSheddingStrategy: org.apache.pulsar.broker.loadbalance.impl.\\u0054hresholdShedder\n"
        "! a comment\n"
        "loadBalancerHistoryResourcePercentage = 0.8   \n"
    )
    props = parse_properties(text)
    assert props["loadBalancerSheddingExcludedNamespaces"] == "public/a, public/b"
    assert props["loadBalancerBrokerOverloadedThresholdPercentage"] == "70"
    assert props["loadBalancerHistoryResourcePercentage"] == "0.8"
    c = LoadBalancerConfig.from_broker_conf(text)
    assert c.loadBalancerSheddingExcludedNamespaces == ["public/a", "public/b"]
    assert c.loadBalancerBrokerOverloadedThresholdPercentage == 70
    assert c.loadBalancerLoadSheddingStrategy.endswith(".ThresholdShedder")


def test_the_planner_key_is_loadmgrs_own_dynamic_and_takes_two_values() -> None:
    c = LoadBalancerConfig()
    assert c.loadBalancerBalancedShedderPlanner == "leastMove"
    assert "loadBalancerBalancedShedderPlanner" in c.dynamic_keys()
    off = LoadBalancerConfig.from_broker_conf("loadBalancerBalancedShedderPlanner=fill\n")
    assert off.loadBalancerBalancedShedderPlanner == "fill"
    env = {"LOADMGR_loadBalancerBalancedShedderPlanner": "fill"}
    assert LoadBalancerConfig.from_env(env).loadBalancerBalancedShedderPlanner == "fill"
    with pytest.raises(ConfigError) as e:
        c.with_updates({"loadBalancerBalancedShedderPlanner": "LeastMove"}, dynamic_only=True)
    assert e.value.field == "loadBalancerBalancedShedderPlanner" and e.value.value == "LeastMove"
