"""Chaos soak on a real 3-member ZooKeeper ensemble, then an audit of ZooKeeper's transaction logs.

    flock /tmp/loadmgr-heavy.lock nice -n 5 python bench/soak.py --minutes 30

Processes: a 3-member ensemble (``ZooKeeperEnsemble``), three ``loadmgr serve`` instances (leader
candidates with REST), four ``loadmgr agent`` brokers, all on loopback. Each step (every
``--step-ms``) is one random action: a REST unload or split sent to the current leader, an
invariant check, or a fault — SIGKILL or SIGSTOP of the leader, of an agent, or of a ZooKeeper
member (never more than one member down, so the quorum stays; quorum loss is covered by
``tests/integration/test_ensemble.py``), each healed after a random delay.

Afterwards every member's transaction log is decoded (cross-checked entry by entry against the jar's
``TxnLogToolkit``) and replayed by :mod:`service.zookeeper.forensics.audit`. Printed and written as JSON:
steps, steps and faults by kind, failover times, the longest unowned episode against the bound
session timeout + one shedding interval + one ownership poll, double owners and audit violations.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from kazoo.exceptions import NoNodeError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from soak_faults import SESSION_S, SoakFaults  # noqa: E402
from soak_process import Proc  # noqa: E402
from soak_report import build_report  # noqa: E402

from service.broker.workload import skewed_scenario  # noqa: E402
from service.zookeeper import paths as P  # noqa: E402
from service.zookeeper.metadata.store import ZkStore  # noqa: E402
from service.zookeeper.server.ensemble import ZooKeeperEnsemble, _free_ports  # noqa: E402

SHED_INTERVAL_S = 3.0
OWNERSHIP_POLL_S = 0.3
TOKEN = "soak-admin-token-for-loopback"  # >= 16 characters: serve warns about shorter ones
NAMESPACE = "public/soak"
INITIAL_BUNDLES = 16
MAX_BUNDLES = 40
FAST = {
    "loadBalancerSheddingIntervalMinutes": SHED_INTERVAL_S / 60,
    "loadBalancerResourceQuotaUpdateIntervalMinutes": 0.05,
    "loadBalancerReportUpdateMinIntervalMillis": 500,
    "loadBalancerBundleUnloadMinThroughputThreshold": 0.01,
    "loadBalancerSheddingGracePeriodMinutes": 0.5,
    "loadBalancerAutoBundleSplitEnabled": False,
    "loadBalancerLoadSheddingStrategy": "BalancedShedder",
    "loadBalancerLoadPlacementStrategy": "BalancedShedder",
}
# Relative weights of the step kinds. A fault drawn while another is in flight (or its effects are
# not over yet) is skipped, which leaves about one fault every ten seconds.
WEIGHTS = {
    "unload": 40,
    "split": 3,
    "check": 50,
    "kill_leader": 1,
    "pause_leader": 1,
    "kill_agent": 1,
    "pause_agent": 1,
    "kill_zk_member": 1,
    "pause_zk_member": 1,
}


class Soak(SoakFaults):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = Path(tempfile.mkdtemp(prefix="loadmgr-soak-"))
        self.ensemble = ZooKeeperEnsemble(3, base_dir=self.work / "zk", log_level="WARN")
        self.serves: dict[str, Proc] = {}
        self.agents: dict[str, Proc] = {}
        self.heals: list[tuple[float, str, Callable[[], None]]] = []
        self.steps: collections.Counter[str] = collections.Counter()
        self.faults: collections.Counter[str] = collections.Counter()
        self.rest: collections.Counter[str] = collections.Counter()
        self.failovers: list[float] = []
        self.pending_failover: tuple[float, int] | None = None
        self.live_double: list[str] = []
        self.timeline: list[tuple[int, str]] = []  # (epoch ms, fault or heal)
        self.quiet_until = 0.0
        self.http = httpx.Client(timeout=1.5, headers={"Authorization": f"Bearer {TOKEN}"})
        self.admin: ZkStore | None = None

    # ---- set-up ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self.ensemble.start()
        hosts = self.ensemble.hosts
        self.admin = ZkStore(hosts, session_timeout_s=10)
        self.admin.start()
        scenario = skewed_scenario(NAMESPACE, INITIAL_BUNDLES, seed=self.args.seed)
        self.admin.write_workload(scenario.model_dump(mode="json"))
        self.admin.create_namespace(NAMESPACE, INITIAL_BUNDLES)
        env = {**os.environ, "PYTHONPATH": str(ROOT), **{f"LOADMGR_{k}": str(v) for k, v in FAST.items()}}
        env.update(
            LOADMGR_ZK_HOSTS=hosts, LOADMGR_ZK_SESSION_TIMEOUT_S=str(SESSION_S), LOADMGR_LOG_LEVEL="WARNING"
        )
        # serve refuses a token in argv (it shows in ps): the environment carries it.
        env["LOADMGR_API_TOKEN"] = TOKEN
        logs = self.work / "logs"
        logs.mkdir()
        for port in _free_ports(3):
            iid = f"127.0.0.1:{port}"
            cmd = [
                sys.executable,
                "-m",
                "service",
                "serve",
                "--port",
                str(port),
                "--no-history",
            ]
            self.serves[iid] = Proc(iid, cmd, {**env, "LOADMGR_INSTANCE_ID": iid}, logs)
        for i in range(4):
            bid = f"broker-{i + 1}:8080"
            cmd = [
                sys.executable,
                "-m",
                "service",
                "agent",
                "--broker-id",
                bid,
                "--session-timeout",
                str(SESSION_S),
            ]
            cmd += ["--ownership-poll", str(OWNERSHIP_POLL_S)]
            self.agents[bid] = Proc(bid, cmd, env, logs)
        for p in (*self.serves.values(), *self.agents.values()):
            p.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if self.leader() is not None and set(self.owners()) == self.bundles():
                    return
            time.sleep(0.5)
        raise RuntimeError(f"cluster did not settle: leader {self.leader()}, owners {len(self.owners())}")

    def stop(self) -> None:
        for p in (*self.serves.values(), *self.agents.values()):
            with contextlib.suppress(Exception):
                p.terminate()
        if self.admin is not None:
            self.admin.stop()
        for m in self.ensemble.members:
            with contextlib.suppress(Exception):
                if m.paused:
                    m.resume()
                m.stop()  # data dirs stay under self.work for the audit
        self.http.close()

    # ---- reads -----------------------------------------------------------------------------------------
    def leader(self) -> tuple[str, int] | None:
        """(instance id, session) holding /loadbalance/leader."""
        assert self.admin is not None
        try:
            got = self.admin.client.get(P.LEADER)
        except NoNodeError:
            return None
        doc = json.loads(got[0].decode())
        return str(doc["brokerId"]), int(got[1].ephemeralOwner)

    def owners(self) -> dict[str, str]:
        assert self.admin is not None
        return {b: o.broker for b, o in self.admin.read_owners().items()}

    def bundles(self) -> set[str]:
        assert self.admin is not None
        return {b for got in self.admin.read_layouts().values() for b in got.value.bundle_names}

    # ---- steps -------------------------------------------------------------------------------------------
    def step(self) -> None:
        now = time.monotonic()
        for due, what, fn in [h for h in self.heals if h[0] <= now]:
            self.heals.remove((due, what, fn))
            with contextlib.suppress(Exception):
                fn()
            self.steps[f"heal_{what}"] += 1
            self.timeline.append((int(time.time() * 1000), f"heal {what}"))
            self.quiet_until = time.monotonic() + SESSION_S + 1.0
        self._track_failover()
        kinds, weights = zip(*WEIGHTS.items(), strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        faults = sum(self.faults.values())
        getattr(self, f"_{kind}")()
        self.steps[kind] += 1
        if sum(self.faults.values()) > faults:
            self.timeline.append((int(time.time() * 1000), kind))

    def _track_failover(self) -> None:
        if self.pending_failover is None:
            return
        started, old_session = self.pending_failover
        with contextlib.suppress(Exception):
            got = self.leader()
            if got is not None and got[1] != old_session:
                self.failovers.append(time.monotonic() - started)
                self.pending_failover = None

    def _post(self, path: str, body: dict[str, Any] | None = None) -> None:
        try:
            leader = self.leader()
        except Exception:
            self.rest["no_leader"] += 1
            return
        if leader is None:
            self.rest["no_leader"] += 1
            return
        try:
            r = self.http.post(f"http://{leader[0]}{path}", json=body)
            self.rest[str(r.status_code)] += 1
        except httpx.HTTPError as e:
            self.rest[type(e).__name__] += 1

    def _unload(self) -> None:
        owned = sorted(self.owners())
        if owned:
            self._post(f"/bundles/{self.rng.choice(owned)}/unload")

    def _split(self) -> None:
        owned = sorted(self.owners())
        if owned and len(self.bundles()) < MAX_BUNDLES:
            self._post(f"/bundles/{self.rng.choice(owned)}/split", {"algorithm": "range_equally_divide"})

    def _check(self) -> None:
        # Live sample of what the audit proves exhaustively afterwards: overlapping owned ranges.
        from balancer.bundles import split_bundle_name

        owners = self.owners()
        by_ns: dict[str, list[tuple[int, int, str, str]]] = {}
        for b, broker in owners.items():
            ns, r = split_bundle_name(b)
            by_ns.setdefault(ns, []).append((r.lower, r.upper, b, broker))
        for ranges in by_ns.values():
            ranges.sort()
            for (_, up, b1, o1), (lo, _, b2, o2) in itertools.pairwise(ranges):
                if lo < up and o1 != o2:
                    self.live_double.append(f"{b1}@{o1} / {b2}@{o2}")

    # ---- run ----------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.start()
        since_ms = int(time.time() * 1000)
        end = time.monotonic() + self.args.minutes * 60
        step_s = self.args.step_ms / 1000
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                self.step()
            except Exception as e:  # a read that failed during a fault is a step that saw the fault
                self.steps[f"error_{type(e).__name__}"] += 1
            time.sleep(max(step_s - (time.monotonic() - t0), 0))
        # Heal everything and let the cluster settle before judging the end state.
        for _, _, fn in sorted(self.heals, key=lambda h: h[0]):
            with contextlib.suppress(Exception):
                fn()
        self.heals.clear()
        for p in (*self.serves.values(), *self.agents.values()):
            p.signal(signal.SIGCONT)
            if not p.alive:
                p.start()
        settle = time.monotonic()
        settled = False
        while time.monotonic() - settle < 60:
            with contextlib.suppress(Exception):
                if self.leader() is not None and set(self.owners()) == self.bundles():
                    settled = True
                    break
            time.sleep(0.5)
        end_ms = int(time.time() * 1000)
        final_bundles = len(self.bundles())
        self.stop()
        bound_ms = int((SESSION_S + SHED_INTERVAL_S + OWNERSHIP_POLL_S) * 1000)
        return build_report(self, since_ms, end_ms, settled, final_bundles, bound_ms)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--step-ms", type=float, default=150.0, help="Time between steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="Write the JSON report here too")
    args = ap.parse_args()
    soak = Soak(args)
    try:
        result = soak.run()
    except BaseException:
        soak.stop()
        raise
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    ok = (
        result["doubleOwnersAudit"] == 0
        and result["auditViolations"] == 0
        and result["unownedOverBound"] == 0
        and not result["toolkitDisagreements"]
        and not result["zxidConflicts"]
        and result["settledAfter"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
