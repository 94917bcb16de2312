"""Spark extraction of a history range for ``loadmgr replay``: per-cycle bundle traffic and owners, the
brokers present in each cycle with their reported usage, and each broker's learned capacity line.

The rows are filtered with the long-term job's validity rules (:mod:`service.longterm.input`) and grouped
by cycle time on the executors, one row per cycle holding that cycle's bundles (and one per cycle for
brokers), ordered by time; the driver streams them with ``toLocalIterator`` so it holds the replay's
inputs once, never a second copy of the raw rows. The capacity lines are the long-term job's own
(:func:`service.longterm.compute.compute_capacity`). Works on any ``--master``: nothing here reads files
on the driver.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from balancer.sim.replay import CapacityLine, RecordedBroker, RecordedBundle, RecordedCycle
from service.longterm.compute import compute_capacity
from service.longterm.input import VALUES, EmptyHistory, good_number, read_range, valid_bundle_row

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("loadmgr.replay")

BROKER_VALUES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")


@dataclass
class Extracted:
    cycles: list[RecordedCycle]
    lines: dict[str, CapacityLine]
    bundle_rows: int
    broker_rows: int
    steps: list[str] = field(default_factory=list)


def _pct(usage: str, limit: str) -> Column:
    from pyspark.sql import functions as F

    # A zero or missing limit means the broker did not measure this resource (Pulsar reports -1 or 0).
    return F.when(F.col(limit) > 0, F.col(usage) / F.col(limit) * 100.0).otherwise(F.lit(0.0))


def bundle_cycles(raw: DataFrame) -> DataFrame:
    """One row per cycle time (in no order): ``time`` and ``rows`` (bundle, owner and the four values)."""
    from pyspark.sql import functions as F

    ok = valid_bundle_row() & F.col("owner").isNotNull()
    return (
        raw.where(ok).groupBy("time").agg(F.collect_list(F.struct("bundle", "owner", *VALUES)).alias("rows"))
    )


def broker_cycles(raw: DataFrame) -> DataFrame:
    """One row per cycle time (in no order): ``time`` and ``rows`` (broker, usage percents, traffic)."""
    from pyspark.sql import functions as F

    ok = F.col("broker").isNotNull() & (F.col("broker") != "") & F.col("time").isNotNull()
    for v in BROKER_VALUES:
        ok = ok & good_number(F.col(v))
    cpu = _pct("cpu_usage", "cpu_limit")
    ok = ok & good_number(cpu)
    return (
        raw.where(F.coalesce(ok, F.lit(False)))
        .groupBy("time")
        .agg(
            F.collect_list(
                F.struct(
                    "broker",
                    cpu.alias("cpu"),
                    F.coalesce(_pct("bandwidth_in_usage", "bandwidth_in_limit"), F.lit(0.0)).alias("bw_in"),
                    F.coalesce(_pct("bandwidth_out_usage", "bandwidth_out_limit"), F.lit(0.0)).alias(
                        "bw_out"
                    ),
                    *BROKER_VALUES,
                )
            ).alias("rows")
        )
    )


def extract(
    spark: SparkSession,
    uri: str,
    start_ms: int,
    end_ms: int,
    progress: Callable[[str], None] | None = None,
) -> Extracted:
    """The replay's inputs for ``[start_ms, end_ms)``; raises :class:`EmptyHistory` when there are none.

    Only cycles with both bundle and broker rows are kept: a cycle whose broker file was lost says
    nothing about where the traffic ran.
    """
    steps: list[str] = []
    started = time.monotonic()

    def say(msg: str) -> None:
        line = f"[replay +{time.monotonic() - started:6.1f}s] {msg}"
        steps.append(line)
        (progress or log.info)(line)

    brokers_by_time: dict[int, dict[str, RecordedBroker]] = {}
    broker_rows = 0
    for row in _stream(broker_cycles(read_range(spark, uri, "brokers", start_ms, end_ms))):
        got = {
            r["broker"]: RecordedBroker(
                cpu=float(r["cpu"]),
                bw_in=float(r["bw_in"]),
                bw_out=float(r["bw_out"]),
                msg_rate=float(r["msg_rate_in"]) + float(r["msg_rate_out"]),
                tp_in=float(r["msg_throughput_in"]),
                tp_out=float(r["msg_throughput_out"]),
            )
            for r in row["rows"]
        }
        broker_rows += len(got)
        brokers_by_time[int(row["time"])] = got
    say(f"{len(brokers_by_time)} cycles of broker rows ({broker_rows} rows)")

    cycles: list[RecordedCycle] = []
    bundle_rows = 0
    for row in _stream(bundle_cycles(read_range(spark, uri, "bundles", start_ms, end_ms))):
        t = int(row["time"])
        present = brokers_by_time.get(t)
        if present is None:
            continue
        bundles = {
            r["bundle"]: RecordedBundle(
                owner=r["owner"],
                rate_in=float(r["msg_rate_in"]),
                rate_out=float(r["msg_rate_out"]),
                tp_in=float(r["msg_throughput_in"]),
                tp_out=float(r["msg_throughput_out"]),
            )
            for r in row["rows"]
        }
        bundle_rows += len(bundles)
        cycles.append(RecordedCycle(t, bundles, present))
    cycles.sort(key=lambda c: c.time_ms)
    say(f"{len(cycles)} cycles with bundle and broker rows ({bundle_rows} bundle rows)")
    if len(cycles) < 2:
        raise EmptyHistory(f"{len(cycles)} usable cycles in the range; a replay needs at least two")

    fits, bad = compute_capacity(spark, uri, start_ms, end_ms)
    lines = {
        f["broker"]: CapacityLine(f["broker"], f["msg_rate_per_cpu_point"], f["msg_rate_intercept"])
        for f in fits
    }
    say(f"capacity lines for {len(lines)} brokers ({bad} bad broker rows skipped)")
    return Extracted(cycles, lines, bundle_rows, broker_rows, steps)


def _stream(df: DataFrame) -> Iterator[Any]:
    """The frame's rows, one partition on the driver at a time."""
    return df.toLocalIterator(prefetchPartitions=True)
