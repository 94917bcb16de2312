"""A drain on real Pulsar brokers under producers, side by side with Pulsar's own graceful shutdown of
the same broker holding the same bundles under the same load.

Judged from Pulsar and the clients: where Pulsar's lookup finds each bundle, what the broker itself
says it owns, failed sends, the longest publish gap per moved bundle, and the p99 publish latency
while bundles move. Runs last in the tier (it shuts a broker down; a new one takes its place).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest

from balancer.bundles import heartbeat_broker
from service.pulsar.admin import PulsarAdmin
from service.pulsar.cluster import PulsarCluster
from service.pulsar.workload import Workload, topics_for_bundles
from tests.pulsar.conftest import Serve, wait_for

pytestmark = pytest.mark.timeout(900)

RATE = 100.0  # messages/s per topic
BUNDLES = 8


def _owners(admin: PulsarAdmin, topics: dict[str, str]) -> dict[str, str]:
    return {rng: admin.lookup(t) for t, rng in topics.items()}


def _put_all_on(admin: PulsarAdmin, ns: str, topics: dict[str, str], target: str) -> None:
    def on_target() -> bool:
        off = {rng for t, rng in topics.items() if admin.lookup(t) != target}
        for rng in off:
            admin.unload(f"{ns}/{rng}", target)
        return not off

    wait_for(on_target, 120, f"every bundle of {ns} on {target}", every=3)


def test_drain_one_of_three_brokers_then_pulsars_shutdown_of_it_under_the_same_load(
    pulsar_cluster: PulsarCluster, serve: Callable[..., Serve]
) -> None:
    admin = PulsarAdmin([b.web_url for b in pulsar_cluster.brokers if b.running])
    ns = "public/rolling"
    admin.request("PUT", f"/admin/v2/namespaces/{ns}", body={"bundles": {"numBundles": BUNDLES}})
    ranges = admin.bundles(ns)
    topics = topics_for_bundles(ns, ranges, 2)
    broker = pulsar_cluster.brokers[-1]
    target = broker.broker_id
    for t in topics:
        admin.lookup(t)
    _put_all_on(admin, ns, topics, target)
    with Workload(pulsar_cluster.service_url, dict.fromkeys(topics, RATE)) as work:
        time.sleep(5)  # every producer connected and sending
        # Shedding off: every move is the drain's.
        s = serve({"LOADMGR_loadBalancerSheddingEnabled": "false"})
        started = time.monotonic()
        r = s.http.post(f"/brokers/{target}/drain")
        assert r.status_code == 200, r.text

        def drained() -> bool:
            d = s.http.get(f"/brokers/{target}/drain").json()
            assert d["state"] in ("running", "done"), d
            return bool(d["state"] == "done")

        wait_for(drained, 400, f"the drain of {target}", every=1)
        drain_s = time.monotonic() - started
        drain_end = time.monotonic()

        def off_target() -> dict[str, str] | None:
            o = _owners(admin, topics)
            return o if target not in o.values() else None

        found = wait_for(
            off_target, 60, "no bundle of the namespace on the drained broker (Pulsar's lookups)"
        )
        left = admin.owned_bundles(pulsar_cluster.cluster, target)
        assert all(heartbeat_broker(b.rsplit("/", 1)[0]) is not None for b in left), left
        moves = [d for d in s.decisions("drain") if d["bundle"] and d["explanation"]["reason"] == "drain"]
        swept = [d for d in s.decisions("drain") if d["explanation"]["reason"] == "placed_on_cordoned"]
        ours = [d for d in moves if d["bundle"].startswith(ns + "/")]
        assert {d["bundle"].rsplit("/", 1)[1] for d in ours} == set(ranges)
        assert max(Counter(d["bundle"] for d in moves).values()) == 1, "a bundle moved twice"
        assert all(d["destination"] != target for d in moves)
        drain_gaps = {
            rng: work.longest_gap([t for t, x in topics.items() if x == rng], since=started) for rng in ranges
        }
        drain_p99 = work.latency_percentile(99, started, drain_end)
        drain_failed = work.failed()
        print(
            f"\nloadmgr drain of {target}: {drain_s:.1f} s, {len(moves)} move(s), "
            f"failed sends {drain_failed}, longest gap {max(drain_gaps.values()):.2f} s, "
            f"p99 {drain_p99 and round(drain_p99 * 1000, 1)} ms",
            flush=True,
        )
        assert sorted(set(found.values())) != [target]

        # The same broker, the same bundles, the same load: Pulsar's own graceful shutdown.
        assert s.http.post(f"/brokers/{target}/uncordon").status_code == 200
        _put_all_on(admin, ns, topics, target)
        time.sleep(5)
        before_shutdown = work.failed()
        shut_from = time.monotonic()
        admin.shutdown_broker(broker.web_url, max_concurrent_unload_per_sec=1)
        wait_for(
            lambda: target not in _owners(admin, topics).values(),
            120,
            "every bundle served elsewhere after the shutdown",
        )
        shut_s = time.monotonic() - shut_from
        time.sleep(5)
        shut_end = time.monotonic()
        shut_gaps = {
            rng: work.longest_gap([t for t, x in topics.items() if x == rng], since=shut_from)
            for rng in ranges
        }
        shut_p99 = work.latency_percentile(99, shut_from, shut_end)
        shut_failed = work.failed() - before_shutdown
    # Pulsar 4.0.7's shutdown closes the broker's services; its JVM may linger: end it.
    pulsar_cluster.stop_broker(broker, kill=True)
    pulsar_cluster.add_broker()  # three live brokers again for whatever runs after
    print(
        f"\nloadmgr drain of {target}: {drain_s:.1f} s, {len(moves)} move(s) ({len(ours)} of {ns}), "
        f"{len(swept)} moved off again after Pulsar placed them back, "
        f"failed sends {drain_failed}, longest gap per bundle max {max(drain_gaps.values()):.2f} s, "
        f"p99 publish latency {drain_p99 and round(drain_p99 * 1000, 1)} ms"
        f"\nPulsar's graceful shutdown of {target} (maxConcurrentUnloadPerSec=1): {shut_s:.1f} s, "
        f"failed sends {shut_failed}, longest gap per bundle max {max(shut_gaps.values()):.2f} s, "
        f"p99 publish latency {shut_p99 and round(shut_p99 * 1000, 1)} ms"
    )
    assert drain_failed == 0
    assert max(drain_gaps.values()) < 15.0
