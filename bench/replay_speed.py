"""Speed of the replay's Spark extraction against a bare ``groupBy("time")`` over the same Parquet rows.

    flock /tmp/loadmgr-heavy.lock nice -n 5 .venv/bin/python bench/replay_speed.py \
        [--brokers 1000] [--bundles 100000] [--cycles 10 100 1000] [--driver-max-rows 20000000]

Generates history with Spark itself (``spark.range``) in the sink's layout: one bundle row per bundle per
one-minute cycle (owner ``bundle % brokers``) and one broker row per broker per cycle. Then, per size in
``--cycles``, times (best of ``--repeat`` after a warm-up at the first size, alternating so load from
elsewhere hits every variant alike):

- bare, two columns: ``groupBy("time").agg(count, sum(msg_rate_in))`` of the bundle rows, to the ``noop``
  sink (the baseline of the first measurement: Parquet reads two of the seven columns);
- bare, same columns: ``groupBy("time")`` with an aggregate over every column the extraction reads
  (``count``, ``max(bundle)``, ``max(owner)``, the sums of the four values), read through the same
  range reader, to ``noop``: the same rows and the same bytes decoded, grouped per cycle;
- extraction to the executors: the plans :func:`service.longterm.replay_extract.fetch` runs (valid bundle
  rows, valid broker rows, capacity fit) with the rows to the ``noop`` sink;
- extraction to the driver: :func:`~service.longterm.replay_extract.fetch` itself, the rows arriving on
  the driver as Arrow tables (skipped above ``--driver-max-rows``: the driver would hold them all).

The driver's Python side of ``extract`` (grouping the Arrow rows per cycle and building the replay's
objects) is timed at the first size only. Prints each ratio against both bare variants.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.longterm.compute import capacity_of
from service.longterm.input import VALUES, build_spark, read_range
from service.longterm.replay_extract import assemble, broker_rows, bundle_rows, fetch, tune_session

T0 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
STEP_MS = 60_000


def generate(spark: object, path: str, brokers: int, bundles: int, cycles: int) -> int:
    from pyspark.sql import functions as F

    rows = bundles * cycles
    df = spark.range(rows)  # type: ignore[attr-defined]
    cycle = F.floor(F.col("id") / bundles)
    b = F.col("id") % bundles
    t = F.lit(T0) + cycle * STEP_MS
    base = (b % 97 + 1) * 10.0 * (1.0 + 0.5 * F.sin(cycle / 60.0))

    def parts(frame: object) -> object:
        return frame.select(  # type: ignore[attr-defined]
            "*",
            F.date_format(F.from_unixtime(F.col("time") / 1000), "yyyy-MM-dd").alias("date"),
            F.hour(F.from_unixtime(F.col("time") / 1000)).alias("hour"),
        )

    bundle_rows = df.select(
        t.alias("time"),
        F.format_string("tenant/ns%d/0x%08x_0x%08x", b % 50, b, b + 1).alias("bundle"),
        F.format_string("broker-%d:8080", b % brokers).alias("owner"),
        (base * (0.9 + 0.2 * F.rand(1))).alias("msg_rate_in"),
        (base * 2 * (0.9 + 0.2 * F.rand(2))).alias("msg_rate_out"),
        (base * 1000 * (0.9 + 0.2 * F.rand(3))).alias("msg_throughput_in"),
        (base * 2000 * (0.9 + 0.2 * F.rand(4))).alias("msg_throughput_out"),
        (b % 7 + 1).alias("topics"),
        F.lit(1).cast("long").alias("producers"),
        F.lit(2).cast("long").alias("consumers"),
    )
    parts(bundle_rows).write.mode("overwrite").partitionBy("date", "hour").parquet(f"{path}/bundles")  # type: ignore[attr-defined]
    br = spark.range(brokers * cycles)  # type: ignore[attr-defined]
    k = F.floor(F.col("id") / brokers)
    load = 20.0 + 30.0 * (1.0 + F.sin(k / 60.0 + F.col("id") % brokers)) + 5 * F.rand(5)
    rate = (load - 5.0) * 1000.0
    broker_rows = br.select(
        (F.lit(T0) + k * STEP_MS).alias("time"),
        F.format_string("broker-%d:8080", F.col("id") % brokers).alias("broker"),
        (load * 8).alias("cpu_usage"), F.lit(800.0).alias("cpu_limit"),
        F.lit(1e6).alias("memory_usage"), F.lit(4e6).alias("memory_limit"),
        F.lit(0.0).alias("direct_memory_usage"), F.lit(0.0).alias("direct_memory_limit"),
        (rate / 10).alias("bandwidth_in_usage"), F.lit(1.25e6).alias("bandwidth_in_limit"),
        (rate / 5).alias("bandwidth_out_usage"), F.lit(1.25e6).alias("bandwidth_out_limit"),
        (rate / 3).alias("msg_rate_in"), (rate * 2 / 3).alias("msg_rate_out"),
        (rate * 300).alias("msg_throughput_in"), (rate * 600).alias("msg_throughput_out"),
    )  # fmt: skip
    parts(broker_rows).write.mode("overwrite").partitionBy("date", "hour").parquet(f"{path}/brokers")  # type: ignore[attr-defined]
    return rows


def best_of(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            started = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def timers(spark: Any, path: str, end_ms: int, to_driver: bool) -> dict[str, Callable[[], object]]:
    from pyspark.sql import functions as F

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    def bare2() -> object:
        df = spark.read.parquet(f"{path}/bundles")
        return noop(df.groupBy("time").agg(F.count(F.lit(1)), F.sum("msg_rate_in")))

    def bare_same() -> object:
        df = read_range(spark, path, "bundles", T0, end_ms)
        aggs = [F.count(F.lit(1)), F.max("bundle"), F.max("owner"), *[F.sum(v) for v in VALUES]]
        return noop(df.groupBy("time").agg(*aggs))

    def executors() -> object:
        raw = read_range(spark, path, "brokers", T0, end_ms).cache()
        noop(broker_rows(raw))
        fits = capacity_of(raw)
        raw.unpersist()
        noop(bundle_rows(read_range(spark, path, "bundles", T0, end_ms)))
        return fits

    got: dict[str, Callable[[], object]] = {"bare2": bare2, "bare_same": bare_same, "executors": executors}
    if to_driver:
        got["driver"] = lambda: fetch(spark, path, T0, end_ms)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--bundles", type=int, default=100_000)
    ap.add_argument("--cycles", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--driver-max-rows", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--tmp", default=None, help="where to generate the history (default: a temp dir)")
    args = ap.parse_args()

    spark = build_spark(
        args.master,
        {
            "spark.ui.enabled": "false",
            "spark.driver.memory": args.driver_memory,
            "spark.driver.maxResultSize": "0",
            "spark.sql.shuffle.partitions": str(4 * (os.cpu_count() or 2)),
        },
    )
    tune_session(spark)
    tmp = tempfile.mkdtemp(prefix="replay-bench-", dir=args.tmp)
    try:
        for n, cycles in enumerate(args.cycles):
            path = f"{tmp}/c{cycles}"
            end_ms = T0 + cycles * STEP_MS
            started = time.perf_counter()
            rows = generate(spark, path, args.brokers, args.bundles, cycles)
            print(
                f"generated {rows:,} bundle rows ({args.brokers} brokers x {args.bundles:,} bundles x"
                f" {cycles} cycles) in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            fns = timers(spark, path, end_ms, rows <= args.driver_max_rows)
            if n == 0:
                for fn in fns.values():  # warm-up: class loading and JIT of the first jobs
                    fn()
            best = best_of(fns, args.repeat)
            line = ", ".join(f"{k} {v:.2f} s" for k, v in best.items())
            print(f"{rows:>13,} rows: {line}", flush=True)
            for side in ("executors", "driver"):
                if side in best:
                    same, two = best[side] / best["bare_same"], best[side] / best["bare2"]
                    print(
                        f"{rows:>13,} rows: extraction to the {side} = {same:.2f}x bare same-columns,"
                        f" {two:.2f}x bare two-column",
                        flush=True,
                    )
            if n == 0:
                fetched = fetch(spark, path, T0, end_ms)
                started = time.perf_counter()
                got = assemble(fetched)
                print(
                    f"{rows:>13,} rows: the driver's Python side of extract() (grouping {len(got.cycles)}"
                    f" cycles, building the replay's objects) {time.perf_counter() - started:.2f} s",
                    flush=True,
                )
                del got, fetched
            shutil.rmtree(path, ignore_errors=True)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
