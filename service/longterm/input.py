"""History input of the long-term job: the Spark session, range reads, row validity, the cycles manifest.

The history layout is the sink's (:mod:`service.longterm.history`): ``bundles/``, ``brokers/`` and ``cycles/``
datasets partitioned by ``date=`` and ``hour=``. Validity rules mirror :mod:`balancer.longterm`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("loadmgr.longterm")

VALUES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")


class EmptyHistory(Exception):
    """No usable rows in the requested range (missing path, no files, or every row invalid)."""


def java_output_shown() -> bool:
    """Spark's Java output (log4j, stack traces of failed tasks) reaches the terminal only at debug
    level: ``LOADMGR_LOG_LEVEL=DEBUG`` or ``LOADMGR_DEBUG=1``. Otherwise it goes to :func:`java_log_path`."""
    return os.environ.get("LOADMGR_LOG_LEVEL", "").strip().upper() == "DEBUG" or bool(
        os.environ.get("LOADMGR_DEBUG")
    )


def java_log_path() -> Path:
    """Where this process's Spark JVM writes its output when it is not shown."""
    return Path(tempfile.gettempdir()) / f"loadmgr-spark-{os.getpid()}.log"


_KEEP_JAVA_LOG: list[bool] = []


def _drop_java_log() -> None:
    if not _KEEP_JAVA_LOG:
        with contextlib.suppress(OSError):
            java_log_path().unlink()


def _quiet_gateway(conf: Any) -> None:
    """Start this process's Spark JVM with its stdout and stderr in :func:`java_log_path`, unless it
    runs already (then its output goes where it went), spark-submit started it, or debug shows it."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if java_output_shown() or "PYSPARK_GATEWAY_PORT" in os.environ or SparkContext._gateway is not None:
        return
    log_file = java_log_path().open("ab")
    # A run that went well leaves nothing in /tmp; one that failed keeps the log (spark_error_line)
    atexit.register(_drop_java_log)
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log_file, "stderr": log_file})  # type: ignore[no-untyped-call]
    finally:
        log_file.close()  # the JVM holds its own descriptor
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    log.debug("Spark's Java output goes to %s", java_log_path())


_SPARK_ERROR = re.compile(r"\[([A-Z][A-Z0-9_.]+)\] ([^\n]*)")


def spark_error_line(e: BaseException) -> str:
    """One line saying why a Spark job failed: the first ``[ERROR_CLASS] message`` in the Java error
    (which names the file for a read), else the exception's first line; never the stack trace."""
    _KEEP_JAVA_LOG.append(True)  # the JVM's own words may say more: keep its log
    text = str(e)
    found = _SPARK_ERROR.search(text)
    if found is not None:
        line = f"[{found.group(1)}] {found.group(2).strip()}"
    else:
        line = (text.strip().splitlines() or [type(e).__name__])[0]
    return line[:400]


def spark_errors() -> tuple[type[BaseException], ...]:
    """What a Spark job raises into Python when the data (or the cluster) fails it."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException)


def build_spark(master: str | None = "local[*]", conf: dict[str, str] | None = None) -> SparkSession:
    """A session on ``master``; with None, the master spark-submit was given (else ``local[*]``)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    spark_conf = SparkConf().setAppName("loadmgr-longterm")
    # spark-submit hands its Python driver a gateway; its --master must not be overridden by a default.
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        spark_conf.setMaster(master or "local[*]")
    settings = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false"}
    settings.update(conf or {})
    for k, v in settings.items():
        spark_conf.set(k, v)
    _quiet_gateway(spark_conf)
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
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


def _broker_schema() -> Any:
    from pyspark.sql import types as T

    from service.longterm.history import BROKER_SCHEMA

    # Given rather than inferred: inferring a Parquet schema costs a Spark job of its own (a footer read),
    # seconds on a cold JVM; a column a foreign file lacks reads as null and fails the validity rules.
    spark_type = {"int64": T.LongType(), "string": T.StringType(), "double": T.DoubleType()}
    fields = [T.StructField(f.name, spark_type[str(f.type)]) for f in BROKER_SCHEMA]
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
    schemas = {"bundles": _bundle_schema, "brokers": _broker_schema, "cycles": _cycle_schema}
    if dataset in schemas:
        reader = reader.schema(schemas[dataset]())
    try:
        df = reader.parquet(root)
    except AnalysisException as e:
        if "PATH_NOT_FOUND" in str(e) or "UNABLE_TO_INFER_SCHEMA" in str(e):
            raise EmptyHistory(f"no {dataset} history at {root}") from None
        raise
    first_day, last_day = day_range(start_ms, end_ms)
    return df.where(
        (F.col("date") >= F.lit(first_day))
        & (F.col("date") <= F.lit(last_day))
        & (F.col("time") >= start_ms)
        & (F.col("time") < end_ms)
    )


def day_range(start_ms: int, end_ms: int) -> tuple[date, date]:
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


def good_number(c: Column) -> Column:
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
        ok = ok & good_number(F.col(v))
    return F.coalesce(ok, F.lit(False))


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
        first_day, last_day = day_range(self.start_ms, self.end_ms)
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
