"""Spark extraction of a history range for ``loadmgr replay``: per-cycle bundle traffic and owners, the
brokers present in each cycle with their reported usage, and each broker's learned capacity line.

Spark reads each dataset once, filters the rows with the long-term job's validity rules
(:mod:`service.longterm.input`) and hands the driver the surviving columns as Arrow batches: no
shuffle, no Python ``Row`` objects. The rows are grouped per cycle on the driver with pyarrow and numpy
(a sort of the time column), which is what a ``groupBy("time")`` on the executors did before at the cost
of shuffling every row and one Spark job per shuffle partition. Bundle and broker names are
dictionary-encoded once, so each name is one Python string however many cycles mention it. The capacity
lines are the long-term job's own (:func:`service.longterm.compute.capacity_of`), computed over the
same cached broker read. Works on any ``--master``: nothing here reads files on the driver.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from balancer.sim.replay import (
    CapacityLine,
    RecordedBroker,
    RecordedBundle,
    RecordedCycle,
    RecordedDecision,
)
from service.longterm.compute import capacity_of
from service.longterm.input import VALUES, EmptyHistory, good_number, read_range, valid_bundle_row

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("loadmgr.replay")

BROKER_VALUES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
BROKER_COLUMNS = ("cpu", "bw_in", "bw_out", *BROKER_VALUES)


@dataclass
class Extracted:
    cycles: list[RecordedCycle]
    lines: dict[str, CapacityLine]
    bundle_rows: int
    broker_rows: int
    steps: list[str] = field(default_factory=list)
    # The leader's recorded decisions about bundles (None: a history written before they were recorded)
    decisions: list[RecordedDecision] | None = None


# A history holds one small file per recorded cycle and dataset (a few KB for a demo-sized cluster). At
# Spark's default open cost (4 MB) hundreds of such files become a dozen tasks per read, whose
# scheduling cost more than the reading on a cold JVM (measured: 25 s vs 10 s for the demo's 1,080
# files); priced at 128 KB they are packed into about one task per core. Large files are unaffected.
# Arrow batches of 100,000 rows instead of 10,000 bring 10M rows to the driver ~15% faster.
REPLAY_CONF = {
    "spark.sql.files.openCostInBytes": str(128 * 1024),
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}


def tune_session(spark: SparkSession) -> None:
    """Applies :data:`REPLAY_CONF` where the session's own conf (spark-submit --conf) is silent."""
    given = spark.sparkContext.getConf()
    for key, value in REPLAY_CONF.items():
        if not given.contains(key):
            spark.conf.set(key, value)


def _pct(usage: str, limit: str) -> Column:
    from pyspark.sql import functions as F

    # A zero or missing limit means the broker did not measure this resource (Pulsar reports -1 or 0).
    return F.when(F.col(limit) > 0, F.col(usage) / F.col(limit) * 100.0).otherwise(F.lit(0.0))


def bundle_rows(raw: DataFrame) -> DataFrame:
    """The valid bundle rows with an owner: ``time``, ``bundle``, ``owner`` and the four values."""
    from pyspark.sql import functions as F

    ok = valid_bundle_row() & F.col("owner").isNotNull()
    return raw.where(ok).select("time", "bundle", "owner", *VALUES)


def broker_rows(raw: DataFrame) -> DataFrame:
    """The valid broker rows: ``time``, ``broker``, usage percents (cpu, bw_in, bw_out) and traffic."""
    from pyspark.sql import functions as F

    ok = F.col("broker").isNotNull() & (F.col("broker") != "") & F.col("time").isNotNull()
    for v in BROKER_VALUES:
        ok = ok & good_number(F.col(v))
    cpu = _pct("cpu_usage", "cpu_limit")
    ok = ok & good_number(cpu)
    return raw.where(F.coalesce(ok, F.lit(False))).select(
        "time",
        "broker",
        cpu.alias("cpu"),
        F.coalesce(_pct("bandwidth_in_usage", "bandwidth_in_limit"), F.lit(0.0)).alias("bw_in"),
        F.coalesce(_pct("bandwidth_out_usage", "bandwidth_out_limit"), F.lit(0.0)).alias("bw_out"),
        *BROKER_VALUES,
    )


@dataclass
class Fetched:
    """What Spark hands the driver: the valid rows as Arrow tables, and the capacity fits."""

    brokers: pa.Table
    bundles: pa.Table
    fits: list[dict[str, Any]]
    bad_brokers: int
    moves: pa.Table | None = None


