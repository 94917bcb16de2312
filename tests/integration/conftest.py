"""Helpers for the live-runtime tests: fast config, agents and services on a test's chroot."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from balancer.bundles import split_bundle_name
from balancer.config import LoadBalancerConfig
from service.broker.agent import BrokerAgent, SimulatedSource
from service.broker.workload import Scenario
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Assignment, ZkStore
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from service.zookeeper.server.server_config import ServerTls
from tests.integration.tls_files import TlsFiles, make_ca
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
AGENT_SESSION_S = 4.0
SERVICE_SESSION_S = 4.0

FAST = {
    "loadBalancerSheddingIntervalMinutes": 0.05,  # 3 s
    "loadBalancerResourceQuotaUpdateIntervalMinutes": 0.05,
    "loadBalancerReportUpdateMinIntervalMillis": 500,
    "loadBalancerBundleUnloadMinThroughputThreshold": 0.01,
    "loadBalancerSheddingGracePeriodMinutes": 10.0,
    "loadBalancerAutoBundleSplitEnabled": False,
    # Pulsar's 180 s scaled as the shedding interval is (60 s -> 3 s): a test's second plan is not
    # held for three minutes behind its first.
    "loadBalanceSheddingDelayInSeconds": 9,
    # The default 15 s between two unloads at one broker, on the same clock.
    "loadBalancerUnloadSpacingSeconds": 0.75,
}


def fast_config(**overrides: Any) -> LoadBalancerConfig:
    return LoadBalancerConfig.from_dict({**FAST, **overrides})


def assign(store: ZkStore, bundle: str, broker: str, reason: str = "test setup") -> None:
    """Write ``bundle``'s assignment as the leader does: with the hint its broker's agent watches."""
    doc = ZkStore.assignment_doc(Assignment(broker, None, reason, 0))
    store.fenced(None).upsert_json(P.assignment_path(bundle), doc).hint(broker, bundle).commit()


def wait_for(pred: Callable[[], bool], timeout: float, interval: float = 0.1, what: str = "") -> float:
    """Poll until ``pred()``; returns the seconds it took, fails the test at the deadline.

    ``timeout`` is the budget on a quiet machine; it is scaled by :func:`tests.timing.time_factor`."""
    start = time.monotonic()
    timeout = scaled(timeout)
    while time.monotonic() - start < timeout:
        with contextlib.suppress(Exception):
            if pred():
                return time.monotonic() - start
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s (scaled) waiting for {what or pred}")


class Cluster:
    """Agents and services of one test, all on one ZooKeeper chroot; everything is stopped after."""

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.admin = ZkStore(hosts, session_timeout_s=10)
        self.admin.start()
        self.agents: dict[str, BrokerAgent] = {}
        self.services: list[LoadManagerService] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def scenario(self, scenario: Scenario) -> None:
        self.admin.write_workload(scenario.model_dump(mode="json"))
        for ns, n in scenario.namespaces.items():
            self.admin.create_namespace(ns, n)

    def assign_all(self, broker: str) -> None:
        for got in self.admin.read_layouts().values():
            for b in got.value.bundle_names:
                assign(self.admin, b, broker)

    def agent(self, broker_id: str, config: LoadBalancerConfig) -> BrokerAgent:
        store = ZkStore(self.hosts, session_timeout_s=AGENT_SESSION_S)
        store.start()
        source = SimulatedSource(lambda: _scenario(store))
        a = BrokerAgent(store, broker_id, config, source, ownership_poll_s=0.3, report_interval_s=0.5)
        a.start()
        self.agents[broker_id] = a
        return a

    def agent_process(self, broker_id: str) -> subprocess.Popen[bytes]:
        """A real ``loadmgr agent`` process, to be killed with SIGKILL."""
        env = {**os.environ, **{f"LOADMGR_{k}": str(v) for k, v in FAST.items()}}
        cmd = [
            sys.executable,
            "-m",
            "service.commands.cli",
            "agent",
            "--broker-id",
            broker_id,
            "--zk",
            self.hosts,
            "--chroot",
            "",
            "--session-timeout",
            str(AGENT_SESSION_S),
            "--ownership-poll",
            "0.3",
            "--report-interval",
            "0.5",
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def service(
        self,
        instance_id: str,
        config: LoadBalancerConfig,
        settings_kw: dict[str, Any] | None = None,
        **kw: Any,
    ) -> LoadManagerService:
        settings = Settings(
            zk_hosts=self.hosts,
            zk_chroot="",
            zk_session_timeout_s=SERVICE_SESSION_S,
            instance_id=instance_id,
            http_port=int(instance_id.rsplit(":", 1)[1]),
            **(settings_kw or {}),
        )
        svc = LoadManagerService(settings, config, seed=1, **kw)
        svc.start()
        self.services.append(svc)
        return svc

    def with_a_doomed_broker(
        self, config: LoadBalancerConfig
    ) -> tuple[LoadManagerService, subprocess.Popen[bytes]]:
        """Brokers b1 and b2 in-process, b3 a real agent process (to be killed), a leading service
        s1, and every bundle owned."""
        self.agent("b1:8080", config)
        self.agent("b2:8080", config)
        doomed = self.agent_process("b3:8080")
        wait_for(lambda: "b3:8080" in self.admin.broker_ids(), 30, what="the agent process to register")
        svc = self.service("s1:7001", config)
        wait_for(svc.is_leader, 15, what="leadership")
        wait_for(lambda: set(self.owners()) == self.bundles(), 20, what="every bundle owned")
        return svc, doomed

    def kill_doomed(self, doomed: subprocess.Popen[bytes]) -> None:
        """SIGKILL b3's process and wait until its session has expired."""
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=5)
        wait_for(
            lambda: "b3:8080" not in self.admin.broker_ids(),
            AGENT_SESSION_S + 10,
            what="b3's session to expire",
        )

    def owners(self) -> dict[str, str]:
        return {b: o.broker for b, o in self.admin.read_owners().items()}

    def bundles(self) -> set[str]:
        return {b for got in self.admin.read_layouts().values() for b in got.value.bundle_names}

    def close(self) -> None:
        for svc in self.services:
            with contextlib.suppress(Exception):
                svc.stop()
        for a in self.agents.values():
            with contextlib.suppress(Exception):
                a.stop(release=False)
                a.store.stop()
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.send_signal(signal.SIGKILL)
                p.wait(timeout=5)
        self.admin.stop()


