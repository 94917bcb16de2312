"""loadmgr's drain of one of three brokers against Pulsar's own graceful shutdown of the same broker,
under the same producers and consumers, on real Pulsar 4.0.7 brokers: ModularLoadManagerImpl, or with
``--load-manager extensible`` ExtensibleLoadManagerImpl (PIP-192).

Each seed gets a fresh cluster (3 brokers, 0.4 core each in its own cgroup when it can) and one
namespace, ``public/drain``, of ``--bundles`` bundles, two topics each, every bundle owned by the third
broker. The seed picks each bundle's rate (``plan``): two bundles idle (producers and consumers
connected, nothing sent), the others 50-200 msg/s per topic. Producers number their messages and a
consumer on every topic checks the numbers (:mod:`bench.head_to_head_clients`), so an acknowledged
message never received counts as lost.

Then, on the same cluster and the same clients:

1. ``drain``: ``loadmgr serve --mode pulsar`` (shedding off: every move is the drain's; Pulsar's real
   timings, ``loadBalancerUnloadSpacingSeconds`` at its default unless ``--spacing``) drains the
   broker; serve is stopped after it;
2. every bundle goes back to the broker (``unload?destinationBroker``), clients settle ``--settle-s``;
3. ``shutdown``: ``POST /admin/v2/brokers/shutdown?maxConcurrentUnloadPerSec=N`` on that broker.

The drain goes first on purpose: the shutdown then meets brokers that have served these topics before
(warm), which favours Pulsar's side, not loadmgr's.

On Extensible brokers (``--load-manager extensible``) serve recognises the kind by itself: the drain's
moves, and step 2's, are transfers (an unload with a destination: the source tells its clients the
new owner, no lookup), and the shutdown is Extensible's own graceful path (the state channel hands
every bundle the broker owns to a new owner at once, then the broker leaves the registry:
``maxConcurrentUnloadPerSec`` paces none of them).

One window rule for both sides: from the request (drain POST / shutdown POST) until every bundle's
topic is looked up on another broker (Pulsar's own lookup, polled every ``--poll-s``), plus
``--tail-s`` so that the messages queued in a client while its bundle moved are counted. Publish
latency is over the messages *sent* in that window. Beside it, what no window can dilute: the
longest publish gap per bundle and the number of messages that took over 500 ms and over 1 s.

``python bench/drain_vs_shutdown.py --seeds 1 2 3 --out bench/results/drain`` writes
``<out>/seed-N.json`` (figures, per-bundle gaps and moves, a per-topic timeline of slow messages),
the brokers' and serve's logs under ``<out>/seed-N/``, and ``<out>/table.md``. ``--out`` defaults to
``bench/results/drain`` for Modular brokers and ``bench/results/drain/extensible`` for Extensible ones,
and a run refuses a directory holding another load manager's seeds, so neither overwrites the other.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.seed_report import load_of, md_head, md_row, percentile, read_runs, write_report

ROOT = Path(__file__).resolve().parents[1]
NS = "public/drain"
DEFAULT_OUT = {"modular": "bench/results/drain", "extensible": "bench/results/drain/extensible"}
SLOW_S = 0.1  # a message slower than this goes into the timeline


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def plan(seed: int, bundles: int) -> list[float]:
    """Per-bundle rate per topic (msg/s): two idle bundles, the others 50-200."""
    rng = random.Random(seed)
    rates = [rng.choice([50.0, 100.0, 150.0, 200.0]) for _ in range(bundles)]
    for i in rng.sample(range(bundles), min(2, bundles)):
        rates[i] = 0.0
    return rates


def wait_for(pred: Any, timeout: float, what: str, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except Exception as e:  # a lookup mid-move is refused by Pulsar; the next poll answers
            last = e
        else:
            if last:
                return last
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


# ---- measuring one operation (drain or shutdown) ---------------------------------------------------------
def follow(
    admin: Any, probes: Mapping[str, str], target: str, t0: float, poll_s: float, timeout: float
) -> tuple[float, dict[str, float]]:
    """Poll Pulsar's lookup of one topic per bundle until none is on ``target``; returns the time that
    happened and, per bundle, when its lookup first answered another broker (seconds after ``t0``)."""
    off: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for bundle, topic in probes.items():
            if bundle in off:
                continue
            with contextlib.suppress(Exception):
                if admin.lookup(topic) != target:
                    off[bundle] = time.monotonic() - t0
        if len(off) == len(probes):
            return time.monotonic(), off
        time.sleep(poll_s)
    raise RuntimeError(f"bundles still on {target} after {timeout:.0f} s: {sorted(set(probes) - set(off))}")


def measure(
    work: Any,
    topics: Mapping[str, str],
    t0: float,
    t1: float,
    mark: Mapping[str, int],
    end_mark: Mapping[str, int] | None,
) -> dict[str, Any]:
    """The clients' figures for messages sent in [t0, t1)."""
    lat: list[float] = []
    timeline: dict[str, list[tuple[float, float]]] = {}
    for topic, rec in work.records.items():
        slow = []
        n = min(len(rec.sent_at), len(rec.latency))  # the client's callbacks may be appending
        for sent, latency in zip(rec.sent_at[:n], rec.latency[:n], strict=True):
            if t0 <= sent < t1:
                lat.append(latency)
                if latency >= SLOW_S:
                    slow.append((round(sent - t0, 3), round(latency, 3)))
        timeline[topic] = slow
    gaps: dict[str, list[tuple[float, float]]] = {}
    for topic, bundle in topics.items():
        for start, length in work.records[topic].gaps:
            if t0 <= start < t1:
                gaps.setdefault(bundle, []).append((round(start - t0, 3), round(length, 3)))
    failed = 0
    for topic, seqs in work.failed_seqs.items():
        lo = mark.get(topic, 0)
        hi = end_mark.get(topic, math.inf) if end_mark is not None else math.inf
        failed += sum(1 for s in seqs if lo <= s < hi)
    return {
        "sent_in_window": len(lat),
        "p50_ms": _ms(percentile(lat, 50)),
        "p99_ms": _ms(percentile(lat, 99)),
        "p999_ms": _ms(percentile(lat, 99.9)),
        "max_ms": _ms(max(lat, default=None)),
        "over_500ms": sum(1 for x in lat if x > 0.5),
        "over_1s": sum(1 for x in lat if x > 1.0),
        "failed": failed,
        "gaps": gaps,  # per bundle: (start after t0, length), gaps over 0.2 s
        "longest_gap_s": max((g for gs in gaps.values() for _, g in gs), default=0.0),
        "timeline": timeline,  # per topic: (sent after t0, latency) of messages >= SLOW_S
    }


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 1)


