"""Pulsar's load data reads and writes with Pulsar's member names and values."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from balancer.models import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceQuota,
    ResourceUsage,
    ResourceWeights,
    SystemResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
)

REALISTIC = json.loads("""
{"webServiceUrl":"http://broker-1.example:8080","webServiceUrlTls":null,
 "pulsarServiceUrl":"pulsar://broker-1.example:6650","pulsarServiceUrlTls":null,
 "persistentTopicsEnabled":true,"nonPersistentTopicsEnabled":true,
 "cpu":{"usage":412.5,"limit":1600.0},"memory":{"usage":1843.2,"limit":4096.0},
 "directMemory":{"usage":512.0,"limit":4096.0},
 "bandwidthIn":{"usage":10240.5,"limit":10240000.0},"bandwidthOut":{"usage":30720.25,"limit":10240000.0},
 "msgThroughputIn":246784.0,"msgThroughputOut":493568.0,"msgRateIn":241.0,"msgRateOut":482.0,
 "lastUpdate":1732238400000,
 "lastStats":{"public/default/0x00000000_0x40000000":{"msgRateIn":120.5,"msgThroughputIn":123392.0,
   "msgRateOut":241.0,"msgThroughputOut":246784.0,"consumerCount":2,"producerCount":3,"topics":4,"cacheSize":0},
  "public/default/0x40000000_0x80000000":{"msgRateIn":120.5,"msgThroughputIn":123392.0,"msgRateOut":241.0,
   "msgThroughputOut":246784.0,"consumerCount":1,"producerCount":2,"topics":3,"cacheSize":0}},
 "numTopics":7,"numBundles":2,"numConsumers":3,"numProducers":5,
 "bundles":["public/default/0x00000000_0x40000000","public/default/0x40000000_0x80000000"],
 "lastBundleGains":["public/default/0x40000000_0x80000000"],"lastBundleLosses":[],
 "brokerVersionString":"4.0.3","loadReportType":"LocalBrokerData","protocols":{},"advertisedListeners":{},
 "loadManagerClassName":"org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
 "startTimestamp":1732238000000,"maxResourceUsage":0.45}