def fetch(spark: SparkSession, uri: str, start_ms: int, end_ms: int) -> Fetched:
    """The Spark side of :func:`extract`: three jobs; only the capacity fit shuffles (per-broker sums)."""
    # Cached: the per-cycle rows and the capacity fit both read it, and the second read would list and
    # open every broker file again.
    raw_brokers = read_range(spark, uri, "brokers", start_ms, end_ms).cache()
    try:
        brokers = broker_rows(raw_brokers).toArrow()
        fits, bad = capacity_of(raw_brokers)
    finally:
        raw_brokers.unpersist()
    bundles = bundle_rows(read_range(spark, uri, "bundles", start_ms, end_ms)).toArrow()
    try:
        moves = read_range(spark, uri, "moves", start_ms, end_ms).select(*MOVE_COLUMNS).toArrow()
    except EmptyHistory:  # written before decisions were recorded: the replay infers their kinds
        moves = None
    return Fetched(brokers, bundles, fits, bad, moves)


MOVE_COLUMNS = ("time", "bundle", "source", "destination", "kind", "reason", "applied")


def decisions_of(moves: pa.Table | None) -> list[RecordedDecision] | None:
    """The applied decisions about a bundle, oldest first; None when the history has none recorded."""
    if moves is None:
        return None
    out = []
    for row in moves.to_pylist():
        if not row.get("applied") or not row.get("bundle") or not isinstance(row.get("time"), int):
            continue
        out.append(
            RecordedDecision(
                row["time"],
                str(row["bundle"]),
                row.get("source"),
                row.get("destination"),
                str(row.get("kind") or ""),
                str(row.get("reason") or ""),
            )
        )
    return sorted(out, key=lambda d: d.time_ms)


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

    got = fetch(spark, uri, start_ms, end_ms)
    say(
        f"Spark: {got.brokers.num_rows} broker rows ({got.bad_brokers} bad ones skipped by the capacity"
        f" fit), {got.bundles.num_rows} bundle rows, capacity lines for {len(got.fits)} brokers"
    )
    out = assemble(got)
    say(
        f"{len(out.cycles)} cycles with bundle and broker rows ({out.bundle_rows} bundle rows,"
        f" {out.broker_rows} broker rows)"
    )
    if len(out.cycles) < 2:
        raise EmptyHistory(f"{len(out.cycles)} usable cycles in the range; a replay needs at least two")
    out.steps = steps
    return out


def assemble(got: Fetched) -> Extracted:
    """The driver side of :func:`extract`: the fetched rows grouped into the replay's cycles."""
    lines = {
        f["broker"]: CapacityLine(f["broker"], f["msg_rate_per_cpu_point"], f["msg_rate_intercept"])
        for f in got.fits
    }
    brokers_by_time: dict[int, dict[str, RecordedBroker]] = {}
    broker_count = 0
    for t, names, cols in _cycles(got.brokers, "broker", BROKER_COLUMNS):
        reported = dict(zip(names, map(_broker, *cols), strict=True))
        broker_count += len(reported)
        brokers_by_time[t] = reported
    cycles: list[RecordedCycle] = []
    bundle_count = 0
    for t, names, cols in _cycles(got.bundles, "bundle", ("owner", *VALUES)):
        present = brokers_by_time.get(t)
        if present is None:
            continue
        bundles = dict(zip(names, map(RecordedBundle, *cols), strict=True))
        bundle_count += len(bundles)
        cycles.append(RecordedCycle(t, bundles, present))
    return Extracted(cycles, lines, bundle_count, broker_count, decisions=decisions_of(got.moves))


def _broker(
    cpu: float, bw_in: float, bw_out: float, r_in: float, r_out: float, t_in: float, t_out: float
) -> RecordedBroker:
    return RecordedBroker(
        cpu=cpu, bw_in=bw_in, bw_out=bw_out, msg_rate=r_in + r_out, tp_in=t_in, tp_out=t_out
    )


def _cycles(
    table: pa.Table, key: str, columns: tuple[str, ...]
) -> Iterator[tuple[int, list[str], list[list[Any]]]]:
    """Per distinct ``time`` in ascending order: (time, the rows' ``key`` names, each column's values).

    A stable sort of the time column groups the rows; strings are dictionary-encoded so a name repeated
    in every cycle is one Python object, and numbers become Python floats once, column by column.
    """
    import numpy as np
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return
    table = table.take(pc.sort_indices(table, [("time", "ascending")]))
    times = table.column("time").to_numpy()
    bounds = [0, *(np.flatnonzero(times[1:] != times[:-1]) + 1).tolist(), len(times)]
    values = [_python_values(table.column(c)) for c in (key, *columns)]
    for lo, hi in itertools.pairwise(bounds):
        yield int(times[lo]), values[0][lo:hi], [v[lo:hi] for v in values[1:]]


def _python_values(column: pa.ChunkedArray) -> list[Any]:
    import pyarrow as pa

    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        encoded = column.combine_chunks().dictionary_encode()
        names = encoded.dictionary.to_pylist()
        return [names[i] for i in encoded.indices.to_numpy(zero_copy_only=False).tolist()]
    values: list[Any] = column.to_numpy().tolist()
    return values
