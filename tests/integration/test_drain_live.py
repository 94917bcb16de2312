"""Cordon and drain on real ZooKeeper with the demo's agents (ZooKeeper-native mode).

A drain of one of three brokers moves every bundle off it, one in flight at a time, never onto a
cordoned broker, each bundle once; a cordon survives a leader failover; a leader failover in the
middle of a drain continues it without moving anything twice; bad requests are refused with a
4xx naming the field and value, and change nothing."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.broker.workload import skewed_scenario
from service.leader.drain import DONE
from service.leader.service import LoadManagerService
from service.settings import Settings
from service.zookeeper import paths as P
from tests.integration.conftest import Cluster, OwnershipChecker, assign, fast_config, wait_for

pytestmark = pytest.mark.integration

NS = "public/default"
B1, B2, B3 = "b1:8080", "b2:8080", "b3:8080"
# Shedding off: every move in these tests is the drain's or the orphan rule's.
CONFIG = fast_config(loadBalancerSheddingEnabled=False)


def _start(cluster: Cluster, bundles: int, *services: str) -> list[LoadManagerService]:
    cluster.scenario(skewed_scenario(NS, bundles, seed=11))
    for b in (B1, B2, B3):
        cluster.agent(b, CONFIG)
    wait_for(lambda: len(cluster.admin.broker_ids()) == 3, 15, what="three agents registered")
    svcs = [cluster.service(s, CONFIG) for s in services]
    wait_for(svcs[0].is_leader, 15, what="leadership")
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 20, what="every bundle owned")
    return svcs


def _owned_by(cluster: Cluster, broker: str) -> set[str]:
    return {b for b, o in cluster.owners().items() if o == broker}


def _drain_moves(*svcs: LoadManagerService) -> list[Any]:
    return [d for s in svcs for d in s.decisions(limit=1000, kind="drain") if d.applied and d.bundle]


class InTransit(threading.Thread):
    """Samples how many bundles are assigned to one broker while another still owns them (or none
    does): the drain's moves under way. The drain promises at most one."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.most = 0
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.02):
            try:
                assigned = {b: a.value.broker for b, a in self.cluster.admin.read_assignments().items()}
                owners = self.cluster.owners()
            except Exception:
                continue
            moving = [b for b, to in assigned.items() if owners.get(b) != to]
            self.most = max(self.most, len(moving))
            self.samples += 1

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def test_drain_one_of_three_brokers(cluster: Cluster) -> None:
    (svc,) = _start(cluster, 12, "s1:7001")
    wait_for(lambda: len(_owned_by(cluster, B1)) >= 2, 10, what="b1 owns bundles")
    before = _owned_by(cluster, B1)
    checker, transit = OwnershipChecker(cluster), InTransit(cluster)
    checker.start()
    transit.start()
    state = svc.drain(B1, principal="test")
    assert state.broker == B1 and state.total == len(before)
    assert svc.cordons().keys() == {B1}
    wait_for(lambda: (d := svc.drain_state()) is not None and d.state == DONE, 60, what="the drain done")
    transit.stop()
    checker.stop()
    assert _owned_by(cluster, B1) == set()
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), 10, what="every bundle owned")
    moves = _drain_moves(svc)
    assert {d.bundle for d in moves} == before
    assert all(n == 1 for n in Counter(d.bundle for d in moves).values()), "a bundle moved twice"
    assert all(d.source == B1 and d.destination in (B2, B3) for d in moves)
    assert transit.samples > 10 and transit.most <= 1, transit.most
    for d in moves:
        assert d.explanation["reason"] == "drain" and d.explanation["numbers"]["leaderEpoch"] is not None
    final = svc.drain_state()
    assert final is not None and final.moved == len(before) and final.in_flight is None
    assert not checker.violations, checker.violations
    # Each drain move went through the move queue: followed until served at its destination (the
    # disruption budget counted it meanwhile; /decisions shows its state).
    wait_for(lambda: all(d.state == "served" for d in _drain_moves(svc)), 15, what="every drain move served")
    assert svc.jobs.moves_served >= len(before)
    # A drained broker keeps nothing: a bundle put back on it behind loadmgr's back (Pulsar's lookup
    # in Pulsar mode; a hand-written assignment here) is moved off by the sweep.
    back = sorted(before)[0]
    assign(cluster.admin, back, B1)
    wait_for(lambda: cluster.owners().get(back) == B1, 10, what="b1 took a bundle back")
    assert svc.cordon_sweep() == 1
    wait_for(lambda: cluster.owners().get(back) in (B2, B3), 10, what="moved off the drained broker")
    # Still cordoned: a new namespace's bundles go to the other two brokers only.
    cluster.admin.create_namespace("public/later", 6)
    later = {f"public/later/{r}" for r in _ranges(cluster, "public/later")}
    wait_for(lambda: later <= set(cluster.owners()), 20, what="the new bundles owned")
    assert not later & _owned_by(cluster, B1)
    # Uncordoned, placement may choose it again (from the leader's next refresh of its view).
    svc.uncordon(B1, principal="test")
    assert svc.cordons() == {}
    view = svc._loadview
    wait_for(lambda: B1 in view.ctx.brokers(view.load), 10, what="b1 a placement candidate again")
    # Cordoned again later, without a drain: it keeps what it has, the finished drain notwithstanding.
    assign(cluster.admin, back, B1)
    wait_for(lambda: cluster.owners().get(back) == B1, 10, what="b1 owns a bundle again")
    svc.cordon(B1, principal="test")
    assert svc.cordon_sweep() == 0 and svc.cordon_sweep() == 0
    assert cluster.owners().get(back) == B1


