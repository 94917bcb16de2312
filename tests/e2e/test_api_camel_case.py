"""Every field name the REST API returns is camelCase, as in Pulsar's admin API. Free-form maps are
exempt: an explanation's ``numbers``, the Pulsar records passed through verbatim (``loadReport``,
``bundleData``: Pulsar's own JSON), the configuration ``values`` (Pulsar's key names), and maps keyed
by broker, bundle or strategy."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from service.demo.cluster import Demo

pytestmark = pytest.mark.e2e

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
FREE_FORM = {"numbers", "loadReport", "bundleData", "values", "scores", "unloads", "destinations", "brokers"}


def _field_names(body: Any, path: str, out: list[str]) -> None:
    if isinstance(body, dict):
        for key, value in body.items():
            out.append(f"{path}.{key}")
            if key not in FREE_FORM:
                _field_names(value, f"{path}.{key}", out)
    elif isinstance(body, list):
        for item in body[:5]:
            _field_names(item, f"{path}[]", out)


def test_every_rest_field_name_is_camel_case(api: httpx.Client, demo: Demo) -> None:
    bundle = api.get("/bundles").json()[0]["bundle"]
    broker = demo.broker_ids[0]
    names: list[str] = []
    for path in ("/leader", "/brokers", f"/brokers/{broker}", "/bundles", f"/bundles/{bundle}", "/decisions"):
        r = api.get(path)
        assert r.status_code == 200, (path, r.text)
        _field_names(r.json(), path, names)
    _field_names(api.post("/shedding/dry-run").json(), "dry-run", names)
    assert any(n.endswith("decisions[].timeMs") for n in names), names
    assert any(n.endswith("usagePercent.bandwidthIn") for n in names), names
    bad = [n for n in names if not CAMEL.match(n.rsplit(".", 1)[1])]
    assert bad == [], bad
