"""With BalancedShedder placing, a dead broker's bundles are owned again largest first on the live
leader, as in the simulator (``order_batch``): in arrival order a big bundle drawn late in a round
of even distribution is forced onto a broker that is already full."""

from __future__ import annotations

import time

import pytest

from service.broker.workload import skewed_scenario
from tests.integration.conftest import FAST, Cluster, fast_config, wait_for

pytestmark = pytest.mark.integration

INTERVAL_S = FAST["loadBalancerSheddingIntervalMinutes"] * 60


def test_a_dead_brokers_bundles_are_placed_largest_first(cluster: Cluster) -> None:
    both = "BalancedShedder"
    config = fast_config(loadBalancerLoadSheddingStrategy=both, loadBalancerLoadPlacementStrategy=both)
    scenario = skewed_scenario("public/default", 12, seed=5, spread=0.9)
    cluster.scenario(scenario)
    svc, doomed = cluster.with_a_doomed_broker(config)
    wait_for(
        lambda: sum(o == "b3:8080" for o in cluster.owners().values()) >= 3, 20, what="b3 to own 3 bundles"
    )
    time.sleep(2 * INTERVAL_S)  # two bundle-data writes: the leader knows every bundle's long-term traffic
    lost = {b for b, o in cluster.owners().items() if o == "b3:8080"}
    assert len(lost) >= 3, lost

    cluster.kill_doomed(doomed)
    wait_for(lambda: set(cluster.owners()) == cluster.bundles(), INTERVAL_S + 5, what="b3's bundles re-owned")

    orphans = [d for d in svc.decisions(kind="placement") if d.explanation["reason"] == "orphan_assigned"]
    placed = [d.bundle for d in reversed(orphans)]  # the log is newest first
    assert set(placed) == lost

    def size(bundle: str) -> float:
        b = scenario.bundles[bundle]
        return b.msg_rate_in + b.msg_rate_out

    assert placed == sorted(lost, key=lambda b: (-size(b), b)), [(b, round(size(b))) for b in placed]
