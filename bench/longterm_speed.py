"""Speed of the Spark long-term job against a bare ``groupBy("bundle").avg(...)`` over the same Parquet.

    .venv/bin/python bench/longterm_speed.py [--rows 10000000] [--small 1000000] [--cycles 5000]

Generates history with Spark itself (``spark.range``) in the sink's layout (``bundles/date=/hour=``),
one row per bundle per one-minute cycle. Both sizes keep the cycle count and scale the bundle count,
so every bundle is past Pulsar's 1000-sample cap and the rank-weighted path is what is measured.
Each timing is the best of ``--repeat`` runs after a warm-up, all in one Spark session.
Prints the ratio job / bare average per size and the large / small time ratio of each.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.longterm_job import VALUES, build_spark, compute_bundles, read_range

T0 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
STEP_MS = 60_000


def generate(spark: object, path: str, rows: int, cycles: int, gappy_fraction: float) -> int:
    from pyspark.sql import functions as F

    bundles = rows // cycles
    df = spark.range(rows)  # type: ignore[attr-defined]
    cycle = F.floor(F.col("id") / bundles)
    b = F.col("id") % bundles
    t = F.lit(T0) + cycle * STEP_MS
    hour_of_day = F.floor(t / 3_600_000) % 24
    daily = 1.0 + 0.5 * F.sin(hour_of_day / 24.0 * 6.283185307179586)
    base = (b % 97 + 1) * 10.0 * daily
    df = df.select(
        t.alias("time"),
        F.format_string("tenant/ns%d/0x%08x_0x%08x", b % 50, b, b + 1).alias("bundle"),
        F.format_string("broker-%d:8080", b % 8).alias("owner"),
        (base * (0.9 + 0.2 * F.rand(1))).alias("msg_rate_in"),
        (base * 2 * (0.9 + 0.2 * F.rand(2))).alias("msg_rate_out"),
        (base * 1000 * (0.9 + 0.2 * F.rand(3))).alias("msg_throughput_in"),
        (base * 2000 * (0.9 + 0.2 * F.rand(4))).alias("msg_throughput_out"),
        (b % 7 + 1).alias("topics"),
        F.lit(1).cast("long").alias("producers"),
        F.lit(2).cast("long").alias("consumers"),
        F.date_format(F.from_unixtime(t / 1000), "yyyy-MM-dd").alias("date"),
        F.hour(F.from_unixtime(t / 1000)).alias("hour"),
    )
    if gappy_fraction > 0:
        # a few bundles miss some cycles: they take the window (sort) path
        gappy = (b % int(1 / gappy_fraction) == 0) & (cycle % 13 == 5)
        df = df.where(~gappy)
    df.repartition("date", "hour").write.mode("overwrite").partitionBy("date", "hour").parquet(
        f"{path}/bundles"
    )
    return bundles


def timed(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--small", type=int, default=1_000_000)
    ap.add_argument("--cycles", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--gappy-fraction", type=float, default=0.0, help="fraction of bundles with missing cycles"
    )
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--p95", action="store_true", help="include the optional p95 pass in the job's time")
    ap.add_argument("--driver-memory", default="8g")
    args = ap.parse_args()

    spark = build_spark(
        args.master,
        {
            "spark.ui.enabled": "false",
            "spark.driver.memory": args.driver_memory,
            "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 2)),
        },
    )
    tmp = tempfile.mkdtemp(prefix="longterm-bench-")
    results: dict[int, tuple[float, float]] = {}
    try:
        end_ms = T0 + args.cycles * STEP_MS
        for rows in (args.small, args.rows):
            path = f"{tmp}/h{rows}"
            started = time.perf_counter()
            bundles = generate(spark, path, rows, args.cycles, args.gappy_fraction)
            took = time.perf_counter() - started
            print(f"generated {rows:,} rows ({bundles} bundles x {args.cycles} cycles) in {took:.1f} s")

            def bare(path: str = path) -> object:
                return spark.read.parquet(f"{path}/bundles").groupBy("bundle").avg(*VALUES).collect()

            def job(path: str = path) -> object:
                raw = read_range(spark, path, "bundles", T0, end_ms)
                return compute_bundles(spark, raw, lambda m: print("   ", m), with_p95=args.p95)

            if not results:
                bare()  # warm-up: the first Spark jobs of a JVM pay for class loading and JIT
                job()
            # alternate the two so a burst of load from elsewhere on the machine hits both alike
            t_bare, t_job = float("inf"), float("inf")
            for _ in range(args.repeat):
                t_bare = min(t_bare, timed(bare, 1))
                t_job = min(t_job, timed(job, 1))
            results[rows] = (t_bare, t_job)
            ratio = t_job / t_bare
            print(f"{rows:>12,} rows: bare groupBy().avg() {t_bare:6.2f} s, job {t_job:6.2f} s, {ratio:.2f}x")
        (sb, sj), (lb, lj) = results[args.small], results[args.rows]
        scale = args.rows / args.small
        growth = f"bare x{lb / sb:.2f}, job x{lj / sj:.2f}"
        print(f"scaling {args.small:,} -> {args.rows:,} rows (x{scale:.0f}): {growth}")
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
