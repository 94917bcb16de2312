"""Fuzz tier: Hypothesis-generated node contents written into a real ZooKeeper under every path the
leader and the agents read, while they run.

Contents: arbitrary JSON (NaN/Infinity literals included), deep nesting, huge integers, empty and
non-UTF-8 bytes, and near-valid records (a real LocalBrokerData, BundleData, assignment, layout or
workload with one member replaced or removed), since those pass the JSON checks and reach the
arithmetic. After every batch each leader job runs once and the REST API is read. Asserted: no job
failure, no agent loop error, no 5xx, bounded metric series, and the valid brokers own every bundle.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from balancer.models import BundleData, LocalBrokerData, ResourceUsage
from service.api.app import create_app
from service.api.metrics import PrometheusMetrics
from service.broker.workload import Scenario, skewed_scenario
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Assignment, ZkStore
from tests.integration.conftest import Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "public/default"
# 20 batches keep this under a minute inside `make test`; LOADMGR_FUZZ_BATCHES=200 for a longer hunt.
BATCHES = int(os.environ.get("LOADMGR_FUZZ_BATCHES", "20"))
NODES_PER_BATCH = 15
VALID_BROKERS = {"b1:8080", "b2:8080"}

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_value = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def _templates(bundle: str) -> dict[str, Any]:
    report = LocalBrokerData(
        web_service_url="http://x:1", cpu=ResourceUsage(usage=10, limit=100), bundles={bundle}
    )
    report.update(report.usages(), {})
    return {
        "brokers": report.to_json_dict(),
        "bundle-data": BundleData.default().to_json_dict(),
        "assignments": ZkStore.assignment_doc(Assignment("b1:8080", None, "fuzz", 1)),
        "local-policies": {
            "bundles": {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2}
        },
        "ownership": {"brokerId": "b1:8080", "httpUrl": "http://b1:8080"},
        "workload": Scenario(namespaces={NS: 4}).model_dump(mode="json"),
        "time-average": {"shortTermMsgRateIn": 1.0, "longTermMsgRateIn": 1.0},
        "quota": {"msgRateIn": 1.0, "bandwidthIn": 1.0},
    }


@st.composite
def near_valid(draw: st.DrawFn, template: dict[str, Any]) -> bytes:
    """The template with one member (top level or one below) replaced by arbitrary JSON or removed."""
    doc = json.loads(json.dumps(template))
    target = doc
    key = draw(st.sampled_from(sorted(doc)))
    if isinstance(doc[key], dict) and doc[key] and draw(st.booleans()):
        target, key = doc[key], draw(st.sampled_from(sorted(doc[key])))
    if draw(st.integers(0, 4)) == 0:
        del target[key]
    else:
        target[key] = draw(json_value)
    return json.dumps(doc, allow_nan=True).encode()


def contents(template: dict[str, Any]) -> st.SearchStrategy[bytes]:
    return st.one_of(
        near_valid(template),
        near_valid(template),
        json_value.map(lambda v: json.dumps(v, allow_nan=True).encode()),
        st.binary(max_size=48),
        st.integers(33, 6000).map(lambda n: b"[" * n),
        st.integers(20, 500).map(lambda n: b'{"lastUpdate": ' + b"9" * n + b', "time": 1' + b"0" * n + b"}"),
        st.just(b""),
        st.just(b"{}"),
    )


KINDS = (
    "brokers",
    "bundle-data",
    "assignments",
    "local-policies",
    "ownership",
    "workload",
    "time-average",
    "quota",
)


@st.composite
def node(draw: st.DrawFn, live: list[str]) -> tuple[str, bytes, bool]:
    """(path, content, ephemeral) under one of the roots the leader or the agents read."""
    kind = draw(st.sampled_from(KINDS))
    i = draw(st.integers(0, 2**20))
    far = f"fuzz/ns/0x{i:08x}_0x{i + 1:08x}"
    content = draw(contents(_templates(live[0])[kind]))
    if kind == "brokers":
        return P.broker_path(f"fuzz{i}:1"), content, draw(st.booleans())
    if kind == "bundle-data":  # live bundles too: the leader must replace a poison node it owns
        return P.bundle_data_path(draw(st.sampled_from([*live, far]))), content, False
    if kind == "quota":
        return P.quota_path(draw(st.sampled_from([*live, far]))), content, False
    if kind == "assignments":  # live bundles too: the leader replaces a poison assignment
        return P.assignment_path(draw(st.sampled_from([*live, far]))), content, False
    if kind == "local-policies":
        return P.policies_path(f"fuzz/ns{i % 50}"), content, False
    if kind == "ownership":  # never a live bundle: a foreign ownership node legitimately blocks it
        return P.ownership_path(far), content, False
    if kind == "time-average":
        return P.time_average_path(f"fuzz{i}:1"), content, False
    return P.WORKLOAD, content, False


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def errors() -> Iterator[_Errors]:
    handler = _Errors()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


def test_fuzzed_nodes_everywhere_never_fail_a_job_an_agent_or_the_api(
    cluster: Cluster, errors: _Errors
) -> None:
    config = fast_config(loadBalancerAutoBundleSplitEnabled=True)
    cluster.scenario(skewed_scenario(NS, 4, seed=5))
    workload = cluster.admin.read_workload()
    for b in sorted(VALID_BROKERS):
        cluster.agent(b, config)
    metrics = PrometheusMetrics()
    svc: LoadManagerService = cluster.service("s1:7021", config, metrics=metrics)
    wait_for(svc.is_leader, 15, what="leadership")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    live = sorted(cluster.bundles())
    # Its own session holds the ephemeral fuzz brokers: some are valid reports, i.e. real brokers by
    # the protocol, that nobody serves; closing the session at the end takes them away again.
    attacker = ZkStore(cluster.hosts, session_timeout_s=10)
    attacker.start()
    api = TestClient(
        create_app(svc, Settings(api_token="t"), metrics.registry),
        base_url="http://127.0.0.1",
        headers={"Authorization": "Bearer t"},
    )
    statuses: list[tuple[str, int]] = []

    @given(batch=st.lists(node(live), min_size=NODES_PER_BATCH, max_size=NODES_PER_BATCH))
    @settings(
        max_examples=BATCHES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(batch: list[tuple[str, bytes, bool]]) -> None:
        for path, content, ephemeral in batch:
            if attacker.client.exists(path) is not None:
                attacker.client.set(path, content)
            else:
                attacker.client.create(path, content, makepath=True, ephemeral=ephemeral)
        for name, job in (
            ("reconcile", svc.jobs.reconcile),
            ("shedding", svc.jobs.shedding_cycle),
            ("bundle-data", svc.jobs.write_bundle_data),
            ("split", svc._auto_split),
        ):
            svc._leader_job(name, job)
        for url in ("/brokers", "/bundles", "/metrics", "/readyz", "/decisions", f"/bundles/{live[0]}"):
            statuses.append((url, api.get(url).status_code))
        assert svc.job_failures == {}, svc.job_failures

    try:
        run()
    finally:
        attacker.stop()
    # Restore a valid workload (the fuzz may have replaced it), then check balancing still works.
    assert workload is not None
    cluster.admin.write_workload(workload)
    assert [s for s in statuses if s[1] >= 500] == []
    # the API really answered (not a blanket 4xx from the auth or Host checks)
    assert {code for url, code in statuses if url == "/brokers"} == {200}
    assert svc.job_failures == {}
    assert [r.getMessage() for r in errors.records] == []

    def valid_brokers_own_the_namespace() -> bool:
        bundles = cluster.admin.read_layouts()[NS].value.bundle_names
        owners = cluster.owners()
        return all(owners.get(b) in VALID_BROKERS for b in bundles)

    wait_for(valid_brokers_own_the_namespace, 30, what="valid brokers own every bundle of the namespace")
    for agent in cluster.agents.values():
        assert agent.reports_written > 0
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    assert len(families["loadmgr_malformed_nodes"].samples) <= 2 * 10  # _total and _created per kind
    assert sum(s.value for s in families["loadmgr_malformed_nodes"].samples if s.name.endswith("_total")) > 0
