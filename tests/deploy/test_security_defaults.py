"""The deploy artefacts default to a secured loadmgr: a secret-mounted admin token everywhere,
ZooKeeper credentials as files, TLS wired through when asked for."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_artifacts import ROOT, _render


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    dep = next(d for d in docs if d["kind"] == "Deployment")
    pod: dict[str, Any] = dep["spec"]["template"]["spec"]
    return pod


def test_chart_defaults_generate_and_mount_a_token() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    docs = _render({})
    secret = next(d for d in docs if d["kind"] == "Secret")
    kv.validate(secret, "1.30", strict=True)
    assert (
        len(secret["data"]["token"]) >= 48
        and secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    )
    pod = _pod(docs)
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["LOADMGR_API_TOKEN_FILE"] == "/etc/loadmgr/api-token/token"
    assert not any("TOKEN" in e["name"] and "valueFrom" in e for e in c["env"])  # no secret in env values
    volume = next(v for v in pod["volumes"] if v["name"] == "api-token")
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert volume["secret"]["defaultMode"] == 0o440  # the non-root user reads it through fsGroup


def test_chart_tls_and_zookeeper_auth_are_wired() -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")
    values = {
        "tls": {"secretName": "lm-tls"},
        "api": {"tokenSecretName": "lm-token", "readTokenSecretName": "lm-read"},
        "zookeeper": {
            "hosts": "zk:2281",
            "acl": "auth::cdrwa,world:anyone:r",
            "auth": {"secretName": "zk-digest", "scheme": "sasl"},
            "tls": {"enabled": True, "secretName": "zk-ca", "clientCert": True},
        },
    }
    docs = _render(values)
    for doc in docs:
        kv.validate(doc, "1.30", strict=True)
    assert "Secret" not in {d["kind"] for d in docs}  # the operator's token Secret is used
    c = _pod(docs)["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["LOADMGR_ADVERTISED_URL"].startswith("https://")
    assert env["LOADMGR_HTTP_TLS_CERTFILE"] == "/etc/loadmgr/tls/tls.crt"
    assert env["LOADMGR_ZK_AUTH_FILE"] == "/etc/loadmgr/zk-auth/digest"
    assert env["LOADMGR_ZK_TLS_CERTFILE"] == "/etc/loadmgr/zk-tls/tls.crt"
    assert all(
        c[p]["httpGet"]["scheme"] == "HTTPS" for p in ("livenessProbe", "readinessProbe", "startupProbe")
    )
    cm = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert cm["LOADMGR_ZK_TLS"] == "true" and cm["LOADMGR_ZK_ACL"] == "auth::cdrwa,world:anyone:r"
    assert cm["LOADMGR_ZK_AUTH_SCHEME"] == "sasl"


def test_chart_schema_rejects_a_malformed_acl() -> None:
    pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
    with pytest.raises(Exception, match=r"(?i)acl|pattern|schema"):
        _render({"zookeeper": {"hosts": "zk:2181", "acl": "world:anyone"}})


def test_compose_and_dockerfile_keep_secrets_out_of_the_environment() -> None:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    lm = doc["services"]["loadmgr"]
    assert lm["environment"]["LOADMGR_API_TOKEN_FILE"] == "/run/secrets/loadmgr_api_token"
    assert "LOADMGR_API_TOKEN" not in lm["environment"]
    assert set(doc["secrets"]) == {"loadmgr_api_token", "loadmgr_zk_digest"}
    for name, svc in doc["services"].items():
        if "agent" in (svc.get("command") or []) or name == "loadmgr":
            assert "loadmgr_zk_digest" in svc["secrets"], name
            assert svc["environment"]["LOADMGR_ZK_AUTH_FILE"] == "/run/secrets/loadmgr_zk_digest", name
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "LOADMGR_API_TOKEN=" not in dockerfile and "--token" not in dockerfile
    assert (Path(ROOT) / "deploy" / "secrets" / ".gitignore").read_text().splitlines()[1] == "*"


def test_compose_tls_overlay_is_valid_and_serves_https() -> None:
    from tests.deploy.test_artifacts import _tool

    r = subprocess.run(
        [
            _tool("docker-compose"),
            "-f",
            "docker-compose.yml",
            "-f",
            "deploy/compose-tls.yml",
            "config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    merged = json.loads(r.stdout)
    env = merged["services"]["loadmgr"]["environment"]
    assert env["LOADMGR_HTTP_TLS_CERTFILE"] == "/run/secrets/loadmgr_tls_cert"
    assert env["LOADMGR_ADVERTISED_URL"].startswith("https://")
    assert "https://" in " ".join(merged["services"]["loadmgr"]["healthcheck"]["test"])
    assert merged["secrets"]["loadmgr_tls_cert"]["file"] == str(ROOT / "deploy" / "secrets" / "tls.crt")
