"""The exported metric names follow Prometheus conventions, and the sink methods move them."""

from __future__ import annotations

import re
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from balancer.models import LocalBrokerData, ResourceUsage
from service.api.metrics import PULSAR_LB_GAUGES, PrometheusMetrics

SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
# Pulsar's own names are kept verbatim for dashboard compatibility, camelCase included.
PULSAR_NAMES = set(PULSAR_LB_GAUGES)
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
    assert reg.get_sample_value("loadmgr_leader_transitions_total") == 1
    assert reg.get_sample_value("loadmgr_shedding_cycle_duration_seconds_count") == 1
    assert reg.get_sample_value("loadmgr_zookeeper_errors_total", {"kind": "ConnectionLoss"}) == 1
    assert reg.get_sample_value("loadmgr_malformed_nodes_total", {"kind": "brokers"}) == 1
    assert (
        reg.get_sample_value(
            "loadmgr_broker_score", {"cluster": "test", "broker": "b1", "strategy": "ThresholdShedder"}
        )
        == 0.8
    )
    m.leader_changed(True)  # no transition when nothing changed
    assert reg.get_sample_value("loadmgr_leader_transitions_total") == 1
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