# ---- one seed -----------------------------------------------------------------------------------------
def start_serve(
    cluster: Any, run_dir: Path, spacing: float | None, root: Path = ROOT
) -> tuple[subprocess.Popen[bytes], str]:
    from service.zookeeper.server.process import free_port

    port = free_port()
    env = {
        **os.environ,
        "LOADMGR_MODE": "pulsar",
        "LOADMGR_ZK_HOSTS": str(cluster.zk_hosts),
        "LOADMGR_PULSAR_ADMIN_URL": ",".join(cluster.web_urls),
        "LOADMGR_HTTP_PORT": str(port),
        "LOADMGR_HISTORY_ENABLED": "false",
        "LOADMGR_PULSAR_CHECK_INTERVAL_S": "5",
        "LOADMGR_loadBalancerSheddingEnabled": "false",
    }
    if spacing is not None:
        env["LOADMGR_loadBalancerUnloadSpacingSeconds"] = f"{spacing:g}"
    log = open(run_dir / "serve.log", "wb")  # noqa: SIM115 - the child's log
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "serve"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    return proc, f"http://127.0.0.1:{port}"


def run_seed(seed: int, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    import httpx

    from bench.head_to_head_clients import SequenceChecker, SequencedWorkload, stop_run
    from service.commands.pulsar_cluster import LOAD_MANAGERS
    from service.pulsar.admin import PulsarAdmin
    from service.pulsar.cluster import PulsarCluster
    from service.pulsar.netns import netns_unavailable
    from service.pulsar.processes import cgroups_writable
    from service.pulsar.workload import topics_for_bundles

    cpus = [args.cpus] * 3 if cgroups_writable() else None
    # Either kind with its own shedding and auto-split off (the launcher's defaults): every move is
    # the drain's, the shutdown's or this bench's.
    cluster = PulsarCluster(
        brokers_count=3,
        broker_settings={"loadManagerClassName": LOAD_MANAGERS[args.load_manager]},
        broker_cpus=cpus,
        own_hosts=netns_unavailable() is None,
    )
    out: dict[str, Any] = {
        "seed": seed,
        "load_manager": args.load_manager,
        "started_utc": utc_now(),
        "uptime_start": uptime(),
    }
    serve: subprocess.Popen[bytes] | None = None
    work: Any = None
    checker: Any = None
    began = time.monotonic()
    try:
        cluster.start()
        print(f"[seed {seed}] cluster up in {cluster.startup_seconds:.0f} s", flush=True)
        admin = PulsarAdmin(cluster.web_urls)
        admin.request("PUT", f"/admin/v2/namespaces/{NS}", body={"bundles": {"numBundles": args.bundles}})
        ranges = admin.bundles(NS)
        found = topics_for_bundles(NS, ranges, 2, prefix=f"s{seed}-")
        per_bundle = plan(seed, len(ranges))
        topics = {t: f"{NS}/{r}" for t, r in found.items()}
        rates = {t: per_bundle[ranges.index(r)] for t, r in found.items()}
        out["rates"] = {f"{NS}/{r}": per_bundle[i] * 2 for i, r in enumerate(ranges)}
        broker = cluster.brokers[-1]
        target = broker.broker_id
        probes = {b: next(t for t, bb in topics.items() if bb == b) for b in sorted(set(topics.values()))}

        def all_on_target() -> bool:
            off = {b for b, t in probes.items() if admin.lookup(t) != target}
            for b in off:
                with contextlib.suppress(Exception):
                    admin.unload(b, target)
            return not off

        # Warm-up: a broker of a fresh cluster pays a one-off cost the first time it serves this
        # namespace's traffic (round 1: the first bundle with traffic sent to each broker had the
        # drain's longest gaps, 1.1-6.6 s, the later ones 0.3-0.9 s), which production brokers
        # have paid long ago; and the shutdown, second, would meet brokers the drain warmed. So every
        # bundle first serves its traffic on one of the two other brokers for --warm-s.
        others = [b.broker_id for b in cluster.brokers if b is not broker]
        warm_on = {b: others[i % len(others)] for i, b in enumerate(sorted(probes))}

        def spread() -> bool:
            off = {b for b, t in probes.items() if admin.lookup(t) != warm_on[b]}
            for b in off:
                with contextlib.suppress(Exception):
                    admin.unload(b, warm_on[b])
            return not off

        checker = SequenceChecker(cluster.service_url, topics).start()
        work = SequencedWorkload(cluster.service_url, rates).start()
        if args.warm_s > 0:
            wait_for(spread, 180, "every bundle on one of the other brokers", every=3)
            time.sleep(args.warm_s)
        wait_for(all_on_target, 180, f"every bundle on {target}", every=3)
        time.sleep(args.settle_s)

        # ---- loadmgr's drain -----------------------------------------------------------------
        serve, url = start_serve(cluster, run_dir, args.spacing, Path(args.serve_root))
        http = httpx.Client(base_url=url, timeout=30)
        wait_for(lambda: http.get("/readyz").json()["status"] == "ready", 120, "serve ready")
        busy = {b for b, rate in out["rates"].items() if rate > 0}

        def reported() -> bool:
            # the drained broker's load report shows which bundles carry traffic (idle ones go first)
            rows = http.get("/bundles", params={"namespace": NS}).json()
            return all((r["msgRateIn"] > 0) == (r["bundle"] in busy) for r in rows) and len(rows) == len(
                probes
            )

        wait_for(reported, 120, "the load report")
        # Nothing moves for --quiet-s: the machine's own noise in the same measure, for scale.
        q0 = time.monotonic()
        mark_quiet = {t: work.next_seq[t] for t in topics}
        time.sleep(args.quiet_s)
        quiet = measure(work, topics, q0, time.monotonic(), mark_quiet, None)
        quiet.pop("timeline")
        out["quiet"] = {k: v for k, v in quiet.items() if k != "failed"}
        out["uptime_drain"] = uptime()
        with contextlib.suppress(Exception):
            out["pulsar_leader_drain"] = admin.leader_broker().get("brokerId")
        work.mark("drain")
        mark_drain = dict(work.marks["drain"])
        wall0 = time.time()
        t0 = time.monotonic()
        r = http.post(f"/brokers/{target}/drain")
        if r.status_code != 200:
            raise RuntimeError(f"drain refused: {r.status_code} {r.text}")
        done_at, off = follow(admin, probes, target, t0, args.poll_s, args.timeout_s)
        state = wait_for(
            lambda: (d := http.get(f"/brokers/{target}/drain").json())["state"] == "done" and d,
            120,
            "drain done",
        )
        time.sleep(args.tail_s)
        t1 = done_at + args.tail_s
        decisions = http.get("/decisions", params={"limit": "500", "kind": "drain"}).json()["decisions"]
        moves = [
            {
                "bundle": d["bundle"],
                "destination": d["destination"],
                "released_s": round(((d.get("releasedMs") or d["timeMs"]) / 1000) - wall0, 3),
                "state": d.get("state"),
                "reason": d["explanation"]["reason"],
            }
            for d in decisions
            if d["bundle"] and d["applied"]
        ]
        moves.sort(key=lambda m: m["released_s"])
        landed = {}
        for b, t in probes.items():
            with contextlib.suppress(Exception):
                landed[b] = admin.lookup(t)
        http.post(f"/brokers/{target}/uncordon")
        http.close()
        serve.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            serve.wait(timeout=20)
        serve = None

        # ---- every bundle back on the same broker, then Pulsar's shutdown ------------------------
        wait_for(all_on_target, 180, f"every bundle back on {target}", every=3)
        time.sleep(args.settle_s)
        out["uptime_shutdown"] = uptime()
        with contextlib.suppress(Exception):
            out["pulsar_leader_shutdown"] = admin.leader_broker().get("brokerId")
        work.mark("shutdown")
        mark_shut = dict(work.marks["shutdown"])
        drain_fig = measure(work, topics, t0, t1, mark_drain, mark_shut)
        drain_fig.update(
            time_s=round(done_at - t0, 1),
            moves=moves,
            off_target_s=off,
            landed=landed,
            drain_state={k: state.get(k) for k in ("state", "moved", "total", "givenUp", "message")},
        )
        s0 = time.monotonic()

        def shut() -> None:
            # Pulsar answers once the broker has closed: asked from a thread, so that the lookups
            # are followed while the broker unloads
            try:
                out["shutdown_call"] = admin.shutdown_broker(
                    broker.web_url, max_concurrent_unload_per_sec=args.max_unload_per_sec
                )
            except Exception as e:
                out["shutdown_call"] = repr(e)[:300]
            out["shutdown_answered_s"] = round(time.monotonic() - s0, 2)

        asker = threading.Thread(target=shut, daemon=True)
        asker.start()
        admin_rest = PulsarAdmin([b.web_url for b in cluster.brokers if b is not broker])
        s_done, s_off = follow(admin_rest, probes, target, s0, args.poll_s, args.timeout_s)
        time.sleep(args.tail_s)
        s1 = s_done + args.tail_s
        asker.join(timeout=120)
        shut_fig = measure(work, topics, s0, s1, mark_shut, None)
        shut_fig.update(time_s=round(s_done - s0, 1), moves=len(probes), off_target_s=s_off)
        time.sleep(3)
        work.stop()
        missing = checker.drain(work.acked_seqs)
        lost = {"drain": 0, "shutdown": 0, "outside": 0}
        for topic, seqs in missing.items():
            for s in seqs:
                if mark_drain[topic] <= s < mark_shut[topic]:
                    lost["drain"] += 1
                elif s >= mark_shut[topic]:
                    lost["shutdown"] += 1
                else:
                    lost["outside"] += 1
        drain_fig["lost_acked"] = lost["drain"]
        shut_fig["lost_acked"] = lost["shutdown"]
        out.update(
            topics=topics,
            target=target,
            drain=drain_fig,
            shutdown=shut_fig,
            lost_outside=lost["outside"],
            acked=work.acked(),
            checker=checker.summary(),
            spacing_s=args.spacing,
            warm_s=args.warm_s,
            max_unload_per_sec=args.max_unload_per_sec,
            tail_s=args.tail_s,
            uptime_end=uptime(),
            wall_s=round(time.monotonic() - began),
        )
        return out
    finally:
        stop_run(serve, work, checker)
        with contextlib.suppress(Exception):
            for f in cluster.data_dir.glob("broker-*.log"):
                (run_dir / f.name).write_bytes(f.read_bytes()[-3_000_000:])
        cluster.stop()


# ---- report -------------------------------------------------------------------------------------------
def per_bundle_gap(fig: Mapping[str, Any]) -> float | None:
    """The median over moved bundles with traffic of each one's longest gap."""
    longest = [max(g for _, g in gs) for gs in fig["gaps"].values() if gs]
    return percentile(longest, 50) if longest else None


def table(runs: list[dict[str, Any]]) -> str:
    def med_worst(values: list[Any]) -> str:
        vs = [v for v in values if v is not None]
        return "-" if not vs else f"{percentile(vs, 50):g} / {max(vs):g}"

    head = (
        "seed",
        "side",
        "started (UTC)",
        "load (1/5/15 min)",
        "time (s)",
        "moves",
        "failed sends",
        "lost acked",
        "longest gap per moved bundle (s): median / max",
        "p99 in window (ms)",
        "p99.9 (ms)",
        "msgs > 500 ms",
        "msgs > 1 s",
        "sent in window",
        "no move, 30 s before: p99 (ms) / msgs > 500 ms",
    )
    rows = md_head(head)
    for r in runs:
        for side in ("drain", "shutdown"):
            f = r[side]
            load = load_of(r.get(f"uptime_{side}", r["uptime_start"]))
            moves = len(f["moves"]) if isinstance(f["moves"], list) else f["moves"]
            cells = (
                r["seed"],
                side,
                r["started_utc"][11:],
                load,
                f["time_s"],
                moves,
                f["failed"],
                f["lost_acked"],
                f"{per_bundle_gap(f) or 0:.2f} / {f['longest_gap_s']:.2f}",
                f["p99_ms"],
                f["p999_ms"],
                f["over_500ms"],
                f["over_1s"],
                f["sent_in_window"],
                f"{r['quiet']['p99_ms']} / {r['quiet']['over_500ms']}" if "quiet" in r else "-",
            )
            rows.append(md_row(cells))
    rows.append("")
    head2 = (
        "side",
        "runs",
        "time (s)",
        "failed sends",
        "lost acked",
        "longest gap (s)",
        "p99 (ms)",
        "msgs > 1 s",
    )
    rows += md_head([*head2[:2], *(f"{h}: median / worst" for h in head2[2:])])
    keys = ("time_s", "failed", "lost_acked", "longest_gap_s", "p99_ms", "over_1s")
    for side in ("drain", "shutdown"):
        fs = [r[side] for r in runs]
        cells2 = [side, str(len(fs))] + [med_worst([f[k] for f in fs]) for k in keys]
        rows.append(md_row(cells2))
    ratios = [
        r["drain"]["p99_ms"] / r["shutdown"]["p99_ms"]
        for r in runs
        if r["drain"]["p99_ms"] and r["shutdown"]["p99_ms"]
    ]
    if ratios:
        rows.append("")
        rows.append(
            "p99 drain / p99 shutdown per seed: "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + f" (target <= 0.5; median {percentile(ratios, 50):.2f}, worst {max(ratios):.2f})"
        )
    return "\n".join(rows) + "\n"


def moves_table(run: Mapping[str, Any], topics_of: Mapping[str, str] | None = None) -> str:
    """Per seed and side, one row per bundle: its rate, when the drain released its move (the
    shutdown's own unloads are seen only by the clients), when Pulsar's lookup first answered
    another broker, its publish gaps, and its messages slower than 500 ms / 1 s (seconds after the
    request)."""
    rows = [
        f"seed {run['seed']}\n\n| side | bundle | msg/s | move released (s) | lookup elsewhere (s) | "
        "gaps > 0.2 s: start (s) x length (s) | msgs > 500 ms | msgs > 1 s | slowest (ms) |",
        "|" + "---|" * 9,
    ]
    for side in ("drain", "shutdown"):
        f = run[side]
        released = {m["bundle"]: m["released_s"] for m in f["moves"]} if isinstance(f["moves"], list) else {}
        for bundle in sorted(
            run["rates"], key=lambda b: (released.get(b, 1e9), f["off_target_s"].get(b, 1e9))
        ):
            topics = [t for t in f["timeline"] if (topics_of or {}).get(t) == bundle]
            slow = [lat for t in topics for _, lat in f["timeline"][t]]
            gaps = " ".join(f"{a:.1f}x{g:.2f}" for a, g in f["gaps"].get(bundle, []))
            rows.append(
                f"| {side} | {bundle.rsplit('/', 1)[1]} | {run['rates'][bundle]:g} | "
                f"{released.get(bundle, '-')} | "
                f"{f['off_target_s'].get(bundle, '-')} | {gaps or '-'} | {sum(1 for x in slow if x > 0.5)} | "
                f"{sum(1 for x in slow if x > 1.0)} | {round(max(slow, default=0) * 1000)} |"
            )
    return "\n".join(rows) + "\n"


def other_kind(root: Path, seeds: Sequence[int], load_manager: str) -> str | None:
    """Why ``root`` must not take this run: a seed's results there from another load manager's
    brokers (rounds before ``--load-manager`` existed ran Modular ones)."""
    for seed in seeds:
        f = root / f"seed-{seed}.json"
        if not f.exists():
            continue
        try:
            kind = json.loads(f.read_text(encoding="utf-8")).get("load_manager", "modular")
        except (OSError, ValueError, AttributeError) as e:
            return f"{f} is unreadable ({e})"
        if kind != load_manager:
            return f"{f} holds a run on {kind} brokers, this one runs {load_manager}"
    return None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument(
        "--load-manager",
        choices=sorted(DEFAULT_OUT),
        default="modular",
        help="the brokers' load manager: ModularLoadManagerImpl or ExtensibleLoadManagerImpl",
    )
    p.add_argument("--bundles", type=int, default=8)
    p.add_argument("--cpus", type=float, default=0.4, help="each broker's CPU quota (cores)")
    p.add_argument(
        "--spacing", type=float, default=None, help="loadBalancerUnloadSpacingSeconds (default: serve's)"
    )
    p.add_argument(
        "--max-unload-per-sec", type=int, default=1, help="the shutdown's maxConcurrentUnloadPerSec"
    )
    p.add_argument("--settle-s", type=float, default=10.0)
    p.add_argument(
        "--warm-s", type=float, default=30.0, help="traffic on the other brokers first (0: none, as round 1)"
    )
    p.add_argument("--tail-s", type=float, default=5.0)
    p.add_argument("--quiet-s", type=float, default=30.0, help="a window with no move, before the drain")
    p.add_argument("--poll-s", type=float, default=0.5)
    p.add_argument("--timeout-s", type=float, default=600.0)
    p.add_argument(
        "--serve-root", default=str(ROOT), help="the checkout whose `loadmgr serve` drains (a baseline's)"
    )
    p.add_argument("--out", help="default: bench/results/drain (modular), bench/results/drain/extensible")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    root = Path(args.out or DEFAULT_OUT[args.load_manager])
    if not args.report_only:
        clash = other_kind(root, args.seeds, args.load_manager)
        if clash:
            p.error(f"--out {root}: {clash}; give another --out to keep those results")
    root.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for seed in args.seeds:
            run_dir = root / f"seed-{seed}"
            run_dir.mkdir(parents=True, exist_ok=True)
            print(f"[seed {seed}] {utc_now()} {uptime()}", flush=True)
            result = run_seed(seed, args, run_dir)
            (root / f"seed-{seed}.json").write_text(json.dumps(result), encoding="utf-8")
            d, s = result["drain"], result["shutdown"]
            for side, f in (("drain", d), ("shutdown", s)):
                print(
                    f"[seed {seed}] {side}: {f['time_s']} s, p99 {f['p99_ms']} ms, longest gap "
                    f"{f['longest_gap_s']} s, failed {f['failed']}, lost {f['lost_acked']}",
                    flush=True,
                )
    runs = read_runs(root, args.seeds)
    write_report(root, table(runs) + "\n" + "\n".join(moves_table(r, r.get("topics")) for r in runs))


if __name__ == "__main__":
    main()
