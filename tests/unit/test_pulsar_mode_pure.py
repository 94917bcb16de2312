"""Pulsar mode's pure parts: the broker-settings verdict, the effective dynamic configuration, the
admin URL list, the launcher's argument checks and the pinned release."""

from __future__ import annotations

import argparse
import json

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError
from service.commands.pulsar_cluster import broker_settings, parse_cpus
from service.leader.dynamic_config import decode_values, effective, make_strategies
from service.pulsar.admin import PulsarAdmin, parse_urls
from service.pulsar.broker_settings import MODULAR, Verdict, evaluate, evaluate_kind
from service.pulsar.extensible import (
    METADATA_TABLE_VIEW,
    TOPIC_TABLE_VIEW,
    owners_of,
    parse_broker_load,
    parse_lb_gauges,
    parse_unit_state,
)
from service.pulsar.runtime import POM, pulsar_version
from service.zookeeper import paths as P
from service.zookeeper.metadata.records import Owner

OFF = {
    "loadBalancerSheddingEnabled": "false",
    "loadBalancerAutoBundleSplitEnabled": "false",
    "loadManagerClassName": MODULAR,
}


def test_brokers_with_their_own_shedding_and_split_off_are_no_conflict() -> None:
    assert evaluate({"b1:8080": OFF, "b2:8080": OFF}, {}) == []


def test_each_broker_and_key_left_on_is_named() -> None:
    found = evaluate({"b1:8080": {**OFF, "loadBalancerSheddingEnabled": "true"}, "b2:8080": {}}, {})
    # b2 answered without the keys: Pulsar's defaults (both on) apply.
    assert found == [
        "b1:8080: loadBalancerSheddingEnabled=true",
        "b2:8080: loadBalancerSheddingEnabled=true",
        "b2:8080: loadBalancerAutoBundleSplitEnabled=true",
    ]


def test_a_dynamic_override_wins_over_the_runtime_value_both_ways() -> None:
    assert evaluate({"b1:8080": OFF}, {"loadBalancerSheddingEnabled": "true"}) == [
        "b1:8080: loadBalancerSheddingEnabled=true (dynamic, /admin/configuration)"
    ]
    on = {**OFF, "loadBalancerAutoBundleSplitEnabled": "true"}
    assert evaluate({"b1:8080": on}, {"loadBalancerAutoBundleSplitEnabled": "false"}) == []


EXT = {
    **OFF,
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
}


def test_load_balancer_disabled_turns_both_off() -> None:
    assert evaluate({"b1:8080": {"loadBalancerEnabled": "false"}}, {}) == []


def test_extensible_brokers_are_driven_with_transfers_on_and_a_mix_of_kinds_is_refused() -> None:
    assert evaluate_kind({"b1:8080": EXT, "b2:8080": EXT}, {}) == ([], "extensible", TOPIC_TABLE_VIEW)
    # Their own shedding and auto-split are the same two keys.
    (line,) = evaluate({"b1:8080": {**EXT, "loadBalancerSheddingEnabled": "true"}}, {})
    assert line == "b1:8080: loadBalancerSheddingEnabled=true"
    # Transfers off: every move would cost every client a lookup again.
    (line,) = evaluate({"b1:8080": EXT}, {"loadBalancerMultiPhaseBundleUnload": "false"})
    assert line.startswith("b1:8080: loadBalancerMultiPhaseBundleUnload=false (dynamic")
    conflicts, kind, _ = evaluate_kind({"b1:8080": EXT, "b2:8080": OFF}, {})
    assert kind is None and conflicts and "different load managers" in conflicts[-1]
    (line,) = evaluate({"b1:8080": {**OFF, "loadManagerClassName": "x.SimpleLoadManagerImpl"}}, {})
    assert "SimpleLoadManagerImpl" in line
    meta = {**EXT, "loadManagerServiceUnitStateTableViewClassName": METADATA_TABLE_VIEW}
    assert evaluate_kind({"b1:8080": meta}, {})[2] == METADATA_TABLE_VIEW
    assert "disagree" in evaluate_kind({"b1:8080": meta, "b2:8080": EXT}, {})[0][-1]


