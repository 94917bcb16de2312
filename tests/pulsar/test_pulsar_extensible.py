"""loadmgr in Pulsar mode on a real 3-broker cluster running ExtensibleLoadManagerImpl (PIP-192).

Judged from Pulsar: where bundles are comes from each broker's ``ownedNamespaces`` (no lookup, so the
brokers' lookup counters stay the clients' own), traffic from each broker's ``broker-stats/topics``
(these brokers serve no ``load-report``); real producers count failed sends and publish gaps, and a
consumer per topic, subscribed before the first message, must receive every acknowledged message.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from balancer.drain import stays_on_broker
from bench.head_to_head_clients import SequenceChecker, SequencedWorkload
from service.pulsar.admin import PulsarAdmin
from service.pulsar.cluster import PulsarCluster
from service.pulsar.workload import Workload, topics_for_bundles
from tests.pulsar.conftest import ROOT, Serve, wait_for
from tests.pulsar.extensible_reads import Consumers, lookups, owner_of, rates_by_broker, skewed_namespace
from tests.timing import scaled

pytestmark = pytest.mark.timeout(600, func_only=True)  # see conftest: the wait for the other tier's cluster

RATE = 60.0  # messages/s per topic
DRAIN_BUNDLES = 4  # the drained broker's namespace
DRAIN_IDLE = 1  # of them with clients connected that send nothing
LATER_BUNDLES = 4  # looked up after the drain, placed by Pulsar (possibly on the cordoned broker)


def test_extensible_refusal_while_the_brokers_shed_and_recovery(
    extensible_cluster: PulsarCluster, serve_ext: Callable[..., Serve]
) -> None:
    admin = PulsarAdmin(extensible_cluster.web_urls)
    s = serve_ext()
    assert s.metric("loadmgr_pulsar_acting") == 1.0
    assert "the extensible load manager" in s.log.read_text()
    admin.update_dynamic_config("loadBalancerSheddingEnabled", "true")
    try:
        ready = wait_for(lambda: (r := s.readyz())["status"] != "ready" and r, 30, "a refusal on /readyz")
        assert "loadBalancerSheddingEnabled=true" in str(ready), ready
        assert s.metric("loadmgr_pulsar_acting") == 0.0
        assert (s.metric("loadmgr_pulsar_broker_settings_conflicts") or 0) >= 3
        bundle = f"public/default/{admin.bundles('public/default')[0]}"
        r = s.http.post(f"/bundles/{bundle}/unload")
        assert r.status_code == 412, r.text
    finally:
        admin.delete_dynamic_config("loadBalancerSheddingEnabled")
    wait_for(lambda: s.readyz()["status"] == "ready", 30, "ready again once the brokers stop shedding")
    assert s.metric("loadmgr_pulsar_acting") == 1.0


def test_extensible_beside_the_brokers_own_shedding_in_dry_run(
    extensible_cluster: PulsarCluster, serve_ext: Callable[..., Serve]
) -> None:
    admin = PulsarAdmin(extensible_cluster.web_urls)
    admin.update_dynamic_config("loadBalancerSheddingEnabled", "true")  # their TransferShedder
    try:
        s = serve_ext({"LOADMGR_PULSAR_BESIDE_BROKERS": "true"}, wait_ready=False)
        details = wait_for(
            lambda: (
                (d := s.readyz())["status"] == "ready" and d["details"].get("pulsar", {}).get("dryRun") and d
            ),
            60,
            "ready in dry-run",
        )
        assert "loadBalancerSheddingEnabled=true" in details["details"]["pulsar"]["reason"]
        r = s.http.post("/shedding/dry-run")
        assert r.status_code == 200, r.text
        # The dry run decided on the Extensible brokers' own figures: all three, read from their
        # registry, channel and topic stats.
        brokers = {b["broker"] for b in s.http.get("/brokers").json()}
        assert brokers == {b.broker_id for b in extensible_cluster.brokers}
        # Every broker's host usage is known (a JVM's heap is never empty), from its load data or,
        # before its first report on the non-persistent topic, its pulsar_lb_* gauges.
        wait_for(
            lambda: all(b["usagePercent"]["memory"] > 0 for b in s.http.get("/brokers").json()),
            30,
            "every broker's memory usage",
        )
    finally:
        admin.delete_dynamic_config("loadBalancerSheddingEnabled")


def test_extensible_manual_transfer_lookups_unload_and_split(
    extensible_cluster: PulsarCluster, serve_ext: Callable[..., Serve]
) -> None:
    cluster = extensible_cluster
    admin = PulsarAdmin(cluster.web_urls)
    s = serve_ext()
    ns = "public/transfer"
    admin.request("PUT", f"/admin/v2/namespaces/{ns}", body={"bundles": {"numBundles": 2}})
    ranges = admin.bundles(ns)
    topics = topics_for_bundles(ns, ranges, 2)
    consumers = Consumers(cluster.service_url, topics)
    try:
        with Workload(cluster.service_url, dict.fromkeys(topics, 20.0)) as work:
            first, second = (f"{ns}/{r}" for r in ranges)
            owners = wait_for(
                lambda: (
                    (o := {b: owner_of(admin, cluster, b) for b in (first, second)}) and all(o.values()) and o
                ),
                60,
                "both bundles owned",
            )
            wait_for(
                lambda: all(b in s.http.get("/bundles").text for b in (first, second)),
                60,
                "loadmgr sees the bundles",
            )
            dest = next(b.broker_id for b in cluster.brokers if b.broker_id != owners[first])
            on_first = [t for t, r in topics.items() if f"{ns}/{r}" == first]
            before = lookups(admin, cluster)
            moved_at = time.monotonic()
            r = s.http.post(f"/bundles/{first}/unload", params={"destinationBroker": dest})
            assert r.status_code == 200, r.text
            wait_for(lambda: owner_of(admin, cluster, first) == dest, 60, f"{first} owned by {dest}")
            # Its producers publish again: acknowledged after the move, on the new owner.
            wait_for(
                lambda: all((work.records[t].last_ack or 0) > moved_at + 0.5 for t in on_first),
                60,
                "the moved bundle's producers acknowledged again",
            )
            transferred = lookups(admin, cluster) - before
            # The control: an unload without a destination frees the bundle, and its clients must
            # look it up again, which the same counters see.
            before = lookups(admin, cluster)
            unloaded_at = time.monotonic()
            r = s.http.post(f"/bundles/{second}/unload")
            assert r.status_code == 200, r.text
            on_second = [t for t, r2 in topics.items() if f"{ns}/{r2}" == second]
            wait_for(
                lambda: all((work.records[t].last_ack or 0) > unloaded_at + 0.5 for t in on_second),
                60,
                "the unloaded bundle's producers acknowledged again",
            )
            unloaded = lookups(admin, cluster) - before
            clients = 2 * len(on_first)  # a producer and a consumer per topic
            print(
                f"\nlookups answered: transfer {transferred:.0f} ({clients} clients on the bundle), "
                f"unload without destination {unloaded:.0f}"
            )
            # PIP-307: the source names the new owner as it closes each topic, so a client may
            # reconnect without a lookup. Pulsar 4.0.7 with pulsar-client 3.13 spared every client
            # its lookup in some runs here and not in others (0, 4, 1 lookups in three runs; the
            # cause is not known yet): what holds every time is at most one lookup per client.
            assert transferred <= clients
            assert unloaded >= 1  # the control: these counters do see the clients' lookups
            manual = [d for d in s.decisions("manual") if d["bundle"] == first]
            assert manual and manual[-1]["destination"] == dest, manual
            # Splits go through the admin API as on Modular brokers; the children are read back.
            r = s.http.post(f"/bundles/{first}/split", json={"algorithm": "range_equally_divide"})
            assert r.status_code == 200, r.text
            wait_for(lambda: len(admin.bundles(ns)) == 3, 60, "three bundles per Pulsar after the split")
            children = r.json()["decision"]["explanation"]["numbers"]["children"]
            assert len(children) == 2 and first not in children, children
        wait_for(lambda: not consumers.missing(work), 60, "every acknowledged message received")
        assert work.failed() == 0
    finally:
        consumers.close()


def test_extensible_skewed_cluster_is_balanced_by_transfers(
    extensible_cluster: PulsarCluster, serve_ext: Callable[..., Serve]
) -> None:
    cluster = extensible_cluster
    admin = PulsarAdmin(cluster.web_urls)
    ns = "public/skewed"
    topics, hot = skewed_namespace(admin, cluster, ns, 8)
    consumers = Consumers(cluster.service_url, topics)
    try:
        with Workload(cluster.service_url, dict.fromkeys(topics, RATE)) as work:
            wait_for(
                lambda: rates_by_broker(admin, cluster, ns)[hot] > 0.5 * RATE * len(topics),
                60,
                "load seen",
            )
            before = rates_by_broker(admin, cluster, ns)
            s = serve_ext(
                {
                    "LOADMGR_loadBalancerLoadSheddingStrategy": "UniformLoadShedder",
                    "LOADMGR_loadBalancerSheddingGracePeriodMinutes": "0.5",
                    "LOADMGR_minUnloadMessage": "100",
                    "LOADMGR_minUnloadMessageThroughput": "10000",
                    "LOADMGR_maxUnloadPercentage": "0.5",
                }
            )
            moved_from = time.monotonic()

            def balanced() -> bool:
                r = rates_by_broker(admin, cluster, ns)
                return min(r.values()) > 0 and max(r.values()) / min(r.values()) <= 2.0

            wait_for(balanced, 240, "message rates evened out across the brokers", every=2)
            after = rates_by_broker(admin, cluster, ns)
            last: dict[str, str] = {}

            def written() -> list[dict[str, Any]]:
                return s.written_moves("shedding", ns)

            def as_decided() -> bool:
                last.clear()
                for d in written():
                    last[d["bundle"]] = d["destination"]
                return bool(last) and all(owner_of(admin, cluster, b) == dst for b, dst in last.items())

            wait_for(as_decided, 90, "every moved bundle where loadmgr last decided", every=3)
            # ...and loadmgr saw each served there, from the service-unit state channel: not after the
            # 30 s served timeout (Extensible keeps no /namespace ownership nodes to read).
            wait_for(
                lambda: all(d.get("state") == "served" for d in written()),
                60,
                "every transfer seen served",
                every=2,
            )
            moves = written()
            slow = [
                d for d in moves if d.get("state") == "served" and d["servedMs"] - d["releasedMs"] >= 20_000
            ]
            assert not slow, slow
            again = [d for d in moves if d["explanation"]["reason"] == "destination_not_honoured"]
        gaps = {
            b: work.longest_gap([t for t, r in topics.items() if f"{ns}/{r}" == b], since=moved_from)
            for b in last
        }
        wait_for(lambda: not consumers.missing(work), 60, "every acknowledged message received")
        print(
            f"\nExtensible brokers: 3; transfers: {len(moves)} ({len(again)} sent again); failed sends: "
            f"{work.failed()} of {work.acked() + work.failed()}; longest publish gap per moved bundle (s): "
            f"{ {k.rsplit('/', 1)[1]: round(v, 2) for k, v in gaps.items()} }; "
            f"msg/s per broker before {before} after {after}"
        )
        assert not again  # a transfer lands where it was sent: no lookup can place it elsewhere
        assert work.failed() == 0
        assert max(gaps.values()) < 15.0
    finally:
        consumers.close()


def test_extensible_leader_failover_and_the_new_leader_transfers(
    extensible_cluster: PulsarCluster, serve_ext: Callable[..., Serve]
) -> None:
    cluster = extensible_cluster
    admin = PulsarAdmin(cluster.web_urls)
    a = serve_ext()
    b = serve_ext()
    leader, follower = (a, b) if a.is_leader() else (b, a)
    assert leader.is_leader() and not follower.is_leader()
    leader.stop(signal.SIGKILL)  # no resignation: the session must expire
    wait_for(follower.is_leader, 60, "the follower takes over")
    wait_for(lambda: follower.readyz()["status"] == "ready", 60, "the new leader acts")
    ns = "public/failover"
    admin.request("PUT", f"/admin/v2/namespaces/{ns}", body={"bundles": {"numBundles": 1}})
    (rng,) = admin.bundles(ns)
    (topic,) = topics_for_bundles(ns, [rng], 1)
    bundle = f"{ns}/{rng}"
    consumers = Consumers(cluster.service_url, [topic])
    try:
        with Workload(cluster.service_url, {topic: 20.0}) as work:
            owner = wait_for(lambda: owner_of(admin, cluster, bundle), 60, f"{bundle} owned")
            dest = next(x.broker_id for x in cluster.brokers if x.broker_id != owner)
            wait_for(lambda: bundle in follower.http.get("/bundles").text, 60, "the new leader sees it")
            r = follower.http.post(f"/bundles/{bundle}/unload", params={"destinationBroker": dest})
            assert r.status_code == 200, r.text
            wait_for(lambda: owner_of(admin, cluster, bundle) == dest, 60, "the transfer by the new leader")
        wait_for(lambda: not consumers.missing(work), 60, "every acknowledged message received")
        assert work.failed() == 0
    finally:
        consumers.close()


def test_extensible_drain_transfers_every_bundle_and_the_cordon_holds(
    extensible_cluster: PulsarCluster, serve_ext: Callable[..., Serve]
) -> None:
    """``loadmgr brokers drain B --wait`` on Extensible brokers, under sequence-checked producers and
    consumers: every bundle leaves B by a transfer to where the drain sent it, nothing is lost, and
    B, cordoned, keeps nothing Pulsar's own placement gives it afterwards. B is uncordoned at the
    end: the module's cluster is shared by the tests after this one."""
    cluster = extensible_cluster
    admin = PulsarAdmin(cluster.web_urls)
    ns = "public/ext-drain"
    topics, target = skewed_namespace(admin, cluster, ns, DRAIN_BUNDLES)
    ranges = sorted(set(topics.values()))
    idle = set(ranges[-DRAIN_IDLE:])  # clients connected, nothing sent
    checker = SequenceChecker(cluster.service_url, topics).start()
    work = SequencedWorkload(cluster.service_url, {t: 0.0 if r in idle else RATE for t, r in topics.items()})
    s: Serve | None = None
    try:
        work.start()
        wait_for(lambda: work.acked() >= 200, 60, "the producers acknowledged")
        s = serve_ext({"LOADMGR_loadBalancerSheddingEnabled": "false"})  # every move is the drain's
        server = s

        def seen_on_target() -> bool:
            rows = server.http.get("/bundles", params={"namespace": ns}).json()
            return {r["bundle"] for r in rows if r["owner"] == target} == {f"{ns}/{r}" for r in ranges}

        wait_for(seen_on_target, 60, f"loadmgr seeing every bundle of {ns} on {target}")
        started = time.monotonic()
        cli = subprocess.run(
            [sys.executable, "-m", "service", "--url", s.url, "brokers", "drain", target, "--wait"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        drain_s = time.monotonic() - started
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "done" in cli.stdout, cli.stdout
        state = s.http.get(f"/brokers/{target}/drain").json()
        assert state["state"] == "done" and state["remaining"] == 0 and not state["givenUp"], state
        assert state["moved"] >= DRAIN_BUNDLES, state
        assert s.metric("loadmgr_drain_bundles_remaining") == 0.0
        left = [b for b in admin.owned_bundles(cluster.cluster, target) if not stays_on_broker(b)]
        assert not left, f"still owned by {target} after the drain: {left}"
        # Transfers: each bundle of ns is owned where the drain sent it (no lookup placed it).
        moves = [d for d in s.written_moves("drain", ns) if d["explanation"]["reason"] == "drain"]
        sent = {d["bundle"]: d["destination"] for d in moves}
        assert set(sent) == {f"{ns}/{r}" for r in ranges}, sent
        assert len(moves) == len(sent), [d["bundle"] for d in moves]  # each bundle moved once
        assert target not in sent.values()
        assert {b: owner_of(admin, cluster, b) for b in sent} == sent
        gaps = {r: work.longest_gap([t for t, x in topics.items() if x == r], since=started) for r in ranges}
        p99 = work.latency_percentile(99, started, started + drain_s)

        # Cordoned: bundles Pulsar places on the broker afterwards (its lookups, an admin transfer:
        # loadmgr can veto neither) are moved off by the cordon sweep, and the broker keeps nothing.
        later = "public/ext-drain-later"
        admin.request("PUT", f"/admin/v2/namespaces/{later}", body={"bundles": {"numBundles": LATER_BUNDLES}})
        later_topics = topics_for_bundles(later, admin.bundles(later), 1)
        placed = {f"{later}/{r}" for t, r in later_topics.items() if admin.lookup(t) == target}
        # Pulsar's lookups chose the cordoned broker for 0 to 3 of 4 bundles in three runs: one more
        # is transferred there through Pulsar's admin, so that the sweep always has work.
        elsewhere = sorted(f"{later}/{r}" for r in later_topics.values() if f"{later}/{r}" not in placed)
        if elsewhere:
            admin.unload(elsewhere[0], target)
            placed.add(elsewhere[0])

        def nothing_on_target() -> bool:
            owners = {f"{later}/{r}": owner_of(admin, cluster, f"{later}/{r}") for r in later_topics.values()}
            mine = [b for b in admin.owned_bundles(cluster.cluster, target) if not stays_on_broker(b)]
            return all(owners.values()) and target not in owners.values() and not mine

        wait_for(nothing_on_target, 60, f"nothing owned by cordoned {target}", every=1)
        swept = {
            d["bundle"] for d in s.decisions("drain") if d["explanation"]["reason"] == "placed_on_cordoned"
        }
        assert placed <= swept, (placed, swept)
        brokers = {b["broker"]: b for b in s.http.get("/brokers").json()}
        assert brokers[target]["cordoned"] and not brokers[target]["draining"], brokers[target]

        work.stop()
        missing = checker.drain(work.acked_seqs, idle_s=20, limit_s=scaled(60))
        lost = sum(len(v) for v in missing.values())
        print(
            f"\nExtensible drain of {target}: {drain_s:.1f} s, {state['moved']} transfer(s) ({len(moves)} of "
            f"{ns}), failed sends {work.failed()}, acknowledged {work.acked()}, lost {lost}, longest gap "
            f"per bundle max {max(gaps.values()):.2f} s, p99 publish latency while draining "
            f"{p99 and round(p99 * 1000, 1)} ms; afterwards {len(placed)} bundle(s) placed on the cordoned "
            f"broker by Pulsar ({len(placed) - bool(elsewhere)} by its lookups), all moved off"
        )
        assert work.failed() == 0
        assert lost == 0, {t: v[:5] for t, v in missing.items() if v}

        # As found: nobody cordoned, every bundle owned.
        r = s.http.post(f"/brokers/{target}/uncordon")
        assert r.status_code == 200, r.text
        assert r.json()["cordoned"] == {}, r.json()
        s = None
        wait_for(
            lambda: all(owner_of(admin, cluster, f"{ns}/{r}") for r in ranges),
            30,
            f"every bundle of {ns} owned",
        )
    finally:
        work.stop()
        checker.stop()
        if s is not None:  # failed midway: leave no drain running and no broker cordoned
            with contextlib.suppress(Exception):
                s.http.post(f"/brokers/{target}/drain/stop")
            with contextlib.suppress(Exception):
                s.http.post(f"/brokers/{target}/uncordon")
