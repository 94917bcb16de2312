"""Offline checks of the deploy artefacts: Dockerfile (hadolint), docker-compose.yml (real Compose's
``config -q``), and the Helm chart (lint, render, Kubernetes schema validation, conventions)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "loadmgr"


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_dockerfile_passes_hadolint() -> None:
    r = subprocess.run(
        [_tool("hadolint"), str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "Dockerfile").read_text()
    assert "USER 10001" in text and "EXPOSE 8080" in text
    # The default (last) target is the Spark-free server; the Spark job has its own target with Java.
    stages = [line.split()[-1] for line in text.splitlines() if line.startswith("FROM ")]
    assert stages[-1] == "server" and "spark" in stages
    server = text[text.index("AS server") :]
    spark = text[text.index("AS spark") : text.index("AS server")]
    assert "ARG SERVER_EXTRAS=history\n" in text and '".[${SERVER_EXTRAS}]"' in text
    assert "'.[spark]'" in text and "openjdk" in spark and "openjdk" not in server
    for stage in (server, spark):
        for label in ("title", "description", "version", "source"):
            assert f"org.opencontainers.image.{label}=" in stage, label


def test_the_server_needs_neither_spark_nor_pyarrow_unless_history_is_on() -> None:
    """pyspark and pyarrow are extras: the core dependencies name neither."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    assert "pyspark" not in core and "pyarrow" not in core
    extras = project["optional-dependencies"]
    assert any(d.startswith("pyspark") for d in extras["spark"])
    assert any(d.startswith("pyarrow") for d in extras["history"])
    assert ".[dev,spark" in (ROOT / "Makefile").read_text()  # make test still runs the Spark tiers


