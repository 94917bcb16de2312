"""A small recorded history for the replay tests, written by the real sink (and its config file).

Four brokers whose CPU is ``5 + msg/s / 1000`` plus noise, traffic on a shared wave; bundles start on
b1 and b2; b4 joins at cycle 10 and b2 leaves at cycle 30 (its bundles go to b3); the live leader moved
a bundle from b1 to b3 every fifth cycle, six times. One bundle row is NaN (invalid) and one cycle has
bundle rows only.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from balancer.config import LoadBalancerConfig
from balancer.models import BrokerData, LoadData, LocalBrokerData, NamespaceBundleStats, ResourceUsage
from service.longterm.history import BUNDLE_SCHEMA, HistorySink, partition_of
from service.longterm.history_meta import write_meta

T0 = 1_710_000_000_000  # 2024-03-09T16:00:00Z
STEP_MS = 30_000
CYCLES = 40
BUNDLES = 24
NAN_BUNDLE_CYCLE = 7
CONFIG = {
    "loadBalancerLoadSheddingStrategy": "ThresholdShedder",
    "loadBalancerLoadPlacementStrategy": "LeastResourceUsageWithWeight",
    "loadBalancerSheddingIntervalMinutes": STEP_MS / 60_000,
    "loadBalancerBundleUnloadMinThroughputThreshold": 0.0,
    "loadBalancerSheddingGracePeriodMinutes": 1.0,
}


def bundle_name(i: int) -> str:
    return f"t/ns/0x{i:08x}_0x{i + 1:08x}"


def _present(broker: str, k: int) -> bool:
    return not ((broker == "b4" and k < 10) or (broker == "b2" and k >= 30))


def write_history(root: Path, seed: int = 5) -> None:
    rng = random.Random(seed)
    owners = {bundle_name(i): "b1" if i % 3 else "b2" for i in range(BUNDLES)}
    sink = HistorySink(str(root), max_queue=CYCLES + 1)
    write_meta(str(root), LoadBalancerConfig.from_dict(CONFIG))
    moved = 0
    for k in range(CYCLES):
        if k and k % 5 == 0 and moved < 6:
            victim = sorted(b for b, o in owners.items() if o == "b1")[0]
            owners[victim] = "b3"
            moved += 1
        if k == 30:
            owners = {b: ("b3" if o == "b2" else o) for b, o in owners.items()}
        load = LoadData()
        stats: dict[str, dict[str, NamespaceBundleStats]] = {
            b: {} for b in ("b1", "b2", "b3", "b4") if _present(b, k)
        }
        for i in range(BUNDLES):
            name = bundle_name(i)
            # a shared wave, so each broker's traffic (and CPU) swings far more than the CPU noise
            rate = (800.0 + 150.0 * i) * (1.0 + 0.5 * math.sin(k / 4))
            rate_in = math.nan if (k, i) == (NAN_BUNDLE_CYCLE, 3) else rate / 2
            stats[owners[name]][name] = NamespaceBundleStats(
                msg_rate_in=rate_in, msg_rate_out=rate / 2, msg_throughput_in=rate * 512,
                msg_throughput_out=rate * 512, topics=3, producer_count=1, consumer_count=1,
            )  # fmt: skip
        for broker, owned in stats.items():
            rate = sum(s.msg_rate_out * 2 for s in owned.values())
            cpu = 5.0 + rate / 1000.0 + rng.gauss(0.0, 0.5)
            local = LocalBrokerData(
                cpu=ResourceUsage(usage=cpu * 4, limit=400.0),
                bandwidth_in=ResourceUsage(usage=rate * 256 / 1024, limit=1.25e6),
                bandwidth_out=ResourceUsage(usage=rate * 256 / 1024, limit=1.25e6),
            )
            local.update(local.usages(), owned)
            load.broker_data[broker] = BrokerData(local_data=local)
        sink.append_cycle(T0 + k * STEP_MS, load, owners)
    sink.close()
    assert sink.stats.cycles_dropped == 0 and sink.stats.write_errors == 0
    # A cycle whose broker file was lost: bundle rows only, which the extraction must drop.
    date, hour = partition_of(T0 + CYCLES * STEP_MS)
    lost = {"time": T0 + CYCLES * STEP_MS, "bundle": bundle_name(0), "owner": "b1", "msg_rate_in": 1.0,
            "msg_rate_out": 1.0, "msg_throughput_in": 1.0, "msg_throughput_out": 1.0, "topics": 1,
            "producers": 0, "consumers": 0}  # fmt: skip
    directory = root / "bundles" / f"date={date}" / f"hour={hour}"
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([lost], schema=BUNDLE_SCHEMA), directory / "part-lost.parquet")