def test_extensible_channel_entries_and_load_data_parse_and_bad_ones_are_dropped() -> None:
    owned = parse_unit_state(
        b'{"state":"Owned","dstBroker":"b2:8080","sourceBroker":"b1:8080","versionId":5}'
    )
    assert owned is not None and owned.owner() == "b2:8080" and owned.version == 5
    moving = parse_unit_state(b'{"state":"Releasing","dstBroker":"b2:8080","sourceBroker":"b1:8080"}')
    assert moving is not None and moving.owner() is None
    splitting = parse_unit_state(b'{"state":"Splitting","sourceBroker":"b1:8080"}')
    assert splitting is not None and splitting.owner() == "b1:8080"
    for bad in (b"", b"[]", b"{", b'{"state":3}'):
        assert parse_unit_state(bad) is None
    assert owners_of({"ns/x": owned, "ns/y": moving}) == {"ns/x": Owner("b2:8080", 0, 5)}
    doc = {k: {"usage": 1.0, "limit": 2.0} for k in ("cpu", "memory", "directMemory", "bandwidthIn")}
    assert parse_broker_load(json.dumps(doc).encode()) is None  # bandwidthOut missing
    doc["bandwidthOut"] = {"usage": 3.0, "limit": 4.0}
    usage = parse_broker_load(json.dumps(doc).encode())
    assert usage is not None and usage["bandwidth_out"].usage == 3.0 and usage["direct_memory"].limit == 2.0
    assert parse_broker_load(json.dumps({**doc, "cpu": {"usage": -1}}).encode()) is None


def test_a_verdict_is_clear_only_with_brokers_all_read_and_none_in_conflict() -> None:
    assert not Verdict().clear and "no Pulsar broker" in Verdict().reason()
    assert Verdict(brokers=("b1",)).clear
    assert not Verdict(brokers=("b1",), unreachable=("b1",)).clear
    assert "b1: settings unreadable" in Verdict(brokers=("b1",), unreachable=("b1",)).reason()


def test_pulsar_dynamic_keys_apply_under_loadmgr_own_and_broker_switches_stay_ours() -> None:
    base = LoadBalancerConfig()
    pulsar = {
        "loadBalancerBrokerThresholdShedderPercentage": "20",
        "loadBalancerSheddingEnabled": "false",  # the brokers' own switch: not loadmgr's in Pulsar mode
        "brokerServicePort": "6650",  # not a load-balancer key
    }
    got = effective(base, pulsar, {}, pulsar_mode=True)
    assert got.loadBalancerBrokerThresholdShedderPercentage == 20
    assert got.loadBalancerSheddingEnabled is True
    # ZooKeeper-native mode: /admin/configuration is this cluster's own, every dynamic key counts.
    assert effective(base, pulsar, {}, pulsar_mode=False).loadBalancerSheddingEnabled is False
    # loadmgr's own persisted keys go on top of Pulsar's.
    ours = {"loadBalancerBrokerThresholdShedderPercentage": "30"}
    assert effective(base, pulsar, ours, True).loadBalancerBrokerThresholdShedderPercentage == 30


def test_a_bad_persisted_value_is_skipped_and_reported_the_others_apply() -> None:
    seen: list[tuple[str, str]] = []
    got = effective(
        LoadBalancerConfig(),
        {},
        {"loadBalancerSheddingIntervalMinutes": "-3", "loadBalancerSheddingGracePeriodMinutes": "4"},
        True,
        lambda source, key, _why: seen.append((source, key)),
    )
    assert seen == [(P.LOADMGR_CONFIG, "loadBalancerSheddingIntervalMinutes")]
    assert got.loadBalancerSheddingIntervalMinutes == LoadBalancerConfig().loadBalancerSheddingIntervalMinutes
    assert got.loadBalancerSheddingGracePeriodMinutes == 4