def _ranges(cluster: Cluster, ns: str) -> list[str]:
    layout = cluster.admin.read_layouts()[ns].value
    return [b.rsplit("/", 1)[1] for b in layout.bundle_names]


def test_cordon_survives_a_leader_failover_and_bad_input_changes_nothing(cluster: Cluster) -> None:
    s1, s2 = _start(cluster, 6, "s1:7011", "s2:7012")
    client = TestClient(create_app(s1, Settings()), base_url="http://127.0.0.1")
    r = client.post(f"/brokers/{B2}/cordon")
    assert r.status_code == 200 and r.json()["broker"] == B2
    raw = cluster.admin.client.get(P.LOADMGR_CORDONS)[0]
    assert json.loads(raw)["brokers"].keys() == {B2}
    wait_for(lambda: s2.cordons().keys() == {B2}, 10, what="the follower sees the cordon")
    listed = {b["broker"]: b for b in client.get("/brokers").json()}
    assert listed[B2]["cordoned"] and not listed[B1]["cordoned"]

    # Bad input: each refused with the field and value named, and nothing written.
    version = cluster.admin.client.exists(P.LOADMGR_CORDONS).version
    r = client.post("/brokers/nosuch:1/cordon")
    assert r.status_code == 404 and r.json()["error"] == "UnknownBroker" and "nosuch:1" in r.text
    r = client.post("/brokers/nosuch:1/drain")
    assert r.status_code == 404 and "nosuch:1" in r.text
    assert client.post(f"/brokers/{B1}/cordon").status_code == 200
    version = cluster.admin.client.exists(P.LOADMGR_CORDONS).version
    r = client.post(f"/brokers/{B3}/cordon")  # would cordon every broker
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["error"] == "Conflict" and body["detail"][0]["field"] == "broker"
    assert body["detail"][0]["value"] == B3
    r = client.post(f"/brokers/{B3}/drain")  # the last uncordoned broker: nowhere to move to
    assert r.status_code == 409 and r.json()["detail"][0]["value"] == B3
    r = client.post(f"/brokers/{B1}/drain", json={"thenShutdown": True})  # not Pulsar mode
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "thenShutdown"
    assert cluster.admin.client.exists(P.LOADMGR_CORDONS).version == version
    assert cluster.admin.client.exists(P.LOADMGR_DRAIN) is None
    assert client.post(f"/brokers/{B1}/uncordon").status_code == 200

    # The leader goes; the new one places orphans and new bundles away from the cordoned broker.
    s1.stop()
    wait_for(s2.is_leader, 20, what="s2 leads")
    assert s2.cordons().keys() == {B2}
    cluster.admin.create_namespace("public/new", 6)
    new = {f"public/new/{r}" for r in _ranges(cluster, "public/new")}
    wait_for(lambda: new <= set(cluster.owners()), 20, what="the new bundles owned")
    assert not new & _owned_by(cluster, B2)
    # A restart (a third instance, started after everything above) reads it from ZooKeeper too.
    s3 = cluster.service("s3:7013", CONFIG)
    wait_for(lambda: s3.cordons().keys() == {B2}, 10, what="a restarted instance sees the cordon")


def test_failover_in_the_middle_of_a_drain_continues_it_moving_nothing_twice(cluster: Cluster) -> None:
    s1, s2 = _start(cluster, 18, "s1:7021", "s2:7022")
    wait_for(lambda: len(_owned_by(cluster, B1)) >= 4, 10, what="b1 owns bundles")
    before = _owned_by(cluster, B1)
    client = TestClient(create_app(s1, Settings()), base_url="http://127.0.0.1")
    r = client.post(f"/brokers/{B1}/drain")
    assert r.status_code == 200 and r.json()["state"] == "running"
    r = client.post(f"/brokers/{B2}/drain")  # another drain while this one runs
    assert r.status_code == 409 and r.json()["detail"][0]["value"] == B2
    assert "running" in r.json()["detail"][0]["reason"]
    wait_for(lambda: (d := s1.drain_state()) is not None and d.moved >= 2, 30, what="two moves done")
    s1.stop()
    wait_for(s2.is_leader, 20, what="s2 leads")
    wait_for(lambda: (d := s2.drain_state()) is not None and d.state == DONE, 60, what="s2 finishes it")
    assert _owned_by(cluster, B1) == set()
    moves = _drain_moves(s1, s2)
    assert {d.bundle for d in moves} == before
    assert all(n == 1 for n in Counter(d.bundle for d in moves).values()), Counter(d.bundle for d in moves)
    assert any(d in s2.decisions(limit=1000, kind="drain") for d in moves), "s2 moved none"
    final = s2.drain_state()
    assert final is not None and final.moved == len(before)


