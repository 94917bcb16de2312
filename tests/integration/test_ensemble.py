"""A real 3-member ZooKeeper ensemble under the leader, a follower and agents: the member a process is
connected to dies, members die one after another, the quorum is lost, members restart on their data
dirs. Each test ends with an audit of the ensemble's transaction logs for its chroot."""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from kazoo.client import KazooClient

from service.api.app import create_app
from service.broker.workload import skewed_scenario
from service.leader.service import LoadManagerService
from service.zookeeper.forensics.audit import AuditReport, audit
from service.zookeeper.forensics.txnlog import cross_check, merged_history
from service.zookeeper.server.ensemble import ZooKeeperEnsemble, connected_port
from tests.integration.conftest import (
    ROOT,
    SERVICE_SESSION_S,
    Cluster,
    OwnershipChecker,
    fast_config,
    wait_for,
)

pytestmark = pytest.mark.integration

SHED_S = 3.0  # fast_config's shedding interval


@pytest.fixture(scope="module")
def ensemble() -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(3) as ens:
        yield ens


class EnsembleCluster(Cluster):
    def __init__(self, ensemble: ZooKeeperEnsemble, chroot: str) -> None:
        self.ensemble = ensemble
        self.chroot = chroot
        super().__init__(ensemble.hosts + chroot)

    def all_stores(self) -> list[tuple[str, KazooClient]]:
        out = [(f"service {s.instance_id}", s.store.client) for s in self.services]
        return out + [(f"agent {b}", a.store.client) for b, a in self.agents.items()]

    def leaders(self) -> list[LoadManagerService]:
        return [s for s in self.services if s.is_leader()]

    def audit(self) -> AuditReport:
        files = self.ensemble.txn_log_files()
        assert [p for f in files for p in cross_check(f, live=True)] == [], (
            "decoder and TxnLogToolkit disagree"
        )
        history = merged_history(files)
        assert history.conflicts == []
        return audit(history.txns, chroot=self.chroot)


@pytest.fixture
def ecluster(ensemble: ZooKeeperEnsemble) -> Iterator[EnsembleCluster]:
    chroot = f"/e-{uuid.uuid4().hex[:12]}"
    admin = KazooClient(hosts=ensemble.hosts, timeout=10)
    admin.start(timeout=15)
    admin.ensure_path(chroot)
    admin.stop()
    admin.close()
    c = EnsembleCluster(ensemble, chroot)
    try:
        yield c
    finally:
        c.close()
        # Leave the ensemble whole for the next test, on the same data dirs.
        for i, m in enumerate(ensemble.members):
            if m.paused:
                ensemble.resume(i)
            if not m.running:
                ensemble.start_member(i)
        ensemble.wait_for_quorum(60, all_members=True)


def _start(c: EnsembleCluster, agents: int = 3, services: int = 2) -> LoadManagerService:
    config = fast_config()
    c.scenario(skewed_scenario("public/ens", 8, seed=21))
    for i in range(agents):
        c.agent(f"b{i + 1}:8080", config)
    for i in range(services):
        c.service(f"s{i + 1}:{7100 + i}", config)
    wait_for(lambda: len(c.leaders()) == 1, 20, what="one leader")
    wait_for(lambda: set(c.owners()) == c.bundles(), 20, what="every bundle owned")
    return c.leaders()[0]


def _sessions(c: EnsembleCluster) -> dict[str, int | None]:
    return {name: client.client_id[0] if client.client_id else None for name, client in c.all_stores()}


