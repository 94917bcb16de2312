"""The long-term pipeline on Spark: per-bundle long-term traffic and per-broker capacity from history.

Run as ``loadmgr longterm ...`` or ``spark-submit service/longterm_job.py ...`` (same arguments).
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
  5. broker capacity regression; 6. results to Parquet; 7. merge into ZooKeeper (unless dry run).
"""

from __future__ import annotations

import argparse
import bisect
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if __package__ in (None, ""):  # run as a script by spark-submit: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from balancer.errors import InvalidInput
from balancer.longterm import BundleLongTerm, long_term_message_data
from balancer.models import LONG_TERM_SAMPLES, TimeAverageMessageData

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("loadmgr.longterm")

EXIT_OK, EXIT_BAD_ARGS, EXIT_EMPTY, EXIT_ZK = 0, 2, 3, 4
VALUES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
MODES = ("pulsar", "mean", "p95")
PERCENTILE_ACCURACY = 10_000
DECAY = 1.0 - 1.0 / LONG_TERM_SAMPLES
MAX_CLOSED_FORM_CYCLES = 500_000
INVALID, UNINDEXED = -1, -2  # hour-of-day keys of the main pass for rows not summed


class EmptyHistory(Exception):
    """No usable rows in the requested range (missing path, no files, or every row invalid)."""


@dataclass
class JobOptions:
    history: str
    start_ms: int
    end_ms: int
    out: str | None = None
    zk: str | None = None
    chroot: str | None = None
    dry_run: bool = False
    master: str | None = None  # None: spark-submit's --master, else local[*]
    mode: str = "pulsar"
    p95: bool = False  # also compute p95 (always on with mode p95)


@dataclass
class JobResult:
    rows: int
    bad_rows: int
    bundles: dict[str, BundleLongTerm]
    capacity: list[dict[str, Any]]
    long_term: dict[str, TimeAverageMessageData]
    live_bundles: set[str]
    steps: list[str] = field(default_factory=list)


# ---- Spark session and input ---------------------------------------------------------------------------


def build_spark(master: str | None = "local[*]", conf: dict[str, str] | None = None) -> SparkSession:
    """A session on ``master``; with None, the master spark-submit was given (else ``local[*]``)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("loadmgr-longterm")
    # spark-submit hands its Python driver a gateway; its --master must not be overridden by a default.
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or "local[*]")
    settings = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false"}
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _bundle_schema() -> Any:
    from pyspark.sql import types as T

    fields = [T.StructField("time", T.LongType()), T.StructField("bundle", T.StringType())]
    fields += [T.StructField("owner", T.StringType())]
    fields += [T.StructField(v, T.DoubleType()) for v in VALUES]
    fields += [T.StructField(c, T.LongType()) for c in ("topics", "producers", "consumers")]
    fields += [T.StructField("date", T.DateType()), T.StructField("hour", T.IntegerType())]
    return T.StructType(fields)


def _cycle_schema() -> Any:
    from pyspark.sql import types as T

    fields = [T.StructField(c, T.LongType()) for c in ("time", "bundles", "brokers")]
    fields += [T.StructField("date", T.DateType()), T.StructField("hour", T.IntegerType())]
    return T.StructType(fields)


def read_range(spark: SparkSession, uri: str, dataset: str, start_ms: int, end_ms: int) -> DataFrame:
    """Rows of ``[start_ms, end_ms)``; partition pruning on ``date`` keeps other days unread."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    root = f"{uri.rstrip('/')}/{dataset}"
    if not _path_exists(spark, root):
        raise EmptyHistory(f"no {dataset} history at {root}")
    reader = spark.read.option("basePath", root)
    if dataset in ("bundles", "cycles"):
        reader = reader.schema(_bundle_schema() if dataset == "bundles" else _cycle_schema())
    try:
        df = reader.parquet(root)
    except AnalysisException as e:
        if "PATH_NOT_FOUND" in str(e) or "UNABLE_TO_INFER_SCHEMA" in str(e):
            raise EmptyHistory(f"no {dataset} history at {root}") from None
        raise
    first_day, last_day = _day_range(start_ms, end_ms)
    return df.where(
        (F.col("date") >= F.lit(first_day))
        & (F.col("date") <= F.lit(last_day))
        & (F.col("time") >= start_ms)
        & (F.col("time") < end_ms)
    )