def test_config_nodes_full_of_garbage_decode_to_nothing() -> None:
    assert decode_values(b"\xff\xfe", P.LOADMGR_CONFIG) == {}
    assert decode_values(b"[1, 2]", P.PULSAR_DYNAMIC_CONFIG) == {}
    assert decode_values(b'{"values": 3}', P.LOADMGR_CONFIG) == {}
    assert decode_values(b" " * (2 << 20), P.LOADMGR_CONFIG) == {}
    # loadmgr's own values keep their JSON types; Pulsar's node of strings takes a number as its spelling
    assert decode_values(b'{"values": {"a": 1, "b": "x", "c": ["p", "q"]}}', P.LOADMGR_CONFIG) == {
        "a": 1,
        "b": "x",
        "c": ["p", "q"],
    }
    assert decode_values(b'{"a": 1, "b": "x"}', P.PULSAR_DYNAMIC_CONFIG) == {"a": "1", "b": "x"}
    # nested thousands of levels deep: skipped like junk, never a RecursionError
    deep = b'{"values": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert decode_values(deep, P.LOADMGR_CONFIG) == {}
    assert decode_values(b"[" * 5000 + b"]" * 5000, P.PULSAR_DYNAMIC_CONFIG) == {}


def test_admin_urls_take_pulsar_admins_multi_host_form() -> None:
    assert parse_urls("http://b1:8080,b2:8080") == ["http://b1:8080", "http://b2:8080"]
    assert parse_urls("https://b1:8443/, https://b2:8443") == ["https://b1:8443", "https://b2:8443"]
    for bad in ("", "b1:8080", "ftp://b1:21", "http://b1:8080/admin"):
        with pytest.raises(ConfigError) as e:
            parse_urls(bad)
        assert e.value.field == "pulsar_admin_url"
    assert PulsarAdmin.bundle_path("t/ns/0x00000000_0xffffffff", "unload") == (
        "/admin/v2/namespaces/t/ns/0x00000000_0xffffffff/unload"
    )


def test_the_launchers_arguments_are_checked_before_anything_starts() -> None:
    assert parse_cpus("1,1,0.5", 3) == [1.0, 1.0, 0.5]
    assert parse_cpus(None, 3) is None
    for bad, n in (("1,x", 2), ("1,1", 3), ("0,1", 2), ("", 1)):
        with pytest.raises(ConfigError):
            parse_cpus(bad, n)
    args = argparse.Namespace(load_manager="modular", own_load_manager=True, set=["a=1", "b = x "])
    got = broker_settings(args)
    assert got["loadBalancerSheddingEnabled"] == "true" and got["a"] == "1" and got["b"] == "x"
    with pytest.raises(ConfigError):
        broker_settings(argparse.Namespace(load_manager="modular", own_load_manager=False, set=["novalue"]))


def test_the_pinned_release_is_the_poms() -> None:
    assert pulsar_version() == "4.0.7"
    assert "<pulsar.version>4.0.7</pulsar.version>" in POM.read_text()


def test_heartbeat_and_sla_monitor_namespaces_stay_on_the_broker_they_probe() -> None:
    import random

    from balancer.bundles import heartbeat_broker
    from balancer.models import BrokerData, LoadData, LocalBrokerData
    from balancer.placement.context import PlacementContext
    from balancer.placement.pipeline import select_broker
    from balancer.placement.registry import create_placement

    assert heartbeat_broker("pulsar/c1/10.0.0.1:8080") == "10.0.0.1:8080"
    assert heartbeat_broker("pulsar/10.0.0.1:8080") == "10.0.0.1:8080"
    assert heartbeat_broker("sla-monitor/c1/10.0.0.2:8080") == "10.0.0.2:8080"
    assert heartbeat_broker("public/default") is None and heartbeat_broker("pulsar/system") is None
    load = LoadData()
    for b in ("a:8080", "b:8080"):
        load.broker_data[b] = BrokerData(local_data=LocalBrokerData())
    config = LoadBalancerConfig()
    strategy = create_placement(config.loadBalancerLoadPlacementStrategy)
    for bundle, want in (
        ("pulsar/c1/b:8080/0x00000000_0xffffffff", "b:8080"),
        ("sla-monitor/c1/a:8080/0x00000000_0xffffffff", "a:8080"),
        ("pulsar/c1/gone:8080/0x00000000_0xffffffff", None),
    ):
        got = select_broker(bundle, load, config, strategy, PlacementContext(), random.Random(0))
        assert got.broker == want, (bundle, got.explanation)


