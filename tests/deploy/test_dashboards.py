"""Every PromQL expression in the Grafana dashboard and the alert rules parses and names only metrics
that the service really exports (scraped from a populated registry, not from a hand-kept list)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from balancer.models import LocalBrokerData, ResourceUsage
from service.api.metrics import PrometheusMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "loadmgr.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
# Grafana replaces these before the query reaches Prometheus.
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def exported() -> dict[str, set[str]]:
    """Sample name -> label names, from a registry that has seen every kind of event."""
    m = PrometheusMetrics(cluster="c")
    broker = LocalBrokerData(cpu=ResourceUsage(usage=50, limit=100), last_update=1)
    m.view_updated(SimpleNamespace(brokers={"b1": broker}), {"b1": {"ThresholdShedder": 0.5}})
    m.cycle_finished(0.1, 1)
    m.unloaded("Overloaded")
    m.split_done("TopicsOverThreshold")
    m.leader_changed(True)
    m.zk_error("ConnectionLoss")
    m.malformed_node("brokers")
    m.move_served("zookeeper", "shedding", 0.4)
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def selectors(node: Any) -> list[Any]:
    if isinstance(node, promql_parser.VectorSelector):
        return [node]
    found = []
    for attr in ("lhs", "rhs", "expr", "vector_selector", "param"):
        child = getattr(node, attr, None)
        if child is not None and not isinstance(child, str | int | float):
            found += selectors(child)
    for arg in getattr(node, "args", None) or []:
        found += selectors(arg)
    return found


def parse(expr: str) -> Any:
    text = expr
    for var, value in GRAFANA_VARS.items():
        text = text.replace(var, value)
    text = text.replace('"$cluster"', '".*"')
    return promql_parser.parse(text)


def dashboard_targets() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]


def alert_exprs() -> list[tuple[str, str]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [(r["alert"], r["expr"]) for g in doc["groups"] for r in g["rules"]]


@pytest.mark.parametrize(("title", "expr"), dashboard_targets() + alert_exprs())
def test_expression_parses_and_uses_exported_metrics(title: str, expr: str) -> None:
    names = exported()
    sels = selectors(parse(expr))
    assert sels, f"{title}: no metric selector found in {expr!r}"
    for sel in sels:
        assert sel.name in names, f"{title}: {sel.name} is not exported (have {sorted(names)})"


def test_walker_finds_every_selector_and_rejects_broken_promql() -> None:
    sels = selectors(
        parse("max(a{x='1'}) / clamp_min(min(rate(b_total[5m])), 1) - histogram_quantile(0.9, c)")
    )
    assert sorted(s.name for s in sels) == ["a", "b_total", "c"]
    with pytest.raises(Exception, match=r"(?i)paren|unclosed|unexpected"):
        promql_parser.parse("sum(rate(loadmgr_x_total[5m])")


def test_dashboard_hygiene_and_required_panels() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["id"] is None and dash["uid"] and dash["title"] and dash["tags"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert "loadmgr_is_leader" in variables["cluster"]["definition"]
    assert "cluster" in exported()["loadmgr_is_leader"]
    for panel in dash["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
    exprs = " ".join(e for _, e in dashboard_targets())
    for needed in (
        "pulsar_lb_cpu_usage",
        "loadmgr_is_leader",
        "loadmgr_bundles_unloaded_total",
        "loadmgr_shedding_cycle_duration_seconds_bucket",
        "loadmgr_broker_msg_rate_in_messages_per_second",
        "loadmgr_broker_throughput_in_bytes_per_second",
        "loadmgr_bundle_move_served_duration_seconds_bucket",
    ):
        assert needed in exprs, needed
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_grafana_provisioning_points_at_the_dashboard_and_prometheus() -> None:
    prov = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/loadmgr.yaml").read_text())
    ds = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert (
        prov["apiVersion"] == 1 and prov["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    )
    assert ds["datasources"][0]["type"] == "prometheus" and ds["datasources"][0]["uid"] == "prometheus"
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    job = scrape["scrape_configs"][0]
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"]
    # relative to prometheus.yml: found next to it in the repository and in the container alike
    assert scrape["rule_files"] == ["alerts.yml"]
