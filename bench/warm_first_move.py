"""Does warming a destination with Pulsar's health check shorten the first move into it? An A/B on real
Pulsar 4.0.7 brokers (ModularLoadManagerImpl), the clients' own figures.

Each seed gets a fresh cluster of 4 brokers (0.4 core each in its own cgroup when it can, own network
namespaces when it can) and one namespace, ``public/warm``, of ``--bundles`` bundles, two topics each at
``--rate`` msg/s, every bundle on the first broker before any client connects (so no other broker has
served a topic yet). Producers number their messages, a consumer on every topic checks the numbers
(:mod:`bench.head_to_head_clients`). Then, ``--between-s`` apart, three unloads with a destination:

* ``cold``: a bundle to a broker that has never served a topic, unloaded at once;
* ``warmed``: a bundle to another such broker, after loadmgr's warm-up (:mod:`service.pulsar.warm_up`:
  ``GET /admin/v2/brokers/health`` on it), the same executor code ``loadmgr serve`` runs;
* ``second``: a second bundle to the ``cold`` broker, which has served this namespace since.

The seed decides which broker plays which part (rotating over the three) and whether ``cold`` or
``warmed`` goes first. Per move:
the longest publish gap among its topics, and its topics' messages slower than 0.5 s and 1 s from the
unload to ``--between-s`` after it. ``python bench/warm_first_move.py --seeds 1 2 3 --out
bench/results/warm`` writes ``<out>/seed-N.json`` and ``<out>/table.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.drain_vs_shutdown import uptime, utc_now, wait_for
from bench.seed_report import load_of, md_head, md_row, percentile, read_runs, write_report

NS = "public/warm"
ARMS = ("cold", "warmed", "second")


def move_figures(work: Any, topics: list[str], t0: float, t1: float) -> dict[str, Any]:
    lat: list[float] = []
    gaps: list[float] = []
    for topic in topics:
        rec = work.records[topic]
        n = min(len(rec.sent_at), len(rec.latency))
        lat += [x for s, x in zip(rec.sent_at[:n], rec.latency[:n], strict=True) if t0 <= s < t1]
        gaps += [g for start, g in rec.gaps if t0 - 1 <= start < t1]
    return {
        "longest_gap_s": round(max(gaps, default=0.0), 3),
        "over_500ms": sum(1 for x in lat if x > 0.5),
        "over_1s": sum(1 for x in lat if x > 1.0),
        "max_ms": round(max(lat, default=0.0) * 1000, 1),
        "p99_ms": round((percentile(lat, 99) or 0.0) * 1000, 1),
        "sent": len(lat),
    }


def run_seed(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from bench.head_to_head_clients import SequenceChecker, SequencedWorkload, stop_run
    from service.pulsar.admin import PulsarAdmin, PulsarAdminExecutor
    from service.pulsar.cluster import PulsarCluster
    from service.pulsar.netns import netns_unavailable
    from service.pulsar.processes import cgroups_writable
    from service.pulsar.warm_up import Warmer
    from service.pulsar.workload import topics_for_bundles

    rng = random.Random(seed)
    cpus = [args.cpus] * 4 if cgroups_writable() else None
    cluster = PulsarCluster(brokers_count=4, broker_cpus=cpus, own_hosts=netns_unavailable() is None)
    out: dict[str, Any] = {"seed": seed, "started_utc": utc_now(), "uptime_start": uptime()}
    work: Any = None
    checker: Any = None
    try:
        cluster.start()
        admin = PulsarAdmin(cluster.web_urls)
        admin.request("PUT", f"/admin/v2/namespaces/{NS}", body={"bundles": {"numBundles": args.bundles}})
        ranges = admin.bundles(NS)
        found = topics_for_bundles(NS, ranges, 2, prefix=f"w{seed}-")
        topics_of: dict[str, list[str]] = {}
        for t, r in found.items():
            topics_of.setdefault(f"{NS}/{r}", []).append(t)
        home = cluster.brokers[0].broker_id
        probes = {b: ts[0] for b, ts in topics_of.items()}

        def all_home() -> bool:
            off = {b for b, t in probes.items() if admin.lookup(t) != home}
            for b in off:
                with contextlib.suppress(Exception):
                    admin.unload(b, home)
            return not off

        wait_for(all_home, 180, f"every bundle on {home}", every=3)
        checker = SequenceChecker(cluster.service_url, dict.fromkeys(found, NS)).start()
        work = SequencedWorkload(cluster.service_url, dict.fromkeys(found, args.rate)).start()
        time.sleep(args.settle_s)
        wait_for(all_home, 60, f"every bundle still on {home}", every=3)
        # Roles rotate with the seed (seeds 1-3 of the first run drew the same two brokers each time).
        others = [b.broker_id for b in cluster.brokers[1:]]
        cold_to, warm_to = others[seed % 3], others[(seed + 1) % 3]
        bundles = sorted(topics_of)
        rng.shuffle(bundles)
        first = ["cold", "warmed"] if seed % 2 else ["warmed", "cold"]
        order = [*first, "second"]
        warm_results: list[tuple[str, float]] = []
        warmer = Warmer(admin.status, "http", 10.0, on_result=lambda r, s: warm_results.append((r, s)))
        plain = PulsarAdminExecutor(admin)
        warming = PulsarAdminExecutor(admin, warmer=warmer)
        moves: dict[str, Any] = {}
        for arm, bundle in zip(order, bundles, strict=False):
            dest = warm_to if arm == "warmed" else cold_to
            t0 = time.monotonic()
            (warming if arm == "warmed" else plain).unload(bundle, home, dest, f"bench {arm}")
            unloaded = time.monotonic()
            wait_for(lambda b=bundle, d=dest: admin.lookup(probes[b]) == d, 60, f"{bundle} on {dest}", 0.5)
            time.sleep(max(0.0, args.between_s - (time.monotonic() - t0)))
            fig = move_figures(work, topics_of[bundle], unloaded, time.monotonic())
            # the health check (warmed only) plus the unload call itself
            fig.update(bundle=bundle, destination=dest, warm_up_and_unload_s=round(unloaded - t0, 3))
            moves[arm] = fig
            print(f"[seed {seed}] {arm}: {fig}", flush=True)
        time.sleep(3)
        work.stop()
        missing = checker.drain(work.acked_seqs)
        out.update(
            moves=moves,
            order=order,
            warm_results=warm_results,
            failed=sum(len(v) for v in work.failed_seqs.values()),
            lost_acked=sum(len(v) for v in missing.values()),
            acked=work.acked(),
            uptime_end=uptime(),
        )
        return out
    finally:
        stop_run(None, work, checker)
        cluster.stop()


def table(runs: list[dict[str, Any]]) -> str:
    head = (
        "seed",
        "load at start",
        "order",
        *(f"{a}: longest gap (s) / msgs > 1 s" for a in ARMS),
        "warm-up + unload call (s)",
        "cold / warmed broker",
        "failed",
        "lost acked",
    )
    rows = md_head(head)
    for r in runs:
        m = r["moves"]
        cells = [
            str(r["seed"]),
            load_of(r["uptime_start"]),
            " > ".join(r["order"]),
            *(f"{m[a]['longest_gap_s']:.2f} / {m[a]['over_1s']}" for a in ARMS),
            f"{m['warmed'].get('warm_up_and_unload_s', m['warmed'].get('warm_up_s', 0)):.2f}",
            f"{m['cold']['destination']} / {m['warmed']['destination']}",
            str(r["failed"]),
            str(r["lost_acked"]),
        ]
        rows.append(md_row(cells))
    for a in ARMS:
        gaps = [r["moves"][a]["longest_gap_s"] for r in runs]
        if gaps:
            rows.append(f"\n{a}: longest gap median {percentile(gaps, 50):.2f} s, worst {max(gaps):.2f} s")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--bundles", type=int, default=6)
    p.add_argument("--rate", type=float, default=100.0, help="msg/s per topic")
    p.add_argument("--cpus", type=float, default=0.4)
    p.add_argument("--settle-s", type=float, default=20.0)
    p.add_argument("--between-s", type=float, default=20.0)
    p.add_argument("--out", default="bench/results/warm")
    p.add_argument("--report-only", action="store_true")
    args = p.parse_args(argv)
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        for seed in args.seeds:
            print(f"[seed {seed}] {utc_now()} {uptime()}", flush=True)
            (root / f"seed-{seed}.json").write_text(json.dumps(run_seed(seed, args)), encoding="utf-8")
    write_report(root, table(read_runs(root, args.seeds)))


if __name__ == "__main__":
    main()