def test_the_least_move_planner_is_refused_by_name_where_scipy_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without scipy the planner would fall back to the fill on every call, silently: refused instead,
    # at start-up and on PUT /config, and a persisted value is skipped (and logged) by the watch.
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "scipy" else real(name, *a)
    )
    on = LoadBalancerConfig(
        loadBalancerLoadSheddingStrategy="BalancedShedder", loadBalancerBalancedShedderPlanner="leastMove"
    )
    with pytest.raises(ConfigError) as e:
        make_strategies(on)
    assert e.value.field == "loadBalancerBalancedShedderPlanner" and "scipy" in str(e.value)
    # The key is BalancedShedder's: Pulsar's strategies start without scipy whatever it says.
    assert make_strategies(LoadBalancerConfig())[0].name != "BalancedShedder"
    bad: list[tuple[str, str]] = []
    got = effective(
        on.with_updates({"loadBalancerBalancedShedderPlanner": "fill"}),
        {},
        {"loadBalancerBalancedShedderPlanner": "leastMove", "loadBalancerSheddingIntervalMinutes": "2"},
        False,
        lambda source, key, why: bad.append((key, why)),
    )
    assert got.loadBalancerBalancedShedderPlanner == "fill" and got.loadBalancerSheddingIntervalMinutes == 2
    assert [k for k, _ in bad] == ["loadBalancerBalancedShedderPlanner"]
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert make_strategies(on)[0].name == "BalancedShedder"


def test_extensible_lb_gauges_stand_in_until_the_first_load_report() -> None:
    text = "\n".join(
        [
            "# TYPE pulsar_lb_cpu_usage gauge",
            'pulsar_lb_cpu_usage{cluster="c",broker="b"} 12.5',
            'pulsar_lb_memory_usage{cluster="c",broker="b"} 40.0',
            'pulsar_lb_directMemory_usage{cluster="c",broker="b"} 6.25',
            'pulsar_lb_bandwidth_in_usage{cluster="c",broker="b"} 0.5',
        ]
    )
    assert parse_lb_gauges(text) is None  # bandwidth out missing
    full = parse_lb_gauges(text + '\npulsar_lb_bandwidth_out_usage{cluster="c",broker="b"} 1.0')
    assert full is not None and full["cpu"].usage == 12.5 and full["cpu"].limit == 100.0
    assert parse_lb_gauges(text + "\npulsar_lb_bandwidth_out_usage NaN") is None


def test_a_load_data_tombstone_keeps_the_brokers_last_report(caplog: pytest.LogCaptureFixture) -> None:
    """Extensible brokers remove their load data (an empty message) whenever one of their bundles is
    Releasing or Splitting: not an unusable report (it was logged as one after every move)."""
    from service.pulsar.admin import PulsarAdmin
    from service.pulsar.extensible import ExtensibleReads

    class Msg:
        def __init__(self, key: str, data: bytes) -> None:
            self.key, self.raw = key, data

        def partition_key(self) -> str:
            return self.key

        def data(self) -> bytes:
            return self.raw

    class Timeout(Exception):
        pass

    class Reader:
        def __init__(self, msgs: list[Msg]) -> None:
            self.msgs = msgs

        def read_next(self, _ms: int) -> Msg:
            if not self.msgs:
                raise Timeout
            return self.msgs.pop(0)

    class Pulsar:
        pass

    fake = Pulsar()
    fake.Timeout = Timeout  # type: ignore[attr-defined]
    doc = {
        k: {"usage": 10.0, "limit": 40.0}
        for k in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
    }
    reads = ExtensibleReads(PulsarAdmin.__new__(PulsarAdmin), lambda url: None)
    with caplog.at_level("INFO", logger="service.pulsar.extensible"):
        reads._drain_load(Reader([Msg("b1:8080", json.dumps(doc).encode()), Msg("b1:8080", b"")]), fake)
    assert reads._usage["b1:8080"]["cpu"].usage == 10.0 and reads._usage["b1:8080"]["cpu"].limit == 40.0
    assert "not usable" not in caplog.text
    with caplog.at_level("INFO", logger="service.pulsar.extensible"):
        reads._drain_load(Reader([Msg("b1:8080", b"{not json")]), fake)
    assert "not usable" in caplog.text and "not json" in caplog.text