""")

# Jackson writes the getter LocalBrokerData.getMaxResourceUsage(); we write our value of it (this
# sample is from a broker whose max still counted heap memory, so only the member is compared).
DERIVED = {"maxResourceUsage"}


def test_realistic_local_broker_data_round_trips_with_same_members_and_values() -> None:
    data = LocalBrokerData.model_validate(REALISTIC)
    assert data.cpu.usage == 412.5 and data.num_topics == 7
    assert data.last_stats["public/default/0x00000000_0x40000000"].producer_count == 3
    out = data.to_json_dict()
    # Pulsar's ObjectMapperFactory mapper is Include.NON_NULL: null members are read, never written.
    expected = {k: v for k, v in REALISTIC.items() if k not in DERIVED and v is not None}
    assert set(out) == set(expected) | DERIVED
    for key, value in expected.items():
        assert out[key] == value, key
    assert out["maxResourceUsage"] == data.max_resource_usage()


def test_null_members_are_left_out_as_pulsars_mapper_does() -> None:
    out = LocalBrokerData().to_json_dict()
    for key in ("webServiceUrl", "pulsarServiceUrl", "brokerVersionString", "loadManagerClassName"):
        assert key not in out, key
    assert out["maxResourceUsage"] == 0.0 and out["cpu"] == {"usage": 0.0, "limit": 0.0}


def test_unknown_members_ignored_and_nulls_accepted() -> None:
    raw = dict(REALISTIC, someFutureMember={"x": 1}, cpu=None, lastStats=None, bundles=None, msgRateIn=None)
    data = LocalBrokerData.model_validate(raw)
    assert data.cpu.percent_usage() == 0.0
    assert data.last_stats == {} and data.bundles == set() and data.msg_rate_in == 0.0


def test_load_report_of_the_simple_load_manager_is_refused() -> None:
    try:
        LocalBrokerData.model_validate({"loadReportType": "LoadReport"})
    except ValueError as e:
        assert "loadReportType" in str(e)
    else:
        raise AssertionError("a LoadReport must not parse as LocalBrokerData")


def test_percent_usage_of_a_limit_below_float_range_counts_as_no_limit() -> None:
    # Java would divide by a float zero into Infinity/NaN; a garbage limit must not make a broker
    # look infinitely loaded (#15), so it counts as Pulsar's "limit <= 0": usage 0.
    assert ResourceUsage(usage=5, limit=1e-50).percent_usage() == 0.0
    assert ResourceUsage(usage=0, limit=1e-50).percent_usage() == 0.0


def test_percent_usage_is_float32_and_unclipped() -> None:
    assert ResourceUsage(usage=60, limit=100).percent_usage() == 60.000003814697266
    assert ResourceUsage(usage=140, limit=100).percent_usage() == 140.0
    assert ResourceUsage(usage=5, limit=0).percent_usage() == 0.0


def test_max_resource_usage_excludes_memory_and_weights_apply() -> None:
    d = LocalBrokerData(cpu=ResourceUsage(usage=50, limit=100), memory=ResourceUsage(usage=99, limit=100))
    assert abs(d.max_resource_usage() - 0.5) < 1e-6
    w = ResourceWeights(cpu=0.5, memory=1.0)
    assert abs(d.max_resource_usage_with_weight(w) - 0.99) < 1e-6
    assert abs(d.max_resource_usage_with_weight(w, include_memory=False) - 0.25) < 1e-6


def test_update_keeps_gains_and_losses_until_written() -> None:
    d = LocalBrokerData()
    s = NamespaceBundleStats(
        msg_rate_in=10, msg_rate_out=5, msg_throughput_in=100, topics=2, producer_count=1
    )
    d.update(SystemResourceUsage(cpu=ResourceUsage(usage=10, limit=100)), {"ns/a": s, "ns/b": s})
    assert d.bundles == {"ns/a", "ns/b"} and d.last_bundle_gains == {"ns/a", "ns/b"}
    d.update(SystemResourceUsage(), {"ns/b": s, "ns/c": s})
    assert d.last_bundle_gains == {"ns/a", "ns/b", "ns/c"}
    assert d.last_bundle_losses == {"ns/a"}
    assert d.msg_rate_in == 20 and d.num_topics == 4 and d.num_bundles == 2 and d.num_producers == 2
    d.mark_written(1234)
    assert d.last_update == 1234 and not d.last_bundle_gains and not d.last_bundle_losses


def test_time_average_sample_rule_matches_pulsar_example() -> None:
    avg = TimeAverageMessageData.with_defaults(10)
    seen = []
    for i in range(1, 13):
        avg.update_values(100 * i, 0, 0, 0)
        seen.append(avg.msg_rate_in)
    # First sample replaces the default; exact mean up to 10 samples; then an EMA of weight 1/10.
    assert seen[0] == 100 and seen[1] == 150 and seen[9] == 550
    assert abs(seen[10] - 605) < 1e-9 and abs(seen[11] - 664.5) < 1e-9
    assert avg.num_samples == 10


def test_bundle_defaults_and_quota_seed() -> None:
    d = BundleData.default()
    assert d.short_term_data.max_samples == 10 and d.long_term_data.max_samples == 1000
    assert d.short_term_data.msg_rate_in == 50 and d.long_term_data.msg_throughput_out == 50_000
    assert d.short_term_data.num_samples == 0
    q = BundleData.from_quota(ResourceQuota(msg_rate_in=7, msg_rate_out=8, bandwidth_in=9, bandwidth_out=10))
    assert q.long_term_data.num_samples == 1000 and q.short_term_data.num_samples == 10
    assert q.long_term_data.msg_throughput_in == 9
    q.update(NamespaceBundleStats(msg_rate_in=17, topics=3))
    assert q.short_term_data.msg_rate_in == (9 * 7 + 17) / 10 and q.topics == 3


def test_broker_time_average_sums_and_defaults() -> None:
    data = {"ns/a": BundleData.default()}
    data["ns/a"].update(NamespaceBundleStats(msg_rate_in=10, msg_throughput_in=1000))
    t = TimeAverageBrokerData()
    t.reset(["ns/a", "ns/missing"], data)
    assert t.short_term_msg_rate_in == 10 + 50 and t.long_term_msg_throughput_in == 1000 + 50_000


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)
names = st.text(alphabet="abcdefghij/_0x", min_size=1, max_size=12)
usage = st.builds(ResourceUsage, usage=finite, limit=finite)
stats = st.builds(
    NamespaceBundleStats,
    msg_rate_in=finite,
    msg_throughput_in=finite,
    msg_rate_out=finite,
    msg_throughput_out=finite,
    consumer_count=st.integers(0, 10**6),
    producer_count=st.integers(0, 10**6),
    topics=st.integers(0, 10**6),
    cache_size=st.integers(0, 10**9),
)
reports = st.builds(
    LocalBrokerData,
    web_service_url=st.none() | st.text(max_size=20),
    cpu=usage,
    memory=usage,
    direct_memory=usage,
    bandwidth_in=usage,
    bandwidth_out=usage,
    msg_rate_in=finite,
    msg_rate_out=finite,
    msg_throughput_in=finite,
    msg_throughput_out=finite,
    last_update=st.integers(0, 2**62),
    last_stats=st.dictionaries(names, stats, max_size=4),
    bundles=st.sets(names, max_size=4),
    last_bundle_gains=st.sets(names, max_size=3),
    broker_version_string=st.none() | st.text(max_size=10),
    protocols=st.dictionaries(names, st.text(max_size=5), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(reports)
def test_local_broker_data_json_round_trip(report: LocalBrokerData) -> None:
    text = json.dumps(report.to_json_dict())
    back = LocalBrokerData.model_validate(json.loads(text))
    assert back == report


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        BundleData,
        short_term_data=st.builds(
            TimeAverageMessageData,
            max_samples=st.just(10),
            num_samples=st.integers(0, 10),
            msg_rate_in=finite,
            msg_rate_out=finite,
            msg_throughput_in=finite,
            msg_throughput_out=finite,
        ),
        topics=st.integers(0, 10**6),
    )
)
def test_bundle_data_json_round_trip(data: BundleData) -> None:
    back = BundleData.model_validate(json.loads(json.dumps(data.to_json_dict())))
    assert back == data
    assert set(data.to_json_dict()) == {"shortTermData", "longTermData", "topics"}
