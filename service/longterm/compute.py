"""The long-term computation on Spark: per-bundle long-term traffic and per-broker capacity.

The numbers are defined by :mod:`balancer.longterm`; this module computes them without Python UDFs
and without bringing raw rows to the driver (only per-bundle and per-broker results are collected).

Pulsar's window is sequential, but its result is ``sum(w(i, N) * x_i)`` with ``w`` depending only on
the sample's rank ``i`` and the bundle's count ``N`` (:func:`balancer.longterm.closed_form_weight`):
``r**(N-M)/M`` for the first ``M`` samples and ``r**(N-i)/M`` after them (``M`` = 1000,
``r = 1 - 1/M``). With ``g`` a sample's global cycle number
(its time's position among the range's ``G`` distinct times), a bundle present in every cycle from
the first one on has ``i = g``, so its weight is ``r**(N-G) * u_g / M`` with the per-cycle factor
``u_g = r**(G - max(g, M))``. One aggregation pass therefore collects ``sum(u_g * x)`` per bundle and
the driver applies the per-bundle factor to bundle-sized results. Bundles under the cap need
no rank (the window is the exact mean). The few past the cap that joined later or missed a cycle
are recomputed exactly with a ``row_number`` window over their own rows.

Steps (each logs its counts and time):
  1. cycle index: the range's cycle times, numbered on the driver (one small broadcast table). They come
     from the sink's ``cycles`` manifest (one row per cycle) when the history has one, else from a scan
     of the bundle rows' time column;
  2. one pass per (bundle, hour of day): valid counts, first/last sample, sums, the ``u_g``-weighted sums,
     hourly rates for the peak hour; rolled up per bundle in Spark. Invalid rows are counted in the same
     pass (their own grouping key). The index is left-joined and rows whose time it lacks are counted: a
     manifest that missed a cycle makes the job rescan the times and redo the pass, so the manifest can
     only make the job faster, never wrong. A manifest time without bundle rows is harmless: it leaves a
     gap in the cycle numbers of the bundles around it, which sends them to step 3;
  3. window pass for the bundles the closed form cannot serve (usually none);
  4. p95 on request (``percentile_approx`` sketches cost several times the rest, hence opt-in);
  5. broker capacity regression (:func:`compute_capacity`); results to Parquet and the ZooKeeper merge are
     :mod:`service.longterm.job`'s.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from balancer.longterm import BundleLongTerm
from balancer.models import LONG_TERM_SAMPLES, TimeAverageMessageData
from service.longterm.input import (
    VALUES,
    CycleManifest,
    EmptyHistory,
    good_number,
    read_range,
    valid_bundle_row,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("loadmgr.longterm")

PERCENTILE_ACCURACY = 10_000
DECAY = 1.0 - 1.0 / LONG_TERM_SAMPLES
MAX_CLOSED_FORM_CYCLES = 500_000
INVALID, UNINDEXED = -1, -2  # hour-of-day keys of the main pass for rows not summed


def compute_bundles(
    spark: SparkSession,
    raw: DataFrame,
    progress: Callable[[str], None],
    with_p95: bool = False,
    manifest: CycleManifest | None = None,
) -> tuple[dict[str, BundleLongTerm], int, int, set[str]]:
    """(per-bundle results, valid rows, invalid rows, bundles live at the end of the range).

    ``manifest``: where the history's cycles manifest is; None scans the cycle times from ``raw``.
    """
    from pyspark.sql import functions as F

    m = LONG_TERM_SAMPLES
    t0 = time.monotonic()
    df = raw.select("bundle", "time", *VALUES).withColumn("ok", valid_bundle_row())
    times = manifest.times(spark) if manifest is not None else []
    source = "from the cycles manifest"
    if not times:
        times, source = _scanned_times(df), "scanned from the bundle rows"
    progress(f"cycle index: {len(times)} distinct cycle times {source} in {time.monotonic() - t0:.1f} s")
    if not times:
        raise EmptyHistory("no valid bundle rows in the requested range")

    t1 = time.monotonic()
    stats, bad, unindexed = _main_pass(spark, df, times)
    if unindexed:
        # A manifest time is missing (a failed manifest write, a reader racing the sink, foreign history):
        # those rows joined no cycle number, so the pass is redone with an index that covers every row.
        msg = f"{unindexed} valid rows have a time missing from the cycles manifest: rescanning cycle times"
        log.warning("%s", msg)
        progress(msg)
        times = _scanned_times(df)
        stats, bad, unindexed = _main_pass(spark, df, times)
        progress(f"cycle index: {len(times)} distinct cycle times scanned from the bundle rows")
        if unindexed:  # cannot happen: the scan saw every row's time
            raise RuntimeError(f"{unindexed} rows missing from a scanned cycle index")
    total_cycles = len(times)
    closed_form = total_cycles <= MAX_CLOSED_FORM_CYCLES
    for st in stats.values():  # g is monotonic in time: the last sample's cycle number
        st["last_g"] = bisect.bisect_left(times, int(st["last_ms"])) + 1
    rows = sum(int(r["n"]) for r in stats.values())
    total_rows = rows + bad
    progress(
        f"read {total_rows} rows, {bad} bad (skipped), {len(stats)} bundles in {time.monotonic() - t1:.1f} s"
    )
    if not stats:
        raise EmptyHistory("no valid bundle rows in the requested range")
    end_ms = max(int(r["last_ms"]) for r in stats.values())
    live = {b for b, r in stats.items() if int(r["last_ms"]) == end_ms}

    t2 = time.monotonic()
    # A manifest time without rows (or a scanned time with only invalid rows) leaves a gap in the numbers
    # g of the bundles present around it, so last_g != n and they are ranked by the window: exact, slower.
    windowed = [
        b for b, r in stats.items() if r["n"] > m and not (closed_form and _from_first_cycle(r, times[0]))
    ]
    ok = F.col("ok")
    if windowed:
        for r in _window_sums(df.where(ok & F.col("bundle").isin(windowed))).collect():
            stats[r["bundle"]].update({f"w_{v}": r[f"w_{v}"] for v in VALUES})
    progress(
        f"{sum(1 for r in stats.values() if r['n'] > m)} bundles past {m} samples, {len(windowed)} of them"
        f" ranked by a window in {time.monotonic() - t2:.1f} s"
    )
    if with_p95:
        t3 = time.monotonic()
        p95 = (
            df.where(ok)
            .groupBy("bundle")
            .agg(*[F.percentile_approx(v, 0.95, PERCENTILE_ACCURACY).alias(f"p95_{v}") for v in VALUES])
        )
        for r in p95.collect():
            stats[r["bundle"]].update({k: r[k] for k in r.asDict() if k != "bundle"})
        progress(f"p95 for {len(stats)} bundles in {time.monotonic() - t3:.1f} s")
    results = {b: _assemble(b, r, total_cycles) for b, r in stats.items()}
    return results, rows, bad, live


def _scanned_times(df: DataFrame) -> list[int]:
    """Sorted distinct times of the bundle rows: a scan of the time column, one row per cycle collected."""
    rows = df.select("time").distinct().collect()
    return sorted(int(r["time"]) for r in rows if r["time"] is not None)


def _main_pass(
    spark: SparkSession, df: DataFrame, times: list[int]
) -> tuple[dict[str, dict[str, Any]], int, int]:
    """(per-bundle sums of the valid rows, invalid rows, valid rows whose time is not in ``times``).

    One scan. The cycle numbers g (a time's position in ``times``) reach the executors as a broadcast table
    and are left-joined, so a row whose time the index lacks is kept and counted, not lost. Invalid and
    unindexed rows are counted through the grouping key (hour -1 and -2) rather than filtered out: that
    costs nothing measurable, where an observed metric for the row count made the pass ~30% slower.
    """
    import pyarrow as pa
    from pyspark.sql import functions as F

    m = LONG_TERM_SAMPLES
    total_cycles = len(times)
    numbered = spark.createDataFrame(
        pa.table({"time": pa.array(times, pa.int64()), "g": pa.array(range(1, total_cycles + 1), pa.int64())})
    )
    u = F.pow(F.lit(DECAY), (F.lit(total_cycles) - F.greatest(F.col("g"), F.lit(m))).cast("double"))
    cycles = numbered.select("time", u.alias("u"))
    hour = (F.floor(F.col("time") / 3_600_000) % 24).cast("int")
    key = F.when(~F.col("ok"), F.lit(INVALID)).when(F.col("u").isNull(), F.lit(UNINDEXED)).otherwise(hour)
    hourly = (
        df.join(F.broadcast(cycles), "time", "left")
        .groupBy("bundle", key.alias("h"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min("time").alias("first_ms"),
            F.max("time").alias("last_ms"),
            *[F.sum(v).alias(f"sum_{v}") for v in VALUES],
            *[F.sum(F.col("u") * F.col(v)).alias(f"u_{v}") for v in VALUES],
        )
    )
    # Sums of the invalid groups may hold NaN or nulls: only their counts are read.
    valid = F.col("h") >= 0

    def of_valid(c: Column | str) -> Column:
        return F.when(valid, F.col(c) if isinstance(c, str) else c)

    rate = (F.col("sum_msg_rate_in") + F.col("sum_msg_rate_out")) / F.col("n")
    rolled = hourly.groupBy("bundle").agg(
        F.sum(of_valid("n")).alias("n"),
        F.sum(F.when(F.col("h") == INVALID, F.col("n"))).alias("bad"),
        F.sum(F.when(F.col("h") == UNINDEXED, F.col("n"))).alias("unindexed"),
        F.min(of_valid("first_ms")).alias("first_ms"),
        F.max(of_valid("last_ms")).alias("last_ms"),
        F.max_by("h", of_valid(F.struct(rate, -F.col("h")))).alias("peak_hour"),  # null orderings skipped
        F.max(of_valid(rate)).alias("peak_rate"),
        *[F.sum(of_valid(f"{kind}_{v}")).alias(f"{kind}_{v}") for kind in ("sum", "u") for v in VALUES],
    )
    stats: dict[str, dict[str, Any]] = {}
    bad = unindexed = 0
    for r in rolled.collect():
        bad += int(r["bad"] or 0)
        unindexed += int(r["unindexed"] or 0)
        if r["n"]:  # else only invalid (or unindexed) rows, or the rows without a bundle name
            stats[r["bundle"]] = r.asDict()
    return stats, bad, unindexed


def _from_first_cycle(r: dict[str, Any], first_ms: int) -> bool:
    """Present in every cycle from the range's first one: its rank is its global cycle number."""
    return bool(r["first_ms"] == first_ms and r["last_g"] == r["n"])


def _window_sums(rows: DataFrame) -> DataFrame:
    """Exact rank weights for arbitrary bundles (sorts their rows; used only where the closed form cannot)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    m = LONG_TERM_SAMPLES
    n = F.count(F.lit(1)).over(Window.partitionBy("bundle"))
    rank = F.row_number().over(Window.partitionBy("bundle").orderBy("time"))
    w = F.pow(F.lit(DECAY), (n - F.greatest(rank, F.lit(m))).cast("double")) / m
    weighted = rows.withColumn("w", w)
    return weighted.groupBy("bundle").agg(*[F.sum(F.col("w") * F.col(v)).alias(f"w_{v}") for v in VALUES])


def _assemble(bundle: str, s: dict[str, Any], total_cycles: int) -> BundleLongTerm:
    m = LONG_TERM_SAMPLES
    n = int(s["n"])
    mean = tuple(float(s[f"sum_{v}"]) / n for v in VALUES)
    if n <= m:
        window = mean  # below the cap Pulsar's window is the exact mean
    elif "w_msg_rate_in" in s:
        window = tuple(float(s[f"w_{v}"]) for v in VALUES)
    else:
        # rank == g: sample weight r**(n-max(g,M))/M == r**(n-G) * u_g / M
        window = tuple(DECAY ** (n - total_cycles) * float(s[f"u_{v}"]) / m for v in VALUES)
    pulsar = TimeAverageMessageData(
        max_samples=m,
        num_samples=min(n, m),
        msg_rate_in=window[0],
        msg_rate_out=window[1],
        msg_throughput_in=window[2],
        msg_throughput_out=window[3],
    )
    p95 = tuple(float(s[f"p95_{v}"]) for v in VALUES) if "p95_msg_rate_in" in s else None
    return BundleLongTerm(
        bundle=bundle,
        samples=n,
        first_ms=int(s["first_ms"]),
        last_ms=int(s["last_ms"]),
        pulsar=pulsar,
        mean=(mean[0], mean[1], mean[2], mean[3]),
        p95=(p95[0], p95[1], p95[2], p95[3]) if p95 else None,
        peak_hour=int(s["peak_hour"]),
        peak_hour_msg_rate=float(s["peak_rate"]),
    )


def compute_capacity(
    spark: SparkSession, uri: str, start_ms: int, end_ms: int
) -> tuple[list[dict[str, Any]], int]:
    """Per broker: least-squares traffic per CPU percentage point; row validity is
    :func:`balancer.longterm.is_valid_broker_sample`'s, field by field (tested to agree)."""
    try:
        df = read_range(spark, uri, "brokers", start_ms, end_ms)
    except EmptyHistory:
        return [], 0
    return capacity_of(df)


def capacity_of(df: DataFrame) -> tuple[list[dict[str, Any]], int]:
    """:func:`compute_capacity` over broker rows already read (the replay reuses its cached read)."""
    from pyspark.sql import functions as F

    # Divided only where the limit is positive: Pulsar's default limit is 0 ({0,0} before the first
    # sample), and under ANSI mode a division by zero fails the whole job, not just the row.
    cpu = F.when(F.col("cpu_limit") > 0, F.col("cpu_usage") / F.col("cpu_limit") * 100.0)
    rate = F.col("msg_rate_in") + F.col("msg_rate_out")
    tput = F.col("msg_throughput_in") + F.col("msg_throughput_out")
    ok = (
        F.col("broker").isNotNull()
        & (F.col("broker") != "")
        & F.col("time").isNotNull()
        & (F.col("time") >= 0)
    )
    ok = ok & good_number(F.col("cpu_limit")) & (F.col("cpu_limit") > 0)
    # Each field on its own, before any sum: msg_rate_in -5 plus a large msg_rate_out is a good sum
    # and a bad row. The sums are checked too (two finite values can overflow to Infinity).
    for name in ("cpu_usage", "msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"):
        ok = ok & good_number(F.col(name))
    for c in (cpu, rate, tput):
        ok = ok & good_number(c)
    df = df.select(
        "broker",
        cpu.alias("x"),
        rate.alias("rate"),
        tput.alias("tput"),
        F.coalesce(ok, F.lit(False)).alias("ok"),
    )
    good = F.col("ok")

    def on_good(name: str) -> Column:
        return F.when(good, F.col(name))

    fits = df.groupBy("broker").agg(
        F.count(F.when(good, 1)).alias("samples"),
        F.count(F.when(~good, 1)).alias("bad"),
        F.avg(on_good("x")).alias("cpu_mean"),
        F.var_pop(on_good("x")).alias("vx"),
        *[F.covar_pop(on_good("x"), on_good(y)).alias(f"c_{y}") for y in ("rate", "tput")],
        *[F.avg(on_good(y)).alias(f"m_{y}") for y in ("rate", "tput")],
    )
    out = []
    bad = 0
    for r in fits.collect():
        bad += int(r["bad"])
        if r["broker"] is None or not r["samples"]:
            continue
        row: dict[str, Any] = {
            "broker": r["broker"],
            "samples": int(r["samples"]),
            "cpu_mean": float(r["cpu_mean"]),
        }
        spread = r["samples"] >= 2 and r["vx"] is not None and r["vx"] > 0
        for y, name in (("rate", "msg_rate"), ("tput", "throughput")):
            slope = float(r[f"c_{y}"]) / float(r["vx"]) if spread else None
            row[f"{name}_per_cpu_point"] = slope
            row[f"{name}_intercept"] = (
                float(r[f"m_{y}"]) - slope * float(r["cpu_mean"]) if slope is not None else None
            )
        out.append(row)
    return out, bad