def _day_range(start_ms: int, end_ms: int) -> tuple[date, date]:
    """UTC dates of the first and last millisecond of ``[start_ms, end_ms)``: the partitions to read."""
    return (
        datetime.fromtimestamp(start_ms / 1000, UTC).date(),
        datetime.fromtimestamp((end_ms - 1) / 1000, UTC).date(),
    )


def _path_exists(spark: SparkSession, root: str) -> bool:
    """Ask Hadoop's filesystem first: a missing path read by Spark logs a JVM stack trace."""
    try:
        sc = spark.sparkContext
        jvm: Any = sc._jvm
        path = jvm.org.apache.hadoop.fs.Path(root)
        return bool(path.getFileSystem(sc._jsc.hadoopConfiguration()).exists(path))
    except Exception:
        return True  # no JVM access (Spark Connect): let the read itself report a missing path


def _good_number(c: Column) -> Column:
    from pyspark.sql import functions as F

    # Spark orders NaN above every number, so NaN needs its own test.
    return c.isNotNull() & ~F.isnan(c) & (c >= 0) & (c < F.lit(float("inf")))


def valid_bundle_row() -> Column:
    """Same rule as :func:`balancer.longterm.is_valid_bundle_sample`."""
    from pyspark.sql import functions as F

    ok = (
        F.col("bundle").isNotNull()
        & (F.col("bundle") != "")
        & F.col("time").isNotNull()
        & (F.col("time") >= 0)
    )
    for v in VALUES:
        ok = ok & _good_number(F.col(v))
    return F.coalesce(ok, F.lit(False))


# ---- the computation -----------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class CycleManifest:
    """The sink's ``cycles`` manifest of a history for the job's range (read as the cycle-index step)."""

    uri: str
    start_ms: int
    end_ms: int

    def times(self, spark: SparkSession) -> list[int]:
        """Sorted distinct times of the range's cycles that wrote bundle rows; [] without a manifest.

        A local history is read with pyarrow on the driver: a Spark read of these few small files costs a
        job (~0.6 s measured at 10M rows), pyarrow ~0.05 s. Other stores go through Spark's connectors.
        """
        parsed = urlparse(self.uri)
        if parsed.scheme in ("", "file"):
            root = parsed.path if parsed.scheme == "file" else self.uri
            return self._local_times(f"{root.rstrip('/')}/cycles")
        return self._spark_times(spark)

    def _spark_times(self, spark: SparkSession) -> list[int]:
        from pyspark.sql import functions as F

        try:
            df = read_range(spark, self.uri, "cycles", self.start_ms, self.end_ms)
        except EmptyHistory:
            return []
        rows = df.where(F.col("bundles") > 0).select("time").collect()
        return sorted({int(r["time"]) for r in rows if r["time"] is not None})

    def _local_times(self, path: str) -> list[int]:
        import pyarrow as pa
        import pyarrow.dataset as pds

        if not os.path.isdir(path):
            return []
        first_day, last_day = _day_range(self.start_ms, self.end_ms)
        partitions = pds.partitioning(pa.schema([("date", pa.string()), ("hour", pa.int32())]), flavor="hive")
        try:
            table = pds.dataset(path, format="parquet", partitioning=partitions).to_table(
                columns=["time"],
                filter=(pds.field("date") >= first_day.isoformat())  # prunes other days' directories
                & (pds.field("date") <= last_day.isoformat())
                & (pds.field("time") >= self.start_ms)
                & (pds.field("time") < self.end_ms)
                & (pds.field("bundles") > 0),
            )
        except (pa.ArrowException, OSError) as e:  # a foreign or damaged manifest: the scan is always right
            log.warning("cycles manifest at %s unreadable (%s): scanning cycle times instead", path, e)
            return []
        return sorted({int(t) for t in table.column("time").to_pylist() if t is not None})


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
    """Per broker: least-squares traffic per CPU percentage point (same rule as the reference)."""
    from pyspark.sql import functions as F

    try:
        df = read_range(spark, uri, "brokers", start_ms, end_ms)
    except EmptyHistory:
        return [], 0
    cpu = F.col("cpu_usage") / F.col("cpu_limit") * 100.0
    rate = F.col("msg_rate_in") + F.col("msg_rate_out")
    tput = F.col("msg_throughput_in") + F.col("msg_throughput_out")
    ok = (
        F.col("broker").isNotNull()
        & (F.col("broker") != "")
        & F.col("time").isNotNull()
        & (F.col("time") >= 0)
    )
    ok = ok & _good_number(F.col("cpu_limit")) & (F.col("cpu_limit") > 0)
    for c in (F.col("cpu_usage"), rate, tput):
        ok = ok & _good_number(c)
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