def test_killing_the_member_each_process_uses_loses_no_session_leader_or_move(
    ensemble: ZooKeeperEnsemble, ecluster: EnsembleCluster
) -> None:
    c = ecluster
    leader = _start(c)
    checker = OwnershipChecker(c)
    checker.start()
    sessions = _sessions(c)
    terms = {s.instance_id: s.election.terms for s in c.services}
    stores = c.all_stores()
    covered: set[str] = set()  # processes whose member has been killed under them
    moves = 0
    while len(covered) < len(stores):
        name, client = next((n, cl) for n, cl in stores if n not in covered)
        port = connected_port(client)
        assert port is not None, f"{name} is not connected"
        index = ensemble.index_of_port(port)
        covered |= {n for n, cl in stores if connected_port(cl) == port}
        # A move in flight when the member dies must still complete.
        wait_for(lambda: c.leaders() == [leader], SERVICE_SESSION_S, what="the leader deciding")
        moves += 1
        bundle = sorted(c.owners())[moves]
        dest = next(b for b in sorted(c.agents) if b != c.owners()[bundle])
        leader.unload(bundle, dest)
        ensemble.kill(index)
        wait_for(
            lambda p=port: all(cl.connected and connected_port(cl) != p for _, cl in stores),
            SERVICE_SESSION_S * 2,
            what=f"every client off member {index + 1}",
        )
        wait_for(lambda b=bundle, d=dest: c.owners().get(b) == d, 15, what=f"{bundle} moved to {dest}")
        ensemble.start_member(index)
        ensemble.wait_for_quorum(30, all_members=True)
    checker.stop()
    assert _sessions(c) == sessions, "a session was replaced (expired) while a member died"
    assert {s.instance_id: s.election.terms for s in c.services} == terms, "leadership changed hands"
    wait_for(lambda: c.leaders() == [leader], SERVICE_SESSION_S, what="the same leader deciding")
    assert checker.violations == [] and checker.samples > 0
    report = c.audit()
    assert report.violations == [] and report.double_owners == []


def test_killing_one_member_at_a_time_does_not_interrupt_decisions(
    ensemble: ZooKeeperEnsemble, ecluster: EnsembleCluster
) -> None:
    c = ecluster
    leader = _start(c)
    cycle_times: list[float] = []
    halt = threading.Event()

    def watch_cycles() -> None:
        seen = leader.jobs.cycles
        while not halt.is_set():
            if leader.jobs.cycles != seen:
                seen = leader.jobs.cycles
                cycle_times.append(time.monotonic())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_cycles, daemon=True)
    watcher.start()
    wait_for(lambda: len(cycle_times) >= 1, SHED_S * 3, what="a first cycle")
    rng = random.Random(21)
    started = time.monotonic()
    for _ in range(4):
        i = rng.randrange(3)
        ensemble.kill(i)
        time.sleep(rng.uniform(2.0, 4.0))
        ensemble.start_member(i)
        ensemble.wait_for_quorum(30, all_members=True)
    time.sleep(SHED_S)
    halt.set()
    watcher.join(timeout=5)
    gaps = [b - a for a, b in itertools.pairwise(cycle_times)]
    assert cycle_times[-1] > started + 10 and gaps, "no cycles during the kills"
    # A cycle every interval; a member dying may cost at most one more (plus scheduling slack).
    assert max(gaps) <= 2 * SHED_S + 1.5, f"decisions stopped for {max(gaps):.1f}s"
    wait_for(lambda: c.leaders() == [leader], SERVICE_SESSION_S, what="the same leader deciding")
    wait_for(lambda: set(c.owners()) == c.bundles(), 15, what="every bundle owned")
    report = c.audit()
    assert report.violations == [] and report.double_owners == []


