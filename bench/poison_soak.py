"""Soak: a live leader and three agents under a flood of fuzzed ZooKeeper nodes.

    .venv/bin/python bench/poison_soak.py [--nodes 10000] [--seconds 45] [--seed 1]

Starts an embedded ZooKeeper, a ``LoadManagerService`` (shedding every 3 s) with Prometheus metrics,
three simulated agents on a skewed workload, and reads GET /bundles and /metrics in a loop through
the real FastAPI app. It measures a clean phase, then writes ``--nodes`` fuzzed nodes (half of them
under /loadbalance/brokers, the rest over every other root the leader and agents read: bundle data,
quotas, layouts, ownership, assignments, time averages; deep nesting, NaN/Infinity, huge integers,
non-UTF-8, wrong types, near-valid reports and persistent ``{}`` phantoms) and measures the same
phase again. Prints, per phase: job failures, 5xx answers, warning lines logged, malformed-node
series and /metrics size, GET /bundles median and the ratio flood / clean, shedding cycles run
against the cycles due, and whether any bundle went to a broker that is not one of the agents.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient

from balancer.config import LoadBalancerConfig
from balancer.models import LocalBrokerData, ResourceUsage
from service.api.app import create_app
from service.api.metrics import PrometheusMetrics
from service.broker.agent import BrokerAgent, SimulatedSource
from service.broker.workload import Scenario, skewed_scenario
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper

NS = "public/default"
AGENTS = ("b1:8080", "b2:8080", "b3:8080")
FAST = {
    "loadBalancerSheddingIntervalMinutes": 0.05,
    "loadBalancerResourceQuotaUpdateIntervalMinutes": 0.05,
    "loadBalancerReportUpdateMinIntervalMillis": 500,
    "loadBalancerBundleUnloadMinThroughputThreshold": 0.01,
    "loadBalancerAutoBundleSplitEnabled": False,
}


class Counting(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += 1


def payload(rng: random.Random) -> bytes:
    """One fuzzed node content."""
    pick = rng.randrange(10)
    if pick == 0:
        return b"[" * rng.randrange(40, 4000)
    if pick == 1:
        return json.dumps({"msgRateIn": float("nan"), "cpu": {"usage": float("inf"), "limit": 1}}).encode()
    if pick == 2:
        return b'{"lastUpdate": ' + b"9" * rng.randrange(20, 400) + b', "time": 1e400}'
    if pick == 3:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    if pick == 4:
        return b"{}"
    if pick == 5:
        return b""
    if pick == 6:
        return json.dumps({"cpu": "lots", "broker": [1], "bundles": 7, "longTermData": []}).encode()
    if pick == 7:  # near-valid report: a limit that rounds to 0 in float32, negative rate
        doc = LocalBrokerData(web_service_url="http://x:1", cpu=ResourceUsage(usage=50, limit=1e-50))
        d = doc.to_json_dict()
        d["msgRateIn"] = -rng.random() * 1e3 if rng.random() < 0.5 else 1e300
        return json.dumps(d).encode()
    if pick == 8:
        return json.dumps({"bundles": {"boundaries": ["0x00000000", "zz"], "numBundles": 1}}).encode()
    return json.dumps([rng.random(), None, "x" * rng.randrange(100)]).encode()


def flood(store: ZkStore, n: int, rng: random.Random) -> None:
    """``n`` nodes: half under brokers (some persistent phantoms, some ephemeral), half elsewhere."""
    tx_size = 200
    items: list[tuple[str, bytes, bool]] = []
    for i in range(n):
        far = f"flood/ns{i % 97}/0x{i:08x}_0x{i + 1:08x}"
        content = payload(rng)
        if i % 2 == 0:
            items.append((P.broker_path(f"flood{i}:1"), content, i % 4 == 0))
            continue
        root = (i // 2) % 6
        path = (
            P.bundle_data_path(far),
            P.quota_path(far),
            P.policies_path(f"flood/ns{i}"),
            P.ownership_path(far),
            P.assignment_path(far),
            P.time_average_path(f"flood{i}:1"),
        )[root]
        items.append((path, content, False))
    for p in {P.parent(path) for path, _, _ in items}:
        store.client.ensure_path(p)
    for start in range(0, len(items), tx_size):
        pending = [
            store.client.create_async(path, content, ephemeral=eph)
            for path, content, eph in items[start : start + tx_size]
        ]
        for got in pending:
            got.get(timeout=30)


def phase(
    name: str,
    svc: LoadManagerService,
    api: TestClient,
    counter: Counting,
    metrics: PrometheusMetrics,
    seconds: float,
) -> dict[str, Any]:
    lines0, cycles0 = counter.lines, svc.jobs.cycles
    failures0 = sum(svc.job_failures.values())
    latencies: list[float] = []
    statuses: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t = time.perf_counter()
        r = api.get("/bundles")
        latencies.append(time.perf_counter() - t)
        statuses.append(r.status_code)
        statuses.append(api.get("/metrics").status_code)
        statuses.append(api.get("/brokers").status_code)
        time.sleep(0.2)
    body = metrics.render().decode()
    series = sum(1 for line in body.splitlines() if line.startswith("loadmgr_malformed_nodes_total"))
    interval = 0.05 * 60
    owners = {o.broker for o in svc.store.read_owners().values() if not o.broker.startswith("flood")}
    return {
        "phase": name,
        "job_failures": sum(svc.job_failures.values()) - failures0,
        "server_errors": sum(1 for s in statuses if s >= 500),
        "requests": len(statuses),
        "warning_lines": counter.lines - lines0,
        "malformed_series": series,
        "metrics_bytes": len(body),
        "bundles_median_s": statistics.median(latencies),
        "cycles": svc.jobs.cycles - cycles0,
        "cycles_due": int(seconds / interval),
        "owners_outside_agents": sorted(owners - set(AGENTS)),
        "ready": svc.ready(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    counter = Counting()
    # Only counted, never printed: the count is the measurement.
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger().addHandler(counter)
    config = LoadBalancerConfig.from_dict(FAST)
    with EmbeddedZooKeeper() as zk:
        admin = ZkStore(zk.hosts, session_timeout_s=30)
        admin.start()
        scenario = skewed_scenario(NS, 16, seed=args.seed)
        admin.write_workload(scenario.model_dump(mode="json"))
        admin.create_namespace(NS, 16)
        agents = []
        for b in AGENTS:
            store = ZkStore(zk.hosts, session_timeout_s=10)
            store.start()
            source = SimulatedSource(lambda s=store: s.read_workload_as(Scenario.parse))
            agent = BrokerAgent(store, b, config, source, ownership_poll_s=0.5, report_interval_s=0.5)
            agent.start()
            agents.append(agent)
        metrics = PrometheusMetrics()
        settings = Settings(zk_hosts=zk.hosts, instance_id="soak:1", http_port=1)
        svc = LoadManagerService(settings, config, metrics=metrics, seed=args.seed)
        svc.start()
        api = TestClient(create_app(svc, settings, metrics.registry))
        while not svc.is_leader():
            time.sleep(0.1)
        time.sleep(5)
        clean = phase("clean", svc, api, counter, metrics, args.seconds)
        attacker = ZkStore(zk.hosts, session_timeout_s=30)
        attacker.start()
        t = time.monotonic()
        flood(attacker, args.nodes, random.Random(args.seed))
        written_s = time.monotonic() - t
        flooded = phase("flood", svc, api, counter, metrics, args.seconds)
        flooded["nodes"] = args.nodes
        flooded["write_s"] = round(written_s, 1)
        for row in (clean, flooded):
            print(json.dumps(row))
        ratio = flooded["bundles_median_s"] / clean["bundles_median_s"]
        print(f"GET /bundles median flood/clean: {ratio:.2f}x")
        c, f = clean, flooded
        print(
            f"shedding cycles run/due: clean {c['cycles']}/{c['cycles_due']},"
            f" flood {f['cycles']}/{f['cycles_due']}"
        )
        svc.stop()
        attacker.stop()
        for agent in agents:
            agent.stop(release=False)
            agent.store.stop()
        admin.stop()


if __name__ == "__main__":
    main()