def run(
    options: JobOptions, spark: SparkSession | None = None, progress: Callable[[str], None] | None = None
) -> JobResult:
    """The whole job; raises :class:`EmptyHistory` when the range holds no usable rows."""
    if options.mode not in MODES:
        raise InvalidInput("mode", options.mode, f"expected one of {', '.join(MODES)}")
    if options.start_ms >= options.end_ms:
        raise InvalidInput("--from", options.start_ms, "must be before --to")
    steps: list[str] = []
    started = time.monotonic()

    def say(msg: str) -> None:
        line = f"[longterm +{time.monotonic() - started:6.1f}s] {msg}"
        steps.append(line)
        (progress or (lambda m: print(m, file=sys.stderr, flush=True)))(line)

    spark = spark or build_spark(options.master)
    raw = read_range(spark, options.history, "bundles", options.start_ms, options.end_ms)
    manifest = CycleManifest(options.history, options.start_ms, options.end_ms)
    with_p95 = options.p95 or options.mode == "p95"
    bundles, rows, bad, live = compute_bundles(spark, raw, say, with_p95, manifest)
    t = time.monotonic()
    capacity, bad_brokers = compute_capacity(spark, options.history, options.start_ms, options.end_ms)
    took = time.monotonic() - t
    say(f"capacity model for {len(capacity)} brokers ({bad_brokers} bad broker rows skipped) in {took:.1f} s")
    long_term = {b: long_term_message_data(r, options.mode) for b, r in bundles.items()}
    result = JobResult(rows, bad, bundles, capacity, long_term, live, steps)
    if options.out:
        t = time.monotonic()
        write_results(spark, options.out, result)
        took = time.monotonic() - t
        say(
            f"wrote {len(bundles)} bundle and {len(capacity)} broker results to {options.out} in {took:.1f} s"
        )
    return result


def write_results(spark: SparkSession, out: str, result: JobResult) -> None:
    rows = []
    for b, r in sorted(result.bundles.items()):
        lt = result.long_term[b]
        rows.append(
            (
                b,
                r.samples,
                r.first_ms,
                r.last_ms,
                b in result.live_bundles,
                r.pulsar.msg_rate_in,
                r.pulsar.msg_rate_out,
                r.pulsar.msg_throughput_in,
                r.pulsar.msg_throughput_out,
                *r.mean,
                *(r.p95 or (None, None, None, None)),
                r.peak_hour,
                r.peak_hour_msg_rate,
                lt.msg_rate_in,
                lt.msg_rate_out,
                lt.msg_throughput_in,
                lt.msg_throughput_out,
                lt.num_samples,
            )
        )
    cols = ["bundle string", "samples long", "first_ms long", "last_ms long", "live boolean"]
    for prefix in ("pulsar", "mean", "p95"):
        cols += [f"{prefix}_{v} double" for v in VALUES]
    cols += ["peak_hour int", "peak_hour_msg_rate double"]
    cols += [f"long_term_{v} double" for v in VALUES] + ["long_term_num_samples int"]
    base = out.rstrip("/")
    spark.createDataFrame(rows, ", ".join(cols)).coalesce(1).write.mode("overwrite").parquet(
        f"{base}/bundles"
    )
    broker_cols = (
        "broker string, samples long, cpu_mean double, msg_rate_per_cpu_point double,"
        " msg_rate_intercept double, throughput_per_cpu_point double, throughput_intercept double"
    )
    keys = [c.split()[0] for c in broker_cols.split(",")]
    spark.createDataFrame([tuple(c[k] for k in keys) for c in result.capacity], broker_cols).coalesce(
        1
    ).write.mode("overwrite").parquet(f"{base}/brokers")


