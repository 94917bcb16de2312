"""Load history: every leader cycle's bundle and broker figures, appended to a Parquet dataset.

Layout under the sink's URI (Hive-style partitions any Spark or pyarrow reader understands)::

    bundles/date=YYYY-MM-DD/hour=HH/part-<uuid>.parquet
    brokers/date=YYYY-MM-DD/hour=HH/part-<uuid>.parquet
    cycles/date=YYYY-MM-DD/hour=HH/part-<uuid>.parquet

``cycles`` is a manifest of the recorded leader cycles: one row per cycle with its ``time`` (ms, the same
value as its bundle and broker rows) and the number of ``bundles`` and ``brokers`` rows written for it.
The long-term job reads the range's cycle times from it instead of scanning the bundle rows' time column;
it checks every bundle row against the manifest and falls back to that scan when a time is missing
(a manifest file whose write failed, or history written by something else), so the manifest only ever
makes the job faster, never wrong.

``append_cycle`` only takes cheap copies (each broker's usage and its ``lastStats`` mapping) and queues
them; one background thread builds the rows and does the Parquet I/O, so a slow or failing disk never
delays a shedding cycle. When the queue is full the cycle is dropped and counted rather than blocking
the leader. Decision rows (one per move, placement, split) are not queued one by one: a cycle without
a disruption budget writes 20,000+ moves at once, which a queue sized for cycles dropped nearly all of;
they gather in a list of their own (up to :data:`MAX_PENDING_DECISIONS`, far beyond any cycle) that the
writer takes whole each time it wakes, one file per hour partition. Each file is written under a hidden
name (leading ``_``, which Spark and pyarrow skip) in its final directory and then renamed, so a
reader never sees a half-written file.

One row per bundle per cycle: a bundle listed by two brokers (mid-move) is recorded once, from its
owner when the owner lists it. Cycles whose time does not advance are skipped, which keeps
``(bundle, time)`` unique — the long-term job relies on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from balancer.errors import InvalidInput
from balancer.models import LoadData, NamespaceBundleStats

log = logging.getLogger(__name__)

BUNDLE_SCHEMA = pa.schema(
    [
        ("time", pa.int64()),
        ("bundle", pa.string()),
        ("owner", pa.string()),
        ("msg_rate_in", pa.float64()),
        ("msg_rate_out", pa.float64()),
        ("msg_throughput_in", pa.float64()),
        ("msg_throughput_out", pa.float64()),
        ("topics", pa.int64()),
        ("producers", pa.int64()),
        ("consumers", pa.int64()),
    ]
)

BROKER_SCHEMA = pa.schema(
    [
        ("time", pa.int64()),
        ("broker", pa.string()),
        ("cpu_usage", pa.float64()),
        ("cpu_limit", pa.float64()),
        ("memory_usage", pa.float64()),
        ("memory_limit", pa.float64()),
        ("direct_memory_usage", pa.float64()),
        ("direct_memory_limit", pa.float64()),
        ("bandwidth_in_usage", pa.float64()),
        ("bandwidth_in_limit", pa.float64()),
        ("bandwidth_out_usage", pa.float64()),
        ("bandwidth_out_limit", pa.float64()),
        ("msg_rate_in", pa.float64()),
        ("msg_rate_out", pa.float64()),
        ("msg_throughput_in", pa.float64()),
        ("msg_throughput_out", pa.float64()),
    ]
)

CYCLE_SCHEMA = pa.schema([("time", pa.int64()), ("bundles", pa.int64()), ("brokers", pa.int64())])

# One row per decision about a bundle (a move, a placement, a split), as the leader logged it: ``kind`` is
# the decision log's (shedding, placement, split, manual), ``reason`` its explanation's reason code
# (orphan_assigned, manual_unload, manual_split, ...), ``applied`` false for a move that was refused.
MOVE_SCHEMA = pa.schema(
    [
        ("time", pa.int64()),
        ("bundle", pa.string()),
        ("source", pa.string()),
        ("destination", pa.string()),
        ("kind", pa.string()),
        ("reason", pa.string()),
        ("applied", pa.bool_()),
    ]
)

DATASETS = {"bundles": BUNDLE_SCHEMA, "brokers": BROKER_SCHEMA, "cycles": CYCLE_SCHEMA, "moves": MOVE_SCHEMA}

# Spark names object stores by its Hadoop connector (s3a://); pyarrow knows the same store as s3://.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}


def resolve_filesystem(uri: str) -> tuple[pafs.FileSystem, str, bool]:
    """(filesystem, root path, is_local) for a plain path, a ``file://`` URI or another pyarrow scheme."""
    if not uri:
        raise InvalidInput("history uri", uri, "must not be empty")
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # one letter: a Windows drive
        path = parsed.path if parsed.scheme == "file" else uri
        return pafs.LocalFileSystem(), os.path.abspath(path), True
    scheme = _SCHEME_ALIASES.get(parsed.scheme, parsed.scheme)
    target = scheme + uri[len(parsed.scheme) :]
    try:
        fs, path = pafs.FileSystem.from_uri(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
        raise InvalidInput("history uri", uri, f"pyarrow cannot write this scheme: {e}") from e
    return fs, path, False


def partition_of(now_ms: int) -> tuple[str, str]:
    """(``YYYY-MM-DD``, ``HH``) of a time, in UTC."""
    t = datetime.fromtimestamp(now_ms / 1000.0, tz=UTC)
    return t.strftime("%Y-%m-%d"), t.strftime("%H")


# What the leader thread copies per broker: its usage figures and its ``lastStats`` mapping. The mapping is
# copied (C speed); the stats objects are shared, because a report replaces them rather than mutating them.
BrokerSnapshot = tuple[str, tuple[float, ...], dict[str, NamespaceBundleStats]]


def snapshot(load: LoadData) -> list[BrokerSnapshot]:
    out: list[BrokerSnapshot] = []
    for broker, data in load.broker_data.items():
        d = data.local_data
        usage: tuple[float, ...] = (
            d.cpu.usage, d.cpu.limit, d.memory.usage, d.memory.limit,
            d.direct_memory.usage, d.direct_memory.limit,
            d.bandwidth_in.usage, d.bandwidth_in.limit, d.bandwidth_out.usage, d.bandwidth_out.limit,
            d.msg_rate_in, d.msg_rate_out, d.msg_throughput_in, d.msg_throughput_out,
        )  # fmt: skip
        out.append((broker, usage, dict(d.last_stats)))
    return out


def bundle_rows(
    now_ms: int, brokers: list[BrokerSnapshot], owners: Mapping[str, str]
) -> list[tuple[Any, ...]]:
    """One row per bundle listed in any broker's latest stats (the owner's figures win)."""
    chosen: dict[str, tuple[str, NamespaceBundleStats]] = {}
    for broker, _, last_stats in sorted(brokers, key=lambda b: b[0]):
        for bundle, stats in last_stats.items():
            if bundle not in chosen or owners.get(bundle) == broker:
                chosen[bundle] = (broker, stats)
    rows = []
    for bundle, (broker, s) in chosen.items():
        rows.append(
            (
                now_ms, bundle, owners.get(bundle, broker),
                s.msg_rate_in, s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out,
                s.topics, s.producer_count, s.consumer_count,
            )
        )  # fmt: skip
    return rows


def broker_rows(now_ms: int, brokers: list[BrokerSnapshot]) -> list[tuple[Any, ...]]:
    return [(now_ms, broker, *usage) for broker, usage, _ in brokers]


@dataclass
class SinkStats:
    cycles_queued: int = 0
    cycles_dropped: int = 0  # queue full: the writer is behind
    cycles_stale: int = 0  # time did not advance past the previous cycle
    decisions_dropped: int = 0  # more than MAX_PENDING_DECISIONS rows waiting: the writer is behind
    files_written: int = 0
    rows_written: dict[str, int] = field(
        default_factory=lambda: {"bundles": 0, "brokers": 0, "cycles": 0, "moves": 0}
    )
    write_errors: int = 0


_STOP = object()
_WAKE = object()  # decision rows are waiting (the rows themselves are in ``HistorySink._decisions``)
# Decision rows held while the writer is behind: five cycles of 100,000 moves. Beyond it a row is
# dropped and counted (``decisions_dropped``): a stalled filesystem must not grow the leader without end.
MAX_PENDING_DECISIONS = 500_000


class HistorySink:
    """Appends leader cycles to the history dataset without ever blocking the caller."""

    def __init__(
        self,
        uri: str,
        max_queue: int = 64,
        max_cycles_per_file: int = 60,
        max_pending_decisions: int = MAX_PENDING_DECISIONS,
    ) -> None:
        if max_queue < 1:
            raise InvalidInput("max_queue", max_queue, "must be at least 1")
        if max_pending_decisions < 1:
            raise InvalidInput("max_pending_decisions", max_pending_decisions, "must be at least 1")
        self._decisions: list[tuple[Any, ...]] = []
        self._max_decisions = max_pending_decisions
        self.uri = uri
        self._fs, self._root, self._local = resolve_filesystem(uri)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._max_batch = max(1, max_cycles_per_file)
        self._lock = threading.Lock()
        self._last_ms: int | None = None
        self._closed = False
        self.stats = SinkStats()
        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._thread.start()

    # ---- caller side (leader thread) ---------------------------------------------------------------
    def append_cycle(self, now_ms: int, load: LoadData, owners: Mapping[str, str]) -> None:
        """Queue one cycle; returns at once. Dropped (and counted) if the writer is too far behind."""
        with self._lock:
            if self._closed:
                return
            if self._last_ms is not None and now_ms <= self._last_ms:
                self.stats.cycles_stale += 1
                return
            self._last_ms = now_ms
        # Only cheap copies here; turning them into rows is the writer thread's work.
        item = (now_ms, snapshot(load), dict(owners))
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self.stats.cycles_dropped += 1
                dropped = self.stats.cycles_dropped
            if dropped == 1 or dropped % 100 == 0:
                log.warning("history writer is behind: %d cycles dropped so far", dropped)
            return
        with self._lock:
            self.stats.cycles_queued += 1

    def append_decision(self, record: Any, reason: str | None = None) -> None:
        """Keep a decision about a bundle (a ``DecisionRecord``) for the ``moves`` dataset; never blocks.
        ``reason``: its reason code, when its explanation is not built yet (a planned move's)."""
        self.append_decisions([(record, reason)])

    def append_decisions(self, decisions: Iterable[tuple[Any, str | None]]) -> None:
        """:meth:`append_decision` of each ``(record, reason)``, the writer woken once: a whole plan
        written appends tens of thousands, which the writer would otherwise start turning into rows
        (holding the interpreter) while the cycle is still recording them."""
        rows = []
        for record, reason in decisions:
            if reason is None:
                expl = record.explanation if isinstance(record.explanation, dict) else {}
                reason = str(expl.get("reason") or "")
            rows.append(
                (
                    int(record.time_ms),
                    str(record.bundle),
                    record.source,
                    record.destination,
                    str(record.kind),
                    reason,
                    bool(record.applied),
                )
            )
        if not rows:
            return
        with self._lock:
            if self._closed:
                return
            room = max(self._max_decisions - len(self._decisions), 0)
            woken = bool(self._decisions)  # the writer was woken for the first one and takes them all
            self._decisions.extend(rows[:room])
            dropped_now = len(rows) - min(room, len(rows))
            if dropped_now:
                before = self.stats.decisions_dropped
                self.stats.decisions_dropped += dropped_now
                dropped = self.stats.decisions_dropped
        # As often as one row at a time warned: the first drop, then every 10,000th.
        if dropped_now and (before == 0 or dropped // 10_000 > before // 10_000):
            log.warning("history writer is behind: %d decision rows dropped so far", dropped)
        if woken or not room:
            return
        with contextlib.suppress(queue.Full):  # a full queue wakes the writer anyway
            self._queue.put_nowait(_WAKE)

    def _take_decisions(self) -> list[tuple[Any, ...]]:
        with self._lock:
            rows, self._decisions = self._decisions, []
        return rows

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, then stop the writer; never waits longer than ``timeout`` seconds
        in all (a stalled filesystem with a full queue must not hold up the process's exit)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # The marker wakes an idle writer at once; with the queue full, the writer ends once drained.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("history writer did not finish within %.0f s", timeout)

    # ---- writer thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            # Closed while the queue was full (no stop marker went in): drain what is queued, then end.
            if self._closed and self._queue.empty():
                self._write(self._take_decisions(), [])
                return
            try:
                batch = [self._queue.get(timeout=0.5)]
            except queue.Empty:
                batch = []
            while batch and len(batch) < self._max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in batch)
            cycles = [item for item in batch if item is not _STOP and item is not _WAKE]
            self._write(self._take_decisions(), cycles)
            if stop:
                self._write(self._take_decisions(), [])
                return

    def _write(self, decisions: list[tuple[Any, ...]], cycles: list[Any]) -> None:
        # A writer that died would leave the queue to fill and every later cycle dropped; one that
        # cannot write the decisions still writes the cycles, and the other way round.
        for what, items, write in (
            ("decision rows", decisions, self._write_decisions),
            ("cycles", cycles, self._write_cycles),
        ):
            if not items:
                continue
            try:
                write(items)
            except Exception:
                with self._lock:
                    self.stats.write_errors += 1
                log.exception("history: %d %s could not be turned into rows", len(items), what)

    def _write_decisions(self, rows: list[tuple[Any, ...]]) -> None:
        groups: dict[tuple[str, str, str], list[tuple[Any, ...]]] = defaultdict(list)
        for row in rows:
            date, hour = partition_of(row[0])
            groups[("moves", date, hour)].append(row)
        self._write_groups(groups)

    def _write_cycles(self, cycles: list[Any]) -> None:
        # Group every queued cycle by partition so a backlog becomes one file per hour, not per cycle.
        groups: dict[tuple[str, str, str], list[tuple[Any, ...]]] = defaultdict(list)
        for now_ms, brokers, owners in cycles:
            date, hour = partition_of(now_ms)
            b_rows = bundle_rows(now_ms, brokers, owners)
            groups[("bundles", date, hour)].extend(b_rows)
            groups[("brokers", date, hour)].extend(broker_rows(now_ms, brokers))
            groups[("cycles", date, hour)].append((now_ms, len(b_rows), len(brokers)))
        # Dict order writes each partition's manifest after its bundle rows, so a reader in between sees
        # bundle times the manifest lacks, which the job detects; a failed bundle write leaves manifest times
        # without rows, which only send bundles to the job's exact (slower) path.
        self._write_groups(groups)

    def _write_groups(self, groups: Mapping[tuple[str, str, str], list[tuple[Any, ...]]]) -> None:
        for (dataset, date, hour), rows in groups.items():
            if not rows:
                continue
            try:
                self._write_file(dataset, date, hour, rows)
            except Exception:
                with self._lock:
                    self.stats.write_errors += 1
                log.exception(
                    "history write failed: %s date=%s hour=%s (%d rows)", dataset, date, hour, len(rows)
                )

    def _write_file(self, dataset: str, date: str, hour: str, rows: list[tuple[Any, ...]]) -> None:
        schema = DATASETS[dataset]
        columns = list(zip(*rows, strict=True))
        table = pa.Table.from_arrays(
            [pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema
        )
        directory = f"{self._root}/{dataset}/date={date}/hour={hour}"
        name = f"part-{uuid.uuid4().hex}.parquet"
        tmp, final = f"{directory}/_tmp-{name}", f"{directory}/{name}"
        started = time.monotonic()
        self._fs.create_dir(directory, recursive=True)
        pq.write_table(table, tmp, filesystem=self._fs)
        if self._local:
            os.replace(tmp, final)  # atomic on one filesystem
        else:
            self._fs.move(tmp, final)
        with self._lock:
            self.stats.files_written += 1
            self.stats.rows_written[dataset] += len(rows)
        log.debug(
            "history: wrote %d %s rows to %s in %.3f s", len(rows), dataset, final, time.monotonic() - started
        )
