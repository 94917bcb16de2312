"""Config values outside Pulsar's meaning are refused with the key, the value and the range; a refused
PUT /config changes nothing and the next valid PUT works (it used to install 1e308 and then fail)."""

from __future__ import annotations

import math

import pytest
from fastapi.testclient import TestClient

from balancer.config import RANGES, LoadBalancerConfig
from balancer.errors import ConfigError
from service.api.app import create_app
from service.leader.service import LoadManagerService
from service.settings import Settings

BAD = [
    ("loadBalancerSheddingIntervalMinutes", 1e308),
    ("loadBalancerSheddingIntervalMinutes", math.nan),
    ("loadBalancerSheddingIntervalMinutes", math.inf),
    ("loadBalancerSheddingIntervalMinutes", -1),
    ("loadBalancerSheddingIntervalMinutes", 0),
    ("loadBalancerBrokerThresholdShedderPercentage", -10),
    ("loadBalancerBrokerOverloadedThresholdPercentage", 101),
    ("loadBalancerHistoryResourcePercentage", 1.5),
    ("defaultNumberOfNamespaceBundles", -5),
    ("defaultNumberOfNamespaceBundles", 0),
    ("loadBalancerCPUResourceWeight", -1.0),
    ("loadBalancerReportUpdateMinIntervalMillis", 0),
    ("maxUnloadBundleNumPerShedding", -2),
    ("loadBalancerOverrideBrokerNicSpeedGbps", 0),
]


@pytest.mark.parametrize(("key", "value"), BAD)
def test_out_of_range_values_name_key_and_value(key: str, value: float) -> None:
    with pytest.raises(ConfigError) as e:
        LoadBalancerConfig.from_dict({key: value})
    assert e.value.field == key and key in str(e.value)


@pytest.mark.parametrize(("key", "value"), BAD)
def test_broker_conf_and_env_are_checked_alike(key: str, value: float) -> None:
    with pytest.raises(ConfigError, match=key):
        LoadBalancerConfig.from_broker_conf(f"{key}={value}\n")
    with pytest.raises(ConfigError, match=key):
        LoadBalancerConfig.from_env({f"LOADMGR_{key}": str(value)})


def test_defaults_and_documented_off_values_are_in_range() -> None:
    c = LoadBalancerConfig()
    for key in RANGES:
        assert key in LoadBalancerConfig.model_fields
        lo, hi, _ = RANGES[key]
        v = getattr(c, key)
        assert v is None or lo <= v <= hi, key
    # Pulsar's "<= 0 turns it off" and "-1 no cap" stay accepted.
    LoadBalancerConfig.from_dict(
        {
            "loadBalancerNamespaceBundleMaxSessions": 0,
            "maxUnloadBundleNumPerShedding": -1,
            "loadBalancerMsgRateDifferenceShedderThreshold": 0,
            "loadBalancerMaxNumberOfBundlesInBundleLoadReport": -1,
        }
    )


def test_a_refused_put_changes_nothing() -> None:
    svc = LoadManagerService(Settings(zk_hosts="127.0.0.1:1", api_token="t"), LoadBalancerConfig())
    client = TestClient(create_app(svc, Settings(api_token="t")), base_url="http://127.0.0.1")
    auth = {"Authorization": "Bearer t", "Content-Type": "application/json"}
    before = svc.config.model_dump()
    for body in (
        '{"loadBalancerSheddingIntervalMinutes": 1e308}',
        '{"loadBalancerSheddingIntervalMinutes": NaN}',
        '{"loadBalancerSheddingIntervalMinutes": Infinity}',
        '{"loadBalancerSheddingIntervalMinutes": -1}',
        '{"loadBalancerSheddingIntervalMinutes": 2, "defaultNumberOfNamespaceBundles": -5}',
        '{"loadBalancerLoadSheddingStrategy": "NoSuchShedder"}',
        "[1, 2]",
        "not json",
    ):
        r = client.put("/config", content=body, headers=auth)
        assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
        assert svc.config.model_dump() == before, body
    # A valid change is persisted by the leader only (ZooKeeper's /loadmgr/config, applied by every
    # instance from its watch): an instance that knows no leader refuses it and changes nothing.
    r = client.put("/config", json={"loadBalancerSheddingIntervalMinutes": 2}, headers=auth)
    assert r.status_code == 503 and r.json()["error"] == "NoLeader", r.text
    assert svc.config.model_dump() == before