def test_cli_drain_wait_shows_progress_and_status_shows_the_cordon(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.commands import client as cli_client
    from service.commands.cli import main

    (svc,) = _start(cluster, 6, "s1:7031")
    wait_for(lambda: len(_owned_by(cluster, B3)) >= 1, 10, what="b3 owns bundles")
    app = create_app(svc, Settings())
    monkeypatch.setattr(cli_client, "_client", lambda _a: TestClient(app, base_url="http://127.0.0.1"))
    assert main(["brokers", "cordon", "nosuch:1"]) == 2
    assert "UnknownBroker" in capsys.readouterr().err
    assert main(["brokers", "drain"]) == 2
    assert "BROKER" in capsys.readouterr().err
    assert main(["brokers", "drain", B3, "--wait", "--timeout", "60"]) == 0
    out = capsys.readouterr()
    assert f"drain of {B3}: done" in out.out
    bars = [line for line in out.err.splitlines() if line.startswith("[")]
    assert bars and bars[-1].startswith("[" + "#" * 30 + "]"), out.err
    assert _owned_by(cluster, B3) == set()
    assert main(["status"]) == 0
    status = capsys.readouterr().out
    assert f"cordoned: {B3}" in status and f"drain of {B3}: done" in status
    assert main(["brokers", "-o", "json"]) == 0
    rows = {r["broker"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[B3]["cordoned"] and not rows[B1]["cordoned"]
    assert main(["brokers", "uncordon", B3]) == 0
    assert svc.cordons() == {}


def test_a_bundle_placed_on_a_cordoned_broker_behind_loadmgrs_back_is_moved_off(cluster: Cluster) -> None:
    """What Pulsar's own lookup can do in Pulsar mode (loadmgr cannot veto it), played here by a
    hand-written assignment; the sweep Pulsar mode runs every few seconds is called directly."""
    (svc,) = _start(cluster, 6, "s1:7041")
    svc.cordon(B2, principal="test")
    kept = _owned_by(cluster, B2)
    assert svc.cordon_sweep() == 0  # first sight: what it owns now, it keeps
    victim = sorted(_owned_by(cluster, B1))[0]
    assign(cluster.admin, victim, B2)
    wait_for(lambda: cluster.owners().get(victim) == B2, 10, what="b2 took the bundle")
    assert svc.cordon_sweep() == 1
    wait_for(lambda: cluster.owners().get(victim) in (B1, B3), 10, what="moved off the cordoned broker")
    assert _owned_by(cluster, B2) == kept
    (d,) = [d for d in svc.decisions(limit=100, kind="drain") if d.bundle == victim]
    assert d.explanation["reason"] == "placed_on_cordoned" and d.source == B2 and d.applied


def test_the_helm_chart_broker_hook_drains_and_uncordons_through_rest(
    cluster: Cluster, tmp_path: Any
) -> None:
    """The chart's preStop/postStart script (helm/loadmgr/files/broker-drain-hook.sh), run as a pod
    would run it, against a live leader's REST API with an admin token."""
    import os
    import subprocess
    from pathlib import Path

    from service.zookeeper.server.process import free_port
    from tests.integration.servers import served

    script = Path(__file__).resolve().parents[2] / "helm" / "loadmgr" / "files" / "broker-drain-hook.sh"
    (svc,) = _start(cluster, 6, "s1:7051")
    wait_for(lambda: len(_owned_by(cluster, B2)) >= 1, 10, what="b2 owns bundles")
    token = tmp_path / "token"
    token.write_text("s3cret-admin-token")
    port = free_port()
    env = {
        **os.environ,
        "LOADMGR_URL": f"http://127.0.0.1:{port}",
        "BROKER_ID": B2,
        "DRAIN_DEADLINE_SECONDS": "60",
        "UNCORDON_DEADLINE_SECONDS": "30",
    }
    with served(create_app(svc, Settings(api_token="s3cret-admin-token")), port):
        # Without the token: refused, nothing drained, and the hook still exits 0 (never blocks a pod).
        r = subprocess.run(["sh", str(script), "drain"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "HTTP 401" in r.stderr, r.stderr
        assert svc.cordons() == {}
        env["LOADMGR_API_TOKEN_FILE"] = str(token)
        r = subprocess.run(["sh", str(script), "drain"], env=env, capture_output=True, text=True, timeout=90)
        assert r.returncode == 0 and f"drain of {B2} done" in r.stderr, r.stderr
        assert _owned_by(cluster, B2) == set() and set(svc.cordons()) == {B2}
        r = subprocess.run(
            ["sh", str(script), "uncordon"], env=env, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0 and f"{B2} uncordoned" in r.stderr, r.stderr
        assert svc.cordons() == {}
