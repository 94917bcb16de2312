"""The long-term job: ``loadmgr longterm ...`` or ``spark-submit service/longterm/job.py ...``.

Reads a time range of the history (:mod:`service.longterm.input`), computes per-bundle long-term traffic
and per-broker capacity (:mod:`service.longterm.compute`), writes the results to Parquet and, unless
``--dry-run``, merges ``longTermData`` into ZooKeeper (:mod:`service.longterm.merge`). Every step logs
its counts and time. Exit codes: 0 done, 2 bad arguments, or ZooKeeper's ACL refused some nodes to
loadmgr's identity (every other node is merged, the refused ones are named), 3 empty or missing
history, 4 ZooKeeper unreachable (before, or during the merge: that stops there and is resumable, see
:mod:`service.longterm.merge`), 5 the history could not be read. Each failure is one line on stderr.
Corrupt Parquet files in the range are skipped (Spark logs each one), not fatal.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script by spark-submit: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from balancer.errors import InvalidInput
from balancer.longterm import BundleLongTerm, long_term_message_data
from balancer.models import TimeAverageMessageData
from service.longterm.compute import compute_bundles, compute_capacity
from service.longterm.input import VALUES, CycleManifest, EmptyHistory, build_spark, read_range
from service.zookeeper.session.hosts import check_hosts
from service.zookeeper.session.security import ZkSecurity

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


log = logging.getLogger("loadmgr.longterm")

EXIT_OK, EXIT_BAD_ARGS, EXIT_EMPTY, EXIT_ZK, EXIT_INPUT = 0, 2, 3, 4, 5
MODES = ("pulsar", "mean", "p95")


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
    # loadmgr's ZooKeeper identity, ACL and TLS (LOADMGR_ZK_*): the leader created the bundle-data
    # nodes with it, so the job needs the same one to reach and update them
    security: ZkSecurity = field(default_factory=ZkSecurity)


@dataclass
class JobResult:
    rows: int
    bad_rows: int
    bundles: dict[str, BundleLongTerm]
    capacity: list[dict[str, Any]]
    long_term: dict[str, TimeAverageMessageData]
    live_bundles: set[str]
    steps: list[str] = field(default_factory=list)


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
    # One damaged file must not stop the nightly job; Spark logs each file it skips.
    spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
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
    """Every argument checked before Spark starts: a bad one costs no computation."""
    if not args.dry_run and not args.zk:
        raise InvalidInput("--zk", None, "needed unless --dry-run")
    if args.zk:
        try:
            check_hosts(args.zk)
        except ValueError as e:
            raise InvalidInput("--zk", args.zk, str(e)) from None
    if args.chroot and (not args.chroot.startswith("/") or args.chroot.endswith("/")):
        raise InvalidInput("--chroot", args.chroot, "expected a ZooKeeper path such as /pulsar")
    security = ZkSecurity()
    if args.zk and not args.dry_run:
        from service.settings import Settings

        security = ZkSecurity.from_settings(Settings())
    if args.out:
        local = args.out[len("file://") :] if args.out.startswith("file://") else args.out
        if "://" not in local and Path(local).exists() and not Path(local).is_dir():
            raise InvalidInput("--out", args.out, "is an existing file; results are a directory")
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
        security=security,
    )


def execute(args: argparse.Namespace, spark: SparkSession | None = None) -> int:
    """Run from parsed arguments; prints one-line errors and returns the exit code."""
    try:
        options = options_from_args(args)
    except InvalidInput as e:
        print(f"loadmgr longterm: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    if not options.dry_run and options.zk:
        problem = zookeeper_problem(options)  # before hours of computation, not after
        if problem is not None:
            print(f"loadmgr longterm: {problem}; nothing computed", file=sys.stderr)
            return EXIT_ZK
    try:
        result = run(options, spark)
    except InvalidInput as e:
        print(f"loadmgr longterm: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except EmptyHistory as e:
        print(f"loadmgr longterm: {e} (range {args.start} .. {args.end}); nothing to do", file=sys.stderr)
        return EXIT_EMPTY
    except Exception as e:  # Spark's read and write errors arrive as Py4J/Analysis exceptions
        from service.longterm.input import spark_error_line

        first = spark_error_line(e)
        print(f"loadmgr longterm: the history or --out could not be used: {first}", file=sys.stderr)
        return EXIT_INPUT
    if options.dry_run or not options.zk:
        print_long_term(result, options.out)
        print(
            f"loadmgr longterm: dry run, {len(result.long_term)} bundles computed, ZooKeeper untouched",
            file=sys.stderr,
        )
        return EXIT_OK
    return merge_into_zookeeper(options, result)


DRY_RUN_ROWS = 20


def print_long_term(result: JobResult, out: str | None, limit: int = DRY_RUN_ROWS) -> None:
    """What a dry run computed, busiest bundles first: the longTermData a merge would write."""
    rows = sorted(
        result.long_term.items(), key=lambda kv: -(kv[1].msg_throughput_in + kv[1].msg_throughput_out)
    )
    print(f"{'bundle':<48} {'samples':>7} {'msg/s in':>10} {'msg/s out':>10} {'MB/s in':>8} {'MB/s out':>8}")
    for bundle, lt in rows[:limit]:
        print(
            f"{bundle:<48} {lt.num_samples:>7} {lt.msg_rate_in:>10.1f} {lt.msg_rate_out:>10.1f} "
            f"{lt.msg_throughput_in / 1e6:>8.2f} {lt.msg_throughput_out / 1e6:>8.2f}"
        )
    if len(rows) > limit:
        where = f" (all of them in {out})" if out else ""
        print(f"... {len(rows) - limit} more bundles{where}")


def zookeeper_problem(options: JobOptions) -> str | None:
    """Why the merge could not even start (None: ZooKeeper answers, with loadmgr's TLS and identity,
    and the bundle-data root is readable)."""
    from kazoo.exceptions import AuthFailedError, KazooException, NoNodeError
    from kazoo.handlers.threading import KazooTimeoutError

    from service.zookeeper.session.client import new_client

    hosts = f"{options.zk}{options.chroot or ''}"
    try:
        client = new_client(hosts, options.security, 15.0)
    except InvalidInput as e:
        return str(e)
    how = f"as {options.security.describe()}"
    try:
        client.start(timeout=8.0)
        with contextlib.suppress(NoNodeError):
            client.get_children("/loadbalance/bundle-data")
    except AuthFailedError:
        return f"ZooKeeper at {hosts} refused the login {how}"
    except (KazooTimeoutError, OSError):
        return f"ZooKeeper at {hosts} did not answer {how}"
    except KazooException as e:
        return f"ZooKeeper at {hosts} refused {how}: {type(e).__name__}"
    finally:
        client.stop()
        client.close()
    return None


def merge_into_zookeeper(options: JobOptions, result: JobResult) -> int:
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    from service.longterm.merge import merge_long_term
    from service.zookeeper.session.client import new_client

    hosts = f"{options.zk}{options.chroot or ''}"
    started = time.monotonic()
    client = new_client(hosts, options.security, 15.0)
    try:
        client.start(timeout=15.0)
    except (KazooTimeoutError, KazooException) as e:
        print(
            f"loadmgr longterm: ZooKeeper at {hosts}: {type(e).__name__}; results not merged", file=sys.stderr
        )
        return EXIT_ZK
    try:
        report = merge_long_term(client, result.long_term, result.live_bundles)
    finally:
        client.stop()
        client.close()
    if report.stopped is not None:
        print(
            f"loadmgr longterm: ZooKeeper stopped the merge after {report.done} of {len(result.long_term)}"
            f" bundles ({report.stopped}); each bundle is one compare-and-set write, so rerunning the job"
            " for the same range completes it",
            file=sys.stderr,
        )
        return EXIT_ZK
    if report.refused:
        # every other node is merged; a rerun cannot change an ACL, so none is promised
        names = ", ".join(report.refused[:5]) + (" ..." if len(report.refused) > 5 else "")
        print(
            f"loadmgr longterm: merged {report.done} of {len(result.long_term)} bundles; ZooKeeper's ACL"
            f" refused {len(report.refused)} to {options.security.describe()}: {names} (grant this identity"
            " write on those nodes, or set LOADMGR_ZK_AUTH to the identity that owns them)",
            file=sys.stderr,
        )
        return EXIT_BAD_ARGS
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
    parser = argparse.ArgumentParser(prog="job.py", description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
