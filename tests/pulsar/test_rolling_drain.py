"""Decommissioning a broker on real Pulsar brokers: ``loadmgr brokers drain B --then-shutdown --wait``
under producers and consumers, end to end.

The CLI drains the broker through serve's REST (idle bundles first, the others one at a time at the
tier's sped-up spacing), and once only heartbeat namespaces are left serve asks Pulsar for the
broker's own graceful shutdown. Judged from Pulsar and the clients: every bundle of the namespace
moved by the drain (none left for the shutdown to unload), the broker gone from Pulsar's registry,
Pulsar's lookups answering the other brokers, 0 failed sends, every acknowledged message received by
its consumer (sequence-checked), the longest publish gap per bundle and the p99 publish latency while
bundles moved. The comparison with Pulsar's own shutdown of the same broker under the same load, at
Pulsar's real timings, is ``bench/drain_vs_shutdown.py`` (BENCHMARKS.md, "Drain vs Pulsar's graceful
shutdown"). The module's cluster ends with two brokers: nothing runs after it on that cluster.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from balancer.bundles import heartbeat_broker
from bench.head_to_head_clients import SequenceChecker, SequencedWorkload
from service.pulsar.admin import PulsarAdmin
from service.pulsar.cluster import PulsarCluster
from service.pulsar.workload import topics_for_bundles
from tests.pulsar.conftest import ROOT, Serve, wait_for
from tests.timing import scaled

pytestmark = pytest.mark.timeout(600)

RATE = 50.0  # messages/s per topic
BUNDLES = 6
IDLE = 2  # bundles whose clients are connected but send nothing
CLI = [sys.executable, "-m", "service"]


def test_drain_then_shutdown_hands_the_broker_to_pulsars_graceful_shutdown_with_nothing_lost(
    pulsar_cluster: PulsarCluster, serve: Callable[..., Serve]
) -> None:
    admin = PulsarAdmin([b.web_url for b in pulsar_cluster.brokers if b.running])
    ns = "public/rolling"
    admin.request("PUT", f"/admin/v2/namespaces/{ns}", body={"bundles": {"numBundles": BUNDLES}})
    ranges = admin.bundles(ns)
    topics = topics_for_bundles(ns, ranges, 2)
    idle = set(ranges[-IDLE:])  # the last by name: moved first, the order shows it
    broker = pulsar_cluster.brokers[-1]
    target = broker.broker_id

    def on_target() -> bool:
        off = {rng for t, rng in topics.items() if admin.lookup(t) != target}
        for rng in off:
            admin.unload(f"{ns}/{rng}", target)
        return not off

    wait_for(on_target, 120, f"every bundle of {ns} on {target}", every=3)
    rates = {t: 0.0 if rng in idle else RATE for t, rng in topics.items()}
    checker = SequenceChecker(pulsar_cluster.service_url, topics).start()
    work = SequencedWorkload(pulsar_cluster.service_url, rates)
    try:
        work.start()
        wait_for(lambda: work.acked() >= 200, 60, "the producers acknowledged")
        # Shedding off: every move is the drain's.
        s = serve({"LOADMGR_loadBalancerSheddingEnabled": "false"})

        def reported() -> bool:
            rows = s.http.get("/bundles", params={"namespace": ns}).json()
            rate = {r["bundle"].rsplit("/", 1)[1]: r["msgRateIn"] for r in rows}
            return on_target() and all((rate.get(rng, 0) > 0) != (rng in idle) for rng in ranges)

        wait_for(reported, 90, f"{target}'s load report showing which bundles carry traffic")
        started = time.monotonic()
        cli = subprocess.run(
            [*CLI, "--url", s.url, "brokers", "drain", target, "--then-shutdown", "--wait"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=scaled(300),
        )
        drain_s = time.monotonic() - started
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "done" in cli.stdout, cli.stdout
        state = s.http.get(f"/brokers/{target}/drain").json()
        assert state["state"] == "done" and state["remaining"] == 0 and not state["givenUp"], state
        assert state["thenShutdown"] is True and state["shutdown"].startswith("requested"), state

        # Pulsar's own graceful shutdown: the broker leaves Pulsar's registry and stops answering.
        def gone() -> bool:
            if target in admin.brokers(pulsar_cluster.cluster):
                return False
            try:
                httpx.get(f"{broker.web_url}/admin/v2/brokers/health", timeout=2)
            except httpx.HTTPError:
                return True
            return broker.proc is not None and broker.proc.poll() is not None

        wait_for(gone, 120, f"{target} shut down by Pulsar")
        others = PulsarAdmin([b.web_url for b in pulsar_cluster.brokers if b is not broker])

        def elsewhere() -> dict[str, str] | None:
            o = {rng: others.lookup(t) for t, rng in topics.items()}
            return o if target not in o.values() else None

        found = wait_for(elsewhere, 60, "every bundle looked up on another broker")
        assert set(found.values()) <= {b.broker_id for b in pulsar_cluster.brokers if b is not broker}
        drain_end = started + drain_s
        busy = [t for t, rng in topics.items() if rng not in idle]
        gaps = {
            rng: work.longest_gap([t for t, x in topics.items() if x == rng], since=started) for rng in ranges
        }
        p99 = work.latency_percentile(99, started, drain_end)
        time.sleep(2)
        work.stop()
        missing = checker.drain(work.acked_seqs, idle_s=20, limit_s=scaled(90))
    finally:
        work.stop()
        checker.stop()
        pulsar_cluster.stop_broker(broker, kill=True)  # Pulsar 4.0.7's JVM may linger after its shutdown

    decided = s.decisions("drain")
    moves = [d for d in decided if d["bundle"] and d["applied"] and d["explanation"]["reason"] == "drain"]
    ours = [d for d in moves if d["bundle"].startswith(ns + "/")]
    assert {d["bundle"].rsplit("/", 1)[1] for d in ours} == set(ranges)
    # A bundle is moved once, unless Pulsar's placement put it back on the drained broker (its own
    # decision, drain_placed_back, between the two moves).
    back = [d for d in decided if d["explanation"]["reason"] == "drain_placed_back"]
    for bundle, n in Counter(d["bundle"] for d in moves).items():
        assert n - 1 <= sum(1 for d in back if d["bundle"] == bundle), f"{bundle} moved {n} times"
    assert all(d["destination"] != target for d in moves)
    assert all(heartbeat_broker(d["bundle"].rsplit("/", 1)[0]) is None for d in moves)
    # Idle bundles first: their unload delays no producer and waits for no spacing.
    first = sorted(ours, key=lambda d: d.get("releasedMs") or d["timeMs"])[:IDLE]
    assert {d["bundle"].rsplit("/", 1)[1] for d in first} == idle, [d["bundle"] for d in first]
    at = {d["explanation"]["reason"]: d["timeMs"] for d in decided if d["bundle"] is None}
    assert at["drain_done"] <= at["drain_shutdown"], at  # the shutdown only once the drain was done
    lost = sum(len(v) for v in missing.values())
    print(
        f"\nloadmgr drain --then-shutdown of {target}: drain {drain_s:.1f} s, {len(moves)} move(s) "
        f"({len(ours)} of {ns}), failed sends {work.failed()}, acknowledged {work.acked()}, lost {lost}, "
        f"longest gap per bundle max {max(gaps.values()):.2f} s, "
        f"p99 publish latency while draining {p99 and round(p99 * 1000, 1)} ms ({len(busy)} busy topics)"
    )
    assert work.failed() == 0
    assert lost == 0, {t: v[:5] for t, v in missing.items() if v}
    assert max(gaps.values()) < 15.0
