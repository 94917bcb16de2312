"""A broker dies (its agent process is SIGKILLed): once its session expires, its bundles are owned
again by live brokers within one shedding interval, and no bundle is ever owned twice."""

from __future__ import annotations

import time

import pytest

from service.broker.workload import skewed_scenario
from tests.integration.conftest import FAST, Cluster, OwnershipChecker, fast_config, wait_for

pytestmark = pytest.mark.integration

INTERVAL_S = FAST["loadBalancerSheddingIntervalMinutes"] * 60


def test_dead_brokers_bundles_are_owned_again_within_one_interval(cluster: Cluster) -> None:
    config = fast_config()
    cluster.scenario(skewed_scenario("public/default", 9, seed=11))
    checker = OwnershipChecker(cluster)
    checker.start()
    svc, doomed = cluster.with_a_doomed_broker(config)
    # Even distribution puts three bundles on each broker, the process included.
    wait_for(lambda: "b3:8080" in cluster.owners().values(), 10, what="b3 to own bundles")
    lost = {b for b, o in cluster.owners().items() if o == "b3:8080"}

    cluster.kill_doomed(doomed)
    expired = time.monotonic()
    wait_for(
        lambda: set(cluster.owners()) == cluster.bundles(),
        INTERVAL_S + 5,
        interval=0.05,
        what="the dead broker's bundles to be owned again",
    )
    took = time.monotonic() - expired
    owners = cluster.owners()
    assert set(owners.values()) <= {"b1:8080", "b2:8080"}
    assert lost and all(owners[b] in ("b1:8080", "b2:8080") for b in lost)
    assert took <= INTERVAL_S + 2, f"re-owned after {took:.1f}s"
    orphans = [d for d in svc.decisions(kind="placement") if d.explanation["reason"] == "orphan_assigned"]
    assert {d.bundle for d in orphans} == lost
    assert all(d.source == "b3:8080" and d.destination in ("b1:8080", "b2:8080") for d in orphans)
    checker.stop()
    assert checker.samples >= 5 and not checker.violations, checker.violations