def test_quorum_lost_stops_every_decision_and_recovers_to_one_leader(
    ensemble: ZooKeeperEnsemble, ecluster: EnsembleCluster
) -> None:
    c = ecluster
    _start(c)
    checker = OwnershipChecker(c)
    checker.start()
    apps = {
        s.instance_id: TestClient(create_app(s, s.settings), base_url="http://127.0.0.1") for s in c.services
    }
    victims = random.Random(7).sample(range(3), 2)
    for i in victims:
        ensemble.kill(i)
    lost_at = time.monotonic()
    lost_ms = int(time.time() * 1000)
    # Every instance stops deciding within the session timeout, and /readyz says why.
    wait_for(
        lambda: not c.leaders(), SERVICE_SESSION_S, interval=0.05, what="every instance to stop deciding"
    )
    stopped_within = time.monotonic() - lost_at
    # A follower connected to a surviving member learns of the lost quorum only when that member drops
    # its clients, which can come after the leader has stepped down: wait for it within the session.
    wait_for(
        lambda: all(apps[s.instance_id].get("/readyz").status_code == 503 for s in c.services),
        max(0.1, SERVICE_SESSION_S - (time.monotonic() - lost_at)),
        interval=0.05,
        what="every instance to report not ready",
    )
    for s in c.services:
        r = apps[s.instance_id].get("/readyz")
        assert r.status_code == 503
        details = r.json()["details"]
        assert details["zookeeper"] == "SUSPENDED" and "quorum" in details["reason"], details
    decided = {s.instance_id: (s.jobs.cycles, len(s.decisions(limit=10_000))) for s in c.services}
    time.sleep(SERVICE_SESSION_S + 1.0)  # longer than a session: nothing may happen meanwhile
    assert {s.instance_id: (s.jobs.cycles, len(s.decisions(limit=10_000))) for s in c.services} == decided
    assert not c.leaders()
    recovered_ms = int(time.time() * 1000)
    for i in victims:
        ensemble.start_member(i)  # same data dirs
    ensemble.wait_for_quorum(30, all_members=True)
    wait_for(lambda: len(c.leaders()) == 1, 30, what="one leader after the quorum is back")
    wait_for(lambda: set(c.owners()) == c.bundles(), 30, what="every bundle owned again")
    wait_for(
        lambda: all(apps[s.instance_id].get("/readyz").status_code == 200 for s in c.services),
        30,
        what="every instance ready again",
    )
    checker.stop()
    assert checker.violations == []
    assert stopped_within <= SERVICE_SESSION_S
    report = c.audit()
    assert report.violations == [] and report.double_owners == []
    history = merged_history(ensemble.txn_log_files()).txns
    written = [t for t in history if lost_ms + 500 <= t.time_ms < recovered_ms]
    assert written == [], f"{len(written)} transactions committed without a quorum"


def test_members_restart_on_their_data_dirs_and_keep_the_cluster(
    ensemble: ZooKeeperEnsemble, ecluster: EnsembleCluster
) -> None:
    c = ecluster
    leader = _start(c, agents=2, services=1)
    layout = c.bundles()
    for i, m in enumerate(ensemble.members):
        logs_before = sorted(m.data_dir.glob("version-2/log.*"))
        assert logs_before and (m.data_dir / "myid").read_text().strip() == str(m.myid)
        ensemble.members[i].stop()  # a clean stop, then the same member on the same data dir
        ensemble.start_member(i)
        ensemble.wait_for_quorum(30, all_members=True)
        assert set(logs_before) <= set(m.data_dir.glob("version-2/log.*")), "data dir was not reused"
    assert c.bundles() == layout
    wait_for(lambda: c.leaders() == [leader], SERVICE_SESSION_S, what="the same leader deciding")
    wait_for(lambda: set(c.owners()) == c.bundles(), 15, what="every bundle owned")
    report = c.audit()
    assert report.violations == [] and report.double_owners == []
    assert report.ownership_creates >= len(layout) and report.leader_writes > 0


@pytest.mark.parametrize("size", [1, 3, 5])
def test_loadmgr_zookeeper_ensemble_command_serves_and_stops_on_ctrl_c(size: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "zookeeper", "--ensemble", str(size)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "export LOADMGR_ZK_HOSTS=" in line:
                break
        hosts = lines[-1].split("=", 1)[1].strip()
        pids = [int(x.split("(pid ")[1].split(")")[0]) for x in lines if x.strip().startswith("member ")]
        assert len(hosts.split(",")) == size and len(pids) == size, lines
        client = KazooClient(hosts=hosts, timeout=10)
        client.start(timeout=15)
        client.create("/hello", b"ensemble")
        assert client.get("/hello")[0] == b"ensemble"
        client.stop()
        client.close()
        # SIGINT to the command alone (not its group): it must stop every member itself.
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "ZooKeeper ensemble stopped" in proc.stdout.read()
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            assert not os.path.exists(f"/proc/{pid}") or "Z" in _proc_state(pid), (
                f"member pid {pid} left running"
            )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(")")[-1].split()[0]
    except OSError:
        return "Z"
