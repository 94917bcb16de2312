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