# ---- command line (shared by `loadmgr longterm` and spark-submit) --------------------------------------


def parse_time(text: str, flag: str) -> int:
    """ISO-8601 to epoch ms; a time without a zone is UTC; a bare date is its midnight."""
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(flag, text, "expected an ISO-8601 time, e.g. 2024-05-01T00:00:00Z") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int((t - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--history", required=True, help="History dataset URI (a directory, file://, hdfs://, s3a://)"
    )
    p.add_argument("--from", dest="start", required=True, help="Start of the range, ISO-8601 (inclusive)")
    p.add_argument("--to", dest="end", required=True, help="End of the range, ISO-8601 (exclusive)")
    p.add_argument("--out", help="Where to write the results as Parquet")
    p.add_argument("--zk", help="ZooKeeper hosts to merge longTermData into (required unless --dry-run)")
    p.add_argument("--chroot", help="ZooKeeper chroot, e.g. /pulsar")
    p.add_argument("--dry-run", action="store_true", help="Compute and write results, leave ZooKeeper alone")
    p.add_argument(
        "--master",
        help="Spark master: local[*] (default; under spark-submit, its own --master) or a cluster URL",
    )
    p.add_argument(
        "--p95", action="store_true", help="Also compute p95 figures (slower; implied by --mode p95)"
    )
    p.add_argument(
        "--mode", choices=MODES, default="pulsar", help="What becomes longTermData (default pulsar)"
    )


def options_from_args(args: argparse.Namespace) -> JobOptions:
    if not args.dry_run and not args.zk:
        raise InvalidInput("--zk", None, "needed unless --dry-run")
    return JobOptions(
        history=args.history,
        start_ms=parse_time(args.start, "--from"),
        end_ms=parse_time(args.end, "--to"),
        out=args.out,
        zk=args.zk,
        chroot=args.chroot,
        dry_run=args.dry_run,
        master=args.master,
        mode=args.mode,
        p95=args.p95,
    )


def execute(args: argparse.Namespace, spark: SparkSession | None = None) -> int:
    """Run from parsed arguments; prints one-line errors and returns the exit code."""
    try:
        options = options_from_args(args)
        result = run(options, spark)
    except InvalidInput as e:
        print(f"loadmgr longterm: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except EmptyHistory as e:
        print(f"loadmgr longterm: {e} (range {args.start} .. {args.end}); nothing to do", file=sys.stderr)
        return EXIT_EMPTY
    if options.dry_run or not options.zk:
        print(
            f"loadmgr longterm: dry run, {len(result.long_term)} bundles computed, ZooKeeper untouched",
            file=sys.stderr,
        )
        return EXIT_OK
    return merge_into_zookeeper(options, result)


def merge_into_zookeeper(options: JobOptions, result: JobResult) -> int:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from service.longterm_zk import merge_long_term

    hosts = f"{options.zk}{options.chroot or ''}"
    started = time.monotonic()
    client = KazooClient(hosts=hosts, timeout=15.0)
    try:
        client.start(timeout=15.0)
    except KazooTimeoutError:
        print(f"loadmgr longterm: ZooKeeper at {hosts} did not answer; results not merged", file=sys.stderr)
        return EXIT_ZK
    try:
        report = merge_long_term(client, result.long_term, result.live_bundles)
    finally:
        client.stop()
        client.close()
    print(
        f"[longterm] zookeeper: {report.updated} updated, {report.created} created, {report.skipped} skipped,"
        f" {report.conflicts_retried} retried conflicts in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    for o in report.outcomes:
        if o.reason.startswith("skipped"):
            log.info("%s", o)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="longterm_job.py", description=__doc__.splitlines()[0] if __doc__ else None
    )
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
