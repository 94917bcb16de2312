"""The exported metric names follow Prometheus conventions, and the sink methods move them."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from balancer.models import LocalBrokerData, NamespaceBundleStats, ResourceUsage
from service.api.metric_collectors import (
    PULSAR_BUNDLE_GAUGES,
    PULSAR_LB_COUNTERS,
    PULSAR_LB_GAUGES,
    pulsar_broker_labels,
)
from service.api.metrics import PrometheusMetrics

SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
# Pulsar's own names are kept verbatim for dashboard compatibility, camelCase included.
PULSAR_NAMES = set(PULSAR_LB_GAUGES) | set(PULSAR_LB_COUNTERS) | set(PULSAR_BUNDLE_GAUGES)
BAD_UNIT_SUFFIXES = (
    "_ms",
    "_millis",
    "_milliseconds",
    "_percent",
    "_pct",
    "_kb",
    "_mb",
    "_count",
    "_sum",
    "_bucket",
)


def _broker(cpu: float, rate_in: float = 100.0, last_update: int = 0) -> LocalBrokerData:
    return LocalBrokerData(
        cpu=ResourceUsage(usage=cpu, limit=100.0),
        memory=ResourceUsage(usage=512, limit=1024),
        bandwidth_in=ResourceUsage(usage=10, limit=100),
        msg_rate_in=rate_in,
        last_update=last_update,
    )


def _families(m: PrometheusMetrics) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(m.render().decode())}


def _populated() -> PrometheusMetrics:
    m = PrometheusMetrics(cluster="test")
    m.view_updated(
        SimpleNamespace(brokers={"b1": _broker(80), "b2": _broker(20)}), {"b1": {"ThresholdShedder": 0.8}}
    )
    m.cycle_finished(0.02, 1)
    m.unloaded("Overloaded")
    m.split_done("TopicsOverThreshold")
    m.leader_changed(True)
    m.zk_error("ConnectionLoss")
    m.malformed_node("brokers")
    return m


def test_every_name_is_snake_case_with_one_prefix_and_base_units() -> None:
    fams = _families(_populated())
    assert len(fams) > 15
    for name, fam in fams.items():
        if name in PULSAR_NAMES:
            assert name.startswith("pulsar_lb_")
            continue
        if name.startswith(("process_", "python_")):  # prometheus_client's standard collectors
            continue
        assert SNAKE.match(name), name
        assert name.startswith("loadmgr_"), name
        assert not name.endswith(BAD_UNIT_SUFFIXES), name
        if fam.type == "counter":  # type: ignore[attr-defined]
            # the parser strips _total from the family name; the samples must carry it
            assert all(s.name.endswith(("_total", "_created")) for s in fam.samples), name  # type: ignore[attr-defined]
        if fam.type == "histogram":  # type: ignore[attr-defined]
            assert name.endswith("_seconds"), name


def test_pulsar_compatible_gauges_have_pulsars_labels_and_percent_values() -> None:
    fams = _families(_populated())
    cpu = fams["pulsar_lb_cpu_usage"]
    samples = {s.labels["broker"]: s for s in cpu.samples}  # type: ignore[attr-defined]
    assert samples["b1"].labels == {"cluster": "test", "broker": "b1", "metric": "loadBalancing"}
    assert samples["b1"].value == 80.0
    ratio = {
        (s.labels["broker"], s.labels["resource"]): s.value
        for s in fams["loadmgr_broker_resource_usage_ratio"].samples  # type: ignore[attr-defined]
    }
    assert ratio[("b2", "cpu")] == 0.2
    assert ratio[("b1", "memory")] == 0.5


def test_sink_methods_change_counters_and_departed_brokers_vanish() -> None:
    m = _populated()
    reg = m.registry
    assert (
        reg.get_sample_value("loadmgr_bundles_unloaded_total", {"cluster": "test", "reason": "Overloaded"})
        == 1
    )
    assert (
        reg.get_sample_value(
            "loadmgr_bundles_split_total", {"cluster": "test", "reason": "TopicsOverThreshold"}
        )
        == 1
    )
    assert reg.get_sample_value("loadmgr_is_leader", {"cluster": "test"}) == 1
    test = {"cluster": "test"}
    assert reg.get_sample_value("loadmgr_leader_transitions_total", test) == 1
    assert reg.get_sample_value("loadmgr_shedding_cycle_duration_seconds_count", test) == 1
    assert reg.get_sample_value("loadmgr_zookeeper_errors_total", {**test, "kind": "ConnectionLoss"}) == 1
    assert reg.get_sample_value("loadmgr_malformed_nodes_total", {**test, "kind": "brokers"}) == 1
    assert (
        reg.get_sample_value(
            "loadmgr_broker_score", {"cluster": "test", "broker": "b1", "strategy": "ThresholdShedder"}
        )
        == 0.8
    )
    m.leader_changed(True)  # no transition when nothing changed
    assert reg.get_sample_value("loadmgr_leader_transitions_total", test) == 1
    m.view_updated(SimpleNamespace(brokers={"b2": _broker(20)}), {})
    labels = {"cluster": "test", "broker": "b1", "metric": "loadBalancing"}
    assert reg.get_sample_value("pulsar_lb_cpu_usage", labels) is None
    assert reg.get_sample_value("loadmgr_brokers", {"cluster": "test"}) == 1


def test_scores_keyed_by_strategy_first_are_accepted() -> None:
    m = PrometheusMetrics(cluster="c")
    m.view_updated(SimpleNamespace(brokers={"b1": _broker(50)}), {"UniformLoadShedder": {"b1": 0.5}})
    assert (
        m.registry.get_sample_value(
            "loadmgr_broker_score", {"cluster": "c", "broker": "b1", "strategy": "UniformLoadShedder"}
        )
        == 0.5
    )


def test_every_loadmgr_series_carries_the_cluster_label() -> None:
    for name, fam in _families(_populated()).items():
        if name.startswith(("process_", "python_")):
            continue
        for sample in fam.samples:  # type: ignore[attr-defined]
            assert sample.labels.get("cluster") == "test", (name, sample)


def test_labelled_counters_exist_at_zero_before_their_first_event() -> None:
    """rate()/increase() of a series that does not exist yet is "No data", not 0."""
    m = PrometheusMetrics(cluster="c")
    reg = m.registry
    assert reg.get_sample_value("loadmgr_zookeeper_errors_total", {"cluster": "c", "kind": "lost"}) == 0
    split = {"cluster": "c", "reason": "too_many_topics"}
    assert reg.get_sample_value("loadmgr_bundles_split_total", split) == 0
    # by path kind (bounded labels, #15), every kind at 0 from the start
    assert reg.get_sample_value("loadmgr_malformed_nodes_total", {"cluster": "c", "kind": "brokers"}) == 0
    assert reg.get_sample_value("loadmgr_job_failures_total", {"cluster": "c", "job": "shedding"}) == 0


def test_process_collectors_and_the_service_watch() -> None:
    m = PrometheusMetrics(cluster="c")
    names = set(_families(m))
    assert "process_resident_memory_bytes" in names and "python_gc_collections" in names
    c = {"cluster": "c"}
    assert m.registry.get_sample_value("loadmgr_zookeeper_connected", c) == 0
    stats = SimpleNamespace(cycles_dropped=3, write_errors=2)
    m.watch(SimpleNamespace(store=SimpleNamespace(connected=True), history=SimpleNamespace(stats=stats)))
    assert m.registry.get_sample_value("loadmgr_zookeeper_connected", c) == 1
    assert m.registry.get_sample_value("loadmgr_history_cycles_dropped_total", c) == 3
    assert m.registry.get_sample_value("loadmgr_history_write_errors_total", c) == 2


def test_pulsars_unload_and_split_counters_keep_pulsars_names_labels_and_type() -> None:
    m = PrometheusMetrics(cluster="prod")
    text = m.render().decode()
    # Exposed from the start at 0, as Pulsar's leader does, so alerts on rate() have a series.
    assert 'pulsar_lb_unload_broker_total{cluster="prod",metric="bundleUnloading"} 0.0' in text
    m.shedding_unloads(2, 3)
    m.shedding_unloads(1, 1)
    m.auto_splits(2)
    m.auto_splits(0)
    fams = _families(m)
    reg = m.registry
    unloading = {"cluster": "prod", "metric": "bundleUnloading"}
    assert reg.get_sample_value("pulsar_lb_unload_broker_total", unloading) == 3
    assert reg.get_sample_value("pulsar_lb_unload_bundle_total", unloading) == 4
    split = {"cluster": "prod", "metric": "bundlesSplit"}
    assert reg.get_sample_value("pulsar_lb_bundles_split_total", split) == 2
    for name in PULSAR_LB_COUNTERS:
        assert fams[name].type == "gauge"  # type: ignore[attr-defined]  # PrometheusMetricsGenerator's type
        assert f"# TYPE {name} gauge" in m.render().decode()


def test_per_bundle_family_only_when_exposed_as_pulsar_does() -> None:
    data = _broker(50)
    data.last_stats = {"t/ns/0x00000000_0xffffffff": NamespaceBundleStats(msg_rate_in=12.5, topics=3)}
    view = SimpleNamespace(brokers={"b1:8080": data})
    off = PrometheusMetrics(cluster="c")
    off.view_updated(view, {})
    assert "pulsar_bundle_msg_rate_in" not in off.render().decode()
    on = PrometheusMetrics(cluster="c", expose_bundles=True)
    on.view_updated(view, {})
    labels = {"cluster": "c", "broker": "b1", "bundle": "t/ns/0x00000000_0xffffffff", "metric": "bundle"}
    assert on.registry.get_sample_value("pulsar_bundle_msg_rate_in", labels) == 12.5
    assert on.registry.get_sample_value("pulsar_bundle_topics_count", labels) == 3
    assert set(PULSAR_BUNDLE_GAUGES) <= set(_families(on))


def test_pulsar_broker_label_is_the_advertised_host_unless_hosts_collide() -> None:
    """Pulsar labels its pulsar_lb_* series with getAdvertisedAddress() (host, no port); the leader
    exports every broker, so brokers sharing a host keep their ids and no two series merge."""
    assert pulsar_broker_labels(["h1:8080", "h2:8080", "h2:8081", "h3"]) == {
        "h1:8080": "h1",
        "h2:8080": "h2:8080",
        "h2:8081": "h2:8081",
        "h3": "h3",
    }
    # A host equal to another broker's whole id, and an IPv6 host: still one label per broker.
    # ("a:b" shares host "a" with "a:9090", so keeps its id, which is "a:b:8080"'s host.)
    ids = ["a:b:8080", "a:b", "a:9090", "[::1]:8080", "10.0.0.1:8080", "10.0.0.1"]
    labels = pulsar_broker_labels(ids)
    assert len(set(labels.values())) == len(ids)
    assert labels["[::1]:8080"] == "[::1]" and labels["a:b:8080"] == "a:b:8080" and labels["a:b"] == "a:b"

    m = PrometheusMetrics(cluster="c")
    m.view_updated(
        SimpleNamespace(brokers={"h1:8080": _broker(10), "h2:8080": _broker(20), "h2:8081": _broker(30)}), {}
    )
    cpu = {s.labels["broker"]: s.value for s in _families(m)["pulsar_lb_cpu_usage"].samples}  # type: ignore[attr-defined]
    assert cpu == pytest.approx({"h1": 10.0, "h2:8080": 20.0, "h2:8081": 30.0})
    own = {"cluster": "c", "broker": "h1:8080"}  # loadmgr_* series keep the broker id
    assert m.registry.get_sample_value("loadmgr_broker_max_resource_usage_ratio", own) is not None


def test_the_planners_time_per_cycle_is_a_histogram_and_the_service_gives_balanced_shedder_a_clock() -> None:
    from balancer.config import LoadBalancerConfig
    from balancer.shedding.balanced import BalancedShedder
    from service.leader.dynamic_config import make_strategies

    m = PrometheusMetrics(cluster="test")
    m.planner_time(0.25)
    test = {"cluster": "test"}
    assert m.registry.get_sample_value("loadmgr_balanced_shedder_planner_duration_seconds_count", test) == 1
    assert m.registry.get_sample_value("loadmgr_balanced_shedder_planner_duration_seconds_sum", test) == 0.25
    shedder, _ = make_strategies(LoadBalancerConfig(loadBalancerLoadSheddingStrategy="BalancedShedder"))
    assert isinstance(shedder, BalancedShedder) and shedder.clock is not None
