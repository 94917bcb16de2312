"""Speed of the replay's Spark extraction against a bare ``groupBy("time")`` over the same Parquet rows.

    flock /tmp/loadmgr-heavy.lock nice -n 5 .venv/bin/python bench/replay_speed.py \
        [--brokers 1000] [--bundles 100000] [--cycles 1000] [--small-cycles 10]

Generates history with Spark itself (``spark.range``) in the sink's layout: one bundle row per bundle per
one-minute cycle (owner ``bundle % brokers``) and one broker row per broker per cycle. Then, at the
small size (``--small-cycles``) and the full one (``--cycles``), times, best of ``--repeat`` after a
warm-up and alternating so load from elsewhere hits both alike:

- bare: ``groupBy("time").agg(count, sum)`` of the bundle rows, to the ``noop`` sink;
- extraction: what :func:`service.longterm.replay_extract.extract` asks Spark for — the bundle rows
  validated and grouped per cycle into arrays, the broker rows likewise, and the capacity lines —
  with the grouped rows to the ``noop`` sink, so both sides stop at the executors' output.

The driver side of ``extract`` (streaming the grouped cycles and building the replay's inputs) is timed
at the small size only: it is Python work proportional to the rows, which the replay then iterates
anyway. Prints each ratio extraction / bare.
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

from service.longterm.compute import compute_capacity
from service.longterm.input import build_spark, read_range
from service.longterm.replay_extract import broker_cycles, bundle_cycles, extract

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--bundles", type=int, default=100_000)
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--small-cycles", type=int, default=10)
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
            "spark.sql.shuffle.partitions": str(4 * (os.cpu_count() or 2)),
        },
    )
    tmp = tempfile.mkdtemp(prefix="replay-bench-", dir=args.tmp)
    try:
        for cycles in (args.small_cycles, args.cycles):
            path = f"{tmp}/c{cycles}"
            end_ms = T0 + cycles * STEP_MS
            started = time.perf_counter()
            rows = generate(spark, path, args.brokers, args.bundles, cycles)
            print(
                f"generated {rows:,} bundle rows ({args.brokers} brokers x {args.bundles:,} bundles x"
                f" {cycles} cycles) in {time.perf_counter() - started:.1f} s",
                flush=True,
            )

            def bare(path: str = path) -> object:
                from pyspark.sql import functions as F

                df = spark.read.parquet(f"{path}/bundles")
                agg = df.groupBy("time").agg(F.count(F.lit(1)), F.sum("msg_rate_in"))
                return agg.write.format("noop").mode("overwrite").save()

            def extraction(path: str = path, end_ms: int = end_ms) -> object:
                bundles = bundle_cycles(read_range(spark, path, "bundles", T0, end_ms))
                bundles.write.format("noop").mode("overwrite").save()
                brokers = broker_cycles(read_range(spark, path, "brokers", T0, end_ms))
                brokers.write.format("noop").mode("overwrite").save()
                return compute_capacity(spark, path, T0, end_ms)

            timers = {"bare": bare, "extraction": extraction}
            if cycles == args.small_cycles:
                for fn in timers.values():  # warm-up: class loading and JIT of the first jobs
                    fn()
            best = best_of(timers, args.repeat)
            print(
                f"{rows:>13,} rows: bare groupBy(time) {best['bare']:7.2f} s, extraction"
                f" {best['extraction']:7.2f} s = {best['extraction'] / best['bare']:.2f}x",
                flush=True,
            )
            if cycles == args.small_cycles:
                started = time.perf_counter()
                got = extract(spark, path, T0, end_ms, lambda _: None)
                took = time.perf_counter() - started
                print(
                    f"{rows:>13,} rows: full extract() with the driver building {len(got.cycles)} cycles"
                    f" {took:7.2f} s = {took / best['bare']:.2f}x bare",
                    flush=True,
                )
            shutil.rmtree(path, ignore_errors=True)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