def _scenario(store: ZkStore) -> Scenario | None:
    return store.read_workload_as(Scenario.parse)


@pytest.fixture
def cluster(zk_chroot_hosts: str) -> Iterator[Cluster]:
    c = Cluster(zk_chroot_hosts)
    try:
        yield c
    finally:
        c.close()


class OwnershipChecker(threading.Thread):
    """Watches ownership all through a test: no bundle may be served by two brokers at once.

    It samples both what ZooKeeper says (ownership nodes of one namespace must not overlap) and
    what each agent believes it serves (the agents' sets must be disjoint).
    """

    def __init__(self, cluster: Cluster, period_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.period_s = period_s
        self.violations: list[str] = []
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            with contextlib.suppress(Exception):
                self._check()
                self.samples += 1
            time.sleep(self.period_s)

    def _check(self) -> None:
        seen: dict[str, str] = {}
        for broker, agent in list(self.cluster.agents.items()):
            for b in agent.owned():
                if b in seen:
                    self.violations.append(f"{b} served by {seen[b]} and {broker}")
                seen[b] = broker
        per_ns: dict[str, list[tuple[int, int, str]]] = {}
        for b in self.cluster.owners():
            ns, rng = split_bundle_name(b)
            per_ns.setdefault(ns, []).append((rng.lower, rng.upper, b))
        for ranges in per_ns.values():
            ranges.sort()
            for (_, up, b1), (lo, _, b2) in itertools.pairwise(ranges):
                if lo < up:
                    self.violations.append(f"overlapping owned bundles {b1} and {b2}")

    def stop(self) -> None:
        """Stops after two fresh samples, so the end state is checked however slow the machine is."""
        start = self.samples
        wait_for(lambda: self.samples >= start + 2, 10, what="the ownership checker to sample the end state")
        self._halt.set()
        self.join(timeout=5)


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    """A fresh CA and a server certificate for 127.0.0.1 signed by it (tests/integration/tls_files.py)."""
    return make_ca(tmp_path / "ca")


@pytest.fixture
def tls_zk(tls: TlsFiles) -> Iterator[EmbeddedZooKeeper]:
    """A ZooKeeper that accepts TLS clients only, with ``tls``'s server certificate."""
    with EmbeddedZooKeeper(tls=ServerTls(tls.keystore, tls.ca)) as zk:
        yield zk


# JVM flags for short-lived test JVMs on a 2-core machine (as the embedded ZooKeeper and Pulsar use):
# C1 only and one GC thread, so JIT compiler and GC threads do not take both cores from the work.
QUICK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
# Settings for the tests' tiny Spark jobs (a few thousand rows): two partitions per shuffle on two
# cores, no web UI (a Jetty server per SparkContext, seconds to start on a loaded machine).
SPARK_TEST_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": QUICK_JVM,
    "spark.executor.extraJavaOptions": QUICK_JVM,
}


def spark_conf_dir(directory: Path, conf: dict[str, str]) -> Path:
    """``directory`` as a SPARK_CONF_DIR: spark-submit (and so ``loadmgr longterm``/``replay``, whose
    pyspark starts its JVM through it) reads ``conf`` from its spark-defaults.conf."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    return directory


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession per test process, shared by every Spark module (pyspark keeps one JVM
    per process anyway; a new SparkContext on it costs seconds on a loaded machine). The jobs under
    test take it as given and leave it running (``loadmgr replay`` stops only a session it built)."""
    pytest.importorskip("pyspark")
    # Loopback only (set before the JVM starts): Spark otherwise binds an address of a network interface
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from service.longterm.input import build_spark

    session = build_spark("local[2]", SPARK_TEST_CONF)
    yield session
    session.stop()
