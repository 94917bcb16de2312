"""Agents at scale: real ``loadmgr agent`` processes beside synthetic brokers on a real ZooKeeper.

    flock /tmp/loadmgr-heavy.lock nice -n 5 .venv/bin/python bench/agent_scale.py \
        [--bundles 100000] [--namespaces 100] [--synthetic 980] [--agents 20] [--per-agent 500] \
        [--moves 10000] [--steady-s 30] [--heap-mb 1024] [--json out.json]

An embedded ZooKeeper (its transaction log kept) holds a synthetic cluster written node for node
(:mod:`service.demo.synthetic`: ``--synthetic`` brokers own every bundle at first). ``--agents`` real
agent processes start (they own nothing), then ``--per-agent`` bundles each are moved to them as
the leader moves bundles (``ZkExecutor.unload_many``: fenced batches, each assignment with its
agent's hint); the bench plays the synthetic old owners and deletes their nodes. Then, in one run:

* steady state: ZooKeeper requests per real agent per second over ``--steady-s`` seconds with
  nothing changing, counted by the server itself (``cons``: requests received per session; the
  agents' sessions are their broker nodes' ``ephemeralOwner``). It includes the session's pings
  and any load report the agent writes: all an agent costs ZooKeeper, whatever the cluster size;
* one cycle of ``--moves`` moves among the real agents (each agent's bundles rotate to the next
  agent), written as the leader writes them: requests per agent during it (and per move), and the
  time from the first write until every agent's load report shows its new bundles;
* unowned time per move (:mod:`service.zookeeper.forensics.handoff`) from ZooKeeper's transaction log: the
  old owner's delete to the new owner's create, p50/p99/max, over the cycle's moves; with
  ``--audit`` also the full audit (:mod:`service.zookeeper.forensics.audit`, quadratic) finding no
  double owner.

The machine's load average (``os.getloadavg``) is printed with each phase: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.demo.synthetic import SyntheticCluster  # noqa: E402
from service.leader.executors import ZkExecutor  # noqa: E402
from service.zookeeper import paths as P  # noqa: E402
from service.zookeeper.forensics.audit import audit  # noqa: E402
from service.zookeeper.forensics.handoff import handoffs  # noqa: E402
from service.zookeeper.forensics.txnlog import merged_history  # noqa: E402
from service.zookeeper.server.launcher import EmbeddedZooKeeper  # noqa: E402
from service.zookeeper.session.batch import Op, commit_batches  # noqa: E402


class CountingZooKeeper(EmbeddedZooKeeper):
    """The embedded server with ``cons`` (per-connection request counts) whitelisted: bench only."""

    def _write_config(self, tmpdir: Path, port: int) -> Path:
        cfg = super()._write_config(tmpdir, port)
        with cfg.open("a", encoding="utf-8") as f:
            f.write("4lw.commands.whitelist=ruok,mntr,srvr,cons,crst\n")  # the last value wins
            # The synthetic brokers' sessions plus the agents pass ZooKeeper's 60 per client address.
            f.write("maxClientCnxns=0\n")
        return cfg


def load() -> str:
    return "load average {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def received(zk: EmbeddedZooKeeper) -> dict[int, int]:
    """Session id -> requests the server received on it so far."""
    out: dict[int, int] = {}
    for line in zk.command("cons", timeout=10.0).splitlines():
        sid = re.search(r"sid=0x([0-9a-f]+)", line)
        got = re.search(r"recved=(\d+)", line)
        if sid and got:
            out[int(sid.group(1), 16)] = int(got.group(1))
    return out


def server_latency(zk: EmbeddedZooKeeper, sessions: set[int]) -> dict[str, float]:
    """The server's own time per request on the agents' connections since the last ``crst``
    (``cons``: avglat and maxlat, ms, from the request's arrival to its answer): mean of the averages
    and the largest maximum. What the server adds to a move, apart from the agents' processes."""
    avgs: list[float] = []
    top = 0.0
    for line in zk.command("cons", timeout=10.0).splitlines():
        sid = re.search(r"sid=0x([0-9a-f]+)", line)
        avg = re.search(r"avglat=([\d.]+)", line)
        most = re.search(r"maxlat=(\d+)", line)
        if sid and avg and most and int(sid.group(1), 16) in sessions:
            avgs.append(float(avg.group(1)))
            top = max(top, float(most.group(1)))
    return {"avgMs": round(sum(avgs) / len(avgs), 1) if avgs else -1.0, "maxMs": top}


def wait(pred: Any, timeout: float, what: str, interval: float = 0.5) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if pred():
                return time.monotonic() - start
        except Exception:
            pass
        time.sleep(interval)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def reported(synth: SyntheticCluster, agents: list[str]) -> dict[str, set[str]]:
    """What each real agent's load report says it serves (one read per agent)."""
    paths = {a: P.broker_path(a) for a in agents}
    nodes = synth.admin.get_many(list(paths.values()))
    out: dict[str, set[str]] = {}
    for a, path in paths.items():
        got = synth.admin.decode_broker(path, *nodes[path]) if path in nodes else None
        out[a] = set(got.bundles) if got is not None else set()
    return out


def by_release(
    released_ms: list[int], gaps_ms: list[int], start_ms: int, bins: int = 8
) -> list[dict[str, int]]:
    """Unowned time per move in ``bins`` equal spans of release time: where in the cycle the tail is."""
    if not released_ms:
        return []
    first, last = min(released_ms), max(released_ms)
    width = max(1, -(-(last - first + 1) // bins))
    spans: dict[int, list[int]] = {}
    for released, gap in zip(released_ms, gaps_ms, strict=True):
        spans.setdefault((released - first) // width, []).append(gap)
    out = []
    for k in sorted(spans):
        got = sorted(spans[k])
        out.append(
            {
                "fromS": round((first + k * width - start_ms) / 1000, 1),
                "toS": round((first + (k + 1) * width - start_ms) / 1000, 1),
                "moves": len(got),
                "p50Ms": got[len(got) // 2],
                "p99Ms": got[min(len(got) - 1, int(0.99 * len(got)))],
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundles", type=int, default=100_000)
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--synthetic", type=int, default=980, help="synthetic brokers")
    ap.add_argument("--agents", type=int, default=20, help="real agent processes")
    ap.add_argument("--per-agent", type=int, default=500, help="bundles moved to each real agent first")
    ap.add_argument("--moves", type=int, default=10_000, help="moves of the measured cycle")
    ap.add_argument("--steady-s", type=float, default=30.0)
    ap.add_argument("--heap-mb", type=int, default=1024)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--agent-logs", type=Path, help="a directory for each agent's log (default: discarded)")
    ap.add_argument(
        "--audit", action="store_true", help="also run the full (quadratic) transaction-log audit"
    )
    args = ap.parse_args(argv)
    if args.moves > args.agents * args.per_agent:
        ap.error(f"--moves {args.moves} > --agents x --per-agent ({args.agents * args.per_agent})")
    out: dict[str, Any] = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    data_dir = Path(tempfile.mkdtemp(prefix="agent-scale-zk-"))
    procs: list[subprocess.Popen[bytes]] = []
    with CountingZooKeeper(heap_mb=args.heap_mb, data_dir=data_dir) as zk:
        t = time.monotonic()
        synth = SyntheticCluster(
            zk.hosts,
            args.synthetic,
            args.bundles,
            args.namespaces,
            brokers_per_session=20,
            session_timeout_s=30,
        )
        synth.populate()
        print(
            f"populated {args.bundles} bundles on {args.synthetic} synthetic brokers in "
            f"{time.monotonic() - t:.1f} s; {load()}",
            flush=True,
        )
        agents = [f"real-{i:03d}:8080" for i in range(args.agents)]
        env = {**os.environ, "LOADMGR_loadBalancerReportUpdateMinIntervalMillis": "5000"}
        for a in agents:
            cmd = [
                sys.executable,
                "-m",
                "service.commands.cli",
                "agent",
                "--broker-id",
                a,
                "--zk",
                zk.hosts,
                "--chroot",
                "",
                "--session-timeout",
                "10",
                "--report-interval",
                "5",
            ]
            sink: Any = subprocess.DEVNULL
            if args.agent_logs is not None:
                args.agent_logs.mkdir(parents=True, exist_ok=True)
                sink = open(args.agent_logs / f"{a.replace(':', '_')}.log", "wb")  # noqa: SIM115
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=sink))
        try:
            wait(lambda: set(agents) <= set(synth.admin.broker_ids()), 120, "the agents to register")
            sessions = {a: int(synth.admin.client.exists(P.broker_path(a)).ephemeralOwner) for a in agents}
            epoch = synth.admin.bump_epoch("agent-scale-bench")
            executor = ZkExecutor(synth.admin, lambda: epoch)

            # Give each real agent --per-agent bundles (the synthetic owners let go, as agents do).
            names = sorted(synth.owner_of)
            given = {a: names[i * args.per_agent : (i + 1) * args.per_agent] for i, a in enumerate(agents)}
            t = time.monotonic()
            current = synth.admin.read_assignments()
            moves = [(b, synth.owner_of[b], a, "bench") for a, bs in given.items() for b in bs]
            result = executor.unload_many(moves, current)
            assert not result.refused, result.refused[:3]
            releases: dict[int, list[Op]] = {}
            for b, src, _dst, _ in moves:
                group = synth.group_of[src]
                releases.setdefault(id(group), []).append(Op.delete(P.ownership_path(b)))
                del synth.owner_of[b]
            for group in synth.groups:
                if releases.get(id(group)):
                    commit_batches(group.store, releases[id(group)], None)
            want = {a: set(bs) for a, bs in given.items()}
            took = wait(lambda: reported(synth, agents) == want, 600, "the agents to take their bundles")
            print(
                f"{len(moves)} bundles to {len(agents)} real agents: all taken and reported "
                f"{took:.1f} s after the writes ({time.monotonic() - t:.1f} s in all); {load()}",
                flush=True,
            )

            # Steady state.
            time.sleep(3.0)
            before = received(zk)
            t0 = time.monotonic()
            time.sleep(args.steady_s)
            after = received(zk)
            span = time.monotonic() - t0
            per_agent = [(after.get(s, 0) - before.get(s, 0)) / span for s in sessions.values()]
            steady = {
                "seconds": round(span, 1),
                "requestsPerAgentPerSecondMean": round(sum(per_agent) / len(per_agent), 3),
                "requestsPerAgentPerSecondMax": round(max(per_agent), 3),
                "load": load(),
            }
            out["steady"] = steady
            print(
                f"steady state over {span:.0f} s: requests/s per agent mean "
                f"{steady['requestsPerAgentPerSecondMean']}, max {steady['requestsPerAgentPerSecondMax']} "
                f"(pings and report writes included); {load()}",
                flush=True,
            )

            # One cycle: --moves moves, each agent's bundles rotating to the next agent.
            per = args.moves // len(agents)
            cycle = []
            for i, a in enumerate(agents):
                dst = agents[(i + 1) % len(agents)]
                cycle += [(b, a, dst, "bench cycle") for b in given[a][:per]]
            for b, a, dst, _ in cycle:
                want[a].discard(b)
                want[dst].add(b)
            current = synth.admin.read_assignments()
            zk.command("crst", timeout=10.0)  # the server's latency counters: from the cycle on
            before = received(zk)
            start_ms = int(time.time() * 1000)
            t0 = time.monotonic()
            result = executor.unload_many(cycle, current)
            written = time.monotonic() - t0
            assert not result.refused, result.refused[:3]
            wait(
                lambda: reported(synth, agents) == want, 600, "every agent to follow the cycle", interval=0.1
            )
            followed_total = time.monotonic() - t0
            after = received(zk)
            spent = [after.get(s, 0) - before.get(s, 0) for s in sessions.values()]
            out["cycle"] = {
                "moves": len(cycle),
                "writeSeconds": round(written, 2),
                "allFollowedSecondsAfterFirstWrite": round(followed_total, 2),
                "requestsPerAgentMean": round(sum(spent) / len(spent), 1),
                "requestsPerAgentMax": max(spent),
                "movesPerAgent": 2 * per,  # each agent gives `per` and takes `per`
                "requestsPerMovePerAgent": round(sum(spent) / len(spent) / (2 * per), 2),
                "serverLatencyMs": server_latency(zk, set(sessions.values())),
                "load": load(),
            }
            print(
                f"cycle of {len(cycle)} moves: written in {written:.2f} s, every agent's report shows its "
                f"new bundles {followed_total:.2f} s after the first write; requests per agent "
                f"{out['cycle']['requestsPerAgentMean']} mean, {out['cycle']['requestsPerAgentMax']} max for "
                f"{2 * per} moves each (given + taken); server time per agent request (avg, max ms) "
                f"{out['cycle']['serverLatencyMs']}; {load()}",
                flush=True,
            )
            end_ms = int(time.time() * 1000)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
            synth.close(purge=False)
        logs = sorted(data_dir.glob("version-2/log.*"))
        history = [t for t in merged_history(logs).txns if t.time_ms <= end_ms]  # not the agents' stop
    shutil.rmtree(data_dir, ignore_errors=True)
    gaps = handoffs(history, since_ms=start_ms)
    out["handoffByRelease"] = by_release(gaps.released_ms, gaps.gaps_ms, start_ms)
    out["handoff"] = gaps.summary()
    # The full audit compares every ownership create with every node held (quadratic: minutes at
    # 10,000 bundles); this bench splits nothing, so no two ranges overlap, ZooKeeper refuses a second
    # create on one path, and the audit's other rules are the integration tier's (test_move_handoff).
    double = len(audit(history).double_owners) if args.audit else None
    out["doubleOwners"] = double
    print(
        f"unowned time per move (txn log, delete -> create): {gaps.summary()}; "
        f"double owners: {'not audited (--audit)' if double is None else double}",
        flush=True,
    )
    print(
        "by release time (s after the first write: moves, p50 / p99 ms): "
        + ", ".join(
            f"{b['fromS']}-{b['toS']}: {b['moves']}, {b['p50Ms']} / {b['p99Ms']}"
            for b in out["handoffByRelease"]
        ),
        flush=True,
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    ok = not double and gaps.percentile(0.5) is not None
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
