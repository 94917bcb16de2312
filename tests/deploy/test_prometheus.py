"""The dashboard and the alerts on a real Prometheus (Debian's ``prometheus`` package provides both
``prometheus`` and ``promtool``; ``.ci/run`` installs it before ``make test``).

* ``promtool check config`` accepts deploy/prometheus/prometheus.yml as shipped (rule file included);
* ``promtool test rules`` runs tests/deploy/alerts_test.yml: every alert, including "all instances
  down" and "stale report" (a report may legitimately age up to 15 minutes);
* a real Prometheus scrapes a running demo, and every dashboard panel's expression returns data,
  every alert expression is accepted by the server's own parser.

Locally without the tools this tier is skipped with the way to get them; under CI it fails instead.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.demo.cluster import Demo, DemoOptions
from tests.deploy.test_dashboards import ALERTS, ROOT, alert_exprs, dashboard_targets

INSTALL_HINT = (
    "install Prometheus to run this tier: `apt-get install prometheus` on Debian/Ubuntu "
    "(provides prometheus and promtool), or unpack a release from https://prometheus.io/download/ "
    "onto PATH"
)
# How Grafana's variables are replaced: a window holding several 1 s scrapes, every cluster.
GRAFANA_VARS = {"$__rate_interval": "20s", "$__interval": "5s", "$__range": "1h", "$cluster": ".*"}
PANEL_DATA_TIMEOUT_S = 150.0


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{name} is missing under CI; .ci/run must install it. {INSTALL_HINT}")
        pytest.skip(f"{name} not found: {INSTALL_HINT}")
    return found


def test_promtool_accepts_the_shipped_prometheus_config() -> None:
    r = subprocess.run(
        [_tool("promtool"), "check", "config", str(ROOT / "deploy/prometheus/prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 rule files found" in r.stdout + r.stderr


def test_alert_rules_pass_their_unit_tests() -> None:
    r = subprocess.run(
        [_tool("promtool"), "test", "rules", str(ROOT / "tests/deploy/alerts_test.yml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    tested = (ROOT / "tests/deploy/alerts_test.yml").read_text()
    for name, _ in alert_exprs():  # every alert has at least one case
        assert f"alertname: {name}" in tested, name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus_on_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Demo]]:
    prometheus = _tool("prometheus")
    if shutil.which("java") is None:
        pytest.skip("the demo needs Java 17+ for its embedded ZooKeeper")
    tmp = tmp_path_factory.mktemp("prometheus")
    demo = Demo(
        DemoOptions(brokers=3, bundles=9, port=0, shed_interval_s=2.0, publish_state=False), out=io.StringIO()
    )
    proc: subprocess.Popen[bytes] | None = None
    try:
        demo.start()
        target = demo.url.removeprefix("http://")
        (tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: [{ALERTS}]\n"
            "scrape_configs:\n"
            f"  - job_name: loadmgr\n    static_configs: [{{targets: ['{target}']}}]\n",
            encoding="utf-8",
        )
        port = _free_port()
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=(tmp / "prometheus.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()
            time.sleep(0.2)
        else:
            pytest.fail("Prometheus did not become ready:\n" + (tmp / "prometheus.log").read_text())
        yield url, demo
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        demo.stop()


def _query(url: str, expr: str) -> dict[str, Any]:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    r = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    body: dict[str, Any] = r.json()
    assert r.status_code == 200 and body["status"] == "success", (expr, body)
    return body


def test_every_dashboard_panel_has_data_on_the_demo(prometheus_on_demo: tuple[str, Demo]) -> None:
    url, demo = prometheus_on_demo
    targets = dashboard_targets()
    empty: list[str] = []
    deadline = time.monotonic() + PANEL_DATA_TIMEOUT_S
    while time.monotonic() < deadline:
        # The unload panels need the demo's first moves, the rate panels a few scrapes after them.
        empty = [f"{title}: {expr}" for title, expr in targets if not _query(url, expr)["data"]["result"]]
        if not empty:
            break
        time.sleep(2)
    assert not empty, "panels without data:\n" + "\n".join(empty) + "\n" + demo.out.getvalue()[-2000:]  # type: ignore[attr-defined]
    # Whole bundles: increase() extrapolates, the panels round.
    for title, expr in targets:
        if "increase(" in expr:
            for sample in _query(url, expr)["data"]["result"]:
                value = float(sample["value"][1])
                assert value == int(value), (title, value)
    # The alert rules loaded, and their expressions are accepted by this Prometheus's own parser.
    rules = httpx.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    loaded = {r["name"] for g in rules for r in g["rules"]}
    assert loaded == {name for name, _ in alert_exprs()}
    for _, expr in alert_exprs():
        _query(url, expr)
    # The demo leads and is connected: the leader alert's expression is empty, ZooKeeper's is 1.
    assert not _query(url, "absent(loadmgr_is_leader == 1)")["data"]["result"]
    connected = _query(url, "loadmgr_zookeeper_connected")["data"]["result"]
    assert connected and all(float(s["value"][1]) == 1 for s in connected)