def test_compose_file_is_valid_and_wires_the_stack() -> None:
    r = subprocess.run(
        [_tool("docker-compose"), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    assert {"zookeeper", "loadmgr", "prometheus", "grafana"} <= set(services)
    assert sum(1 for s in services.values() if "agent" in (s.get("command") or [])) == 3
    assert services["loadmgr"]["depends_on"]["zookeeper"]["condition"] == "service_healthy"
    # every long-running service says when it is healthy, so depends_on and `ps` can tell
    for name, svc in services.items():
        assert svc.get("healthcheck", {}).get("test"), name
    for name in ("agent-1", "agent-2", "agent-3"):
        broker = name.replace("agent", "broker") + ":8080"
        assert f"/loadbalance/brokers/{broker}" in " ".join(services[name]["healthcheck"]["test"]), name
    for name, svc in services.items():
        assert ":latest" not in svc.get("image", ""), name
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def _render(values: dict[str, Any]) -> list[dict[str, Any]]:
    h = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    with h.Chart.load(str(CHART)) as chart:
        out = chart.render(values, name="demo", namespace="default")
    docs = []
    for path, text in out.items():
        if path.endswith(".yaml"):
            docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def test_helm_chart_lints_strictly() -> None:
    h = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    report = h.lint(str(CHART), strict=True)
    assert not report["errors"], report
    assert not [m for m in report["messages"] if m["severity"] >= 2], report


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "replicaCount": 3,
            "api": {"tokenSecretName": "loadmgr-token"},
            "history": {"enabled": True},
            "loadBalancer": {"loadBalancerSheddingIntervalMinutes": "1"},
            "podDisruptionBudget": {"enabled": False},
        },
    ],
    ids=["defaults", "production"],
)
def test_helm_render_is_valid_kubernetes(values: dict[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    docs = _render(values)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "ConfigMap", "ServiceAccount"} <= kinds
    for doc in docs:
        kv.validate(doc, "1.30", strict=True)
        assert "namespace" not in doc["metadata"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "loadmgr"
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert "checksum/config" in dep["spec"]["template"]["metadata"]["annotations"]
    env = {e["name"] for e in c["env"]}
    # the admin token is always there, as a mounted file (the chart generates one if none is given)
    assert "LOADMGR_API_TOKEN_FILE" in env and "LOADMGR_API_TOKEN" not in env
    token_volume = next(v for v in pod["volumes"] if v["name"] == "api-token")
    secret_name = values.get("api", {}).get("tokenSecretName") or token_volume["secret"]["secretName"]
    assert token_volume["secret"]["secretName"] == secret_name
    assert ("Secret" in kinds) == (not values.get("api", {}).get("tokenSecretName"))
    assert ("PodDisruptionBudget" in kinds) == values.get("podDisruptionBudget", {}).get("enabled", True)
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    for key in values.get("loadBalancer", {}):
        assert f"LOADMGR_{key}" in cm["data"]


def test_helm_values_schema_rejects_bad_values() -> None:
    h = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    with pytest.raises(Exception, match=r"(?i)replicaCount|schema|minimum"):
        _render({"replicaCount": 0})
    assert h is not None


PRODUCTION_MONITORED = {
    "replicaCount": 3,
    "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}},
    "history": {"enabled": True, "persistence": {"enabled": True, "size": "20Gi"}},
    "podAntiAffinityPreset": "hard",
}


def test_helm_chart_with_service_monitor_and_pvc_lints_and_validates() -> None:
    """helm lint --strict and kubernetes-validate (strict, 1.30) with the ServiceMonitor and the PVC on."""
    h = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    report = h.lint(str(CHART), PRODUCTION_MONITORED, strict=True)
    assert not report["errors"], report
    assert not [m for m in report["messages"] if m["severity"] >= 2], report
    docs = _render(PRODUCTION_MONITORED)
    by_kind = {d["kind"]: d for d in docs}
    assert {"ServiceMonitor", "PersistentVolumeClaim", "Pod"} <= set(by_kind)
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: kubernetes-validate has no schema for it; its shape is checked below
        kv.validate(doc, "1.30", strict=True)
    svc, monitor = by_kind["Service"], by_kind["ServiceMonitor"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    port_names = {p["name"] for p in svc["spec"]["ports"]}
    assert [(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]] == [("http", "/metrics")]
    assert "http" in port_names and monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    data = next(v for v in pod["volumes"] if v["name"] == "data")
    assert data["persistentVolumeClaim"]["claimName"] == by_kind["PersistentVolumeClaim"]["metadata"]["name"]
    assert by_kind["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteMany"]
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    test_pod = by_kind["Pod"]
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"


def test_helm_defaults_keep_replicas_apart_and_history_on_an_empty_dir() -> None:
    docs = _render({})
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PersistentVolumeClaim"}
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert next(v for v in pod["volumes"] if v["name"] == "data") == {"name": "data", "emptyDir": {}}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCunt": 2}, "replicaCunt"),
        ({"metrics": {"serviceMonitor": {"enabled": True, "intervall": "1m"}}}, "intervall"),
        ({"history": {"persistence": {"enabled": True, "acessModes": ["ReadWriteMany"]}}}, "acessModes"),
        ({"podAntiAffinityPreset": "always"}, "podAntiAffinityPreset"),
        (
            {
                "replicaCount": 2,
                "history": {"persistence": {"enabled": True, "accessModes": ["ReadWriteOnce"]}},
            },
            "ReadWriteMany",
        ),
    ],
    ids=["unknown-top-key", "unknown-nested-key", "misspelt-persistence-key", "bad-enum", "rwo-shared"],
)
def test_helm_rejects_unknown_keys_and_unsafe_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=message):
        _render(values)


def test_helm_broker_drain_hook_renders_lints_and_validates() -> None:
    """The optional broker hook: a ConfigMap with the script and its settings, valid Kubernetes,
    lint-clean (strict), and a script a POSIX shell parses; off by default."""
    import subprocess

    h = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    values = {"brokerDrainHook": {"enabled": True, "deadlineSeconds": 120}, "tls": {"secretName": "lm-tls"}}
    report = h.lint(str(CHART), values, strict=True)
    assert not report["errors"], report
    assert not [m for m in report["messages"] if m["severity"] >= 2], report
    hooks = [d for d in _render(values) if d["metadata"]["name"].endswith("-broker-drain-hook")]
    assert len(hooks) == 1
    (cm,) = hooks
    kv.validate(cm, "1.30", strict=True)
    data = cm["data"]
    assert data["DRAIN_DEADLINE_SECONDS"] == "120" and data["LOADMGR_URL"].startswith("https://")
    script = data["broker-drain-hook.sh"]
    assert script == (CHART / "files" / "broker-drain-hook.sh").read_text()
    subprocess.run(["sh", "-n"], input=script, text=True, check=True)
    assert not [d for d in _render({}) if d["metadata"]["name"].endswith("-broker-drain-hook")]
    with pytest.raises(Exception, match=r"(?i)brokerDrainHook|schema|additional"):
        _render({"brokerDrainHook": {"enabled": True, "deadline": 5}})
