"""What a history was recorded under: the leader's load-balancer config, beside the Parquet datasets.

``<history>/_loadmgr.json`` holds ``{"config": {Pulsar key: value, ...}, "strategy": {"shedder": ...,
"placement": ...}, "written_ms": ..., "cluster": ...}`` (``cluster``: whose history it is, when
known). The leading ``_`` keeps Spark and pyarrow from reading it as
data. ``loadmgr replay`` takes the recorded strategy and config keys from it (the shedding interval,
thresholds and grace period decide what a replayed strategy does), so a replay of a demo history needs
no flags. It is the config at the time the writer started: later dynamic updates are not in it, which
the replay states. Absent or unreadable, the replay falls back to Pulsar's defaults and says so.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pyarrow.fs as pafs

from balancer.config import LoadBalancerConfig
from service.json_bounds import loads
from service.longterm.history import resolve_filesystem

log = logging.getLogger(__name__)

META_NAME = "_loadmgr.json"


def write_meta(uri: str, config: LoadBalancerConfig, cluster: str | None = None) -> None:
    """Record ``config`` (and whose history this is: ``cluster``) at the history root; a failure is
    logged, never raised (history is optional)."""
    doc: dict[str, Any] = {
        "config": config.model_dump(mode="json"),
        "strategy": {
            "shedder": config.loadBalancerLoadSheddingStrategy,
            "placement": config.loadBalancerLoadPlacementStrategy,
        },
        "written_ms": int(time.time() * 1000),
    }
    if cluster:
        doc["cluster"] = cluster
    try:
        fs, root, _ = resolve_filesystem(uri)
        fs.create_dir(root, recursive=True)
        with fs.open_output_stream(f"{root}/{META_NAME}") as out:
            out.write(json.dumps(doc, indent=1, sort_keys=True).encode())
    except Exception as e:  # a read-only or unreachable store must not stop the leader
        log.warning("could not record the history's config at %s: %s", uri, e)


def read_meta(uri: str) -> tuple[dict[str, Any] | None, str]:
    """(the recorded document or None, a sentence saying where it came from or why it is missing)."""
    try:
        fs, root, _ = resolve_filesystem(uri)
        path = f"{root}/{META_NAME}"
        if fs.get_file_info(path).type != pafs.FileType.File:
            return None, f"no {META_NAME} in the history: Pulsar's default config assumed"
        with fs.open_input_stream(path) as f:
            doc = loads(f.read())
    except Exception as e:  # garbage or an unreachable store: say so and use the defaults
        return None, f"{META_NAME} unreadable ({e}): Pulsar's default config assumed"
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        return None, f"{META_NAME} has no 'config' object: Pulsar's default config assumed"
    return doc, f"config recorded in {META_NAME} when the history writer started"


def history_missing(uri: str) -> bool:
    """True when nothing at all exists at ``uri`` (a mistyped path): ``replay`` says so in one line
    instead of a Spark run. False when something is there, or the store cannot be asked."""
    try:
        fs, root, _ = resolve_filesystem(uri)
        return bool(fs.get_file_info(root).type == pafs.FileType.NotFound)
    except Exception as e:  # an unreachable store: leave it to Spark, which names what it finds
        log.debug("cannot tell whether %s exists: %s", uri, e)
        return False


def recorded_span(uri: str) -> tuple[int, int, int] | None:
    """(first, last cycle time in ms, cycle count) from the history's ``cycles`` manifest, read with
    pyarrow in a fraction of a second; None when it cannot be read (no manifest, a store pyarrow cannot
    open): the caller then leaves it to Spark. Lets ``replay`` say what a history holds before Spark."""
    try:
        import pyarrow.dataset as ds

        fs, root, _ = resolve_filesystem(uri)
        info = fs.get_file_info(f"{root}/cycles")
        if info.type != pafs.FileType.Directory:
            return None
        table = ds.dataset(f"{root}/cycles", filesystem=fs, format="parquet", partitioning="hive").to_table(
            columns=["time"]
        )
    except Exception as e:  # hostile or foreign files: no pre-check, Spark reports what it finds
        log.debug("no cycle span for %s: %s", uri, e)
        return None
    if table.num_rows == 0:
        return None
    import pyarrow.compute as pc

    times = table.column("time")
    lo, hi = pc.min(times).as_py(), pc.max(times).as_py()
    if not isinstance(lo, int) or not isinstance(hi, int):
        return None
    return lo, hi, table.num_rows


def span_text(span: tuple[int, int, int] | None) -> str:
    """``holds 412 cycles from 2026-11-26 23:42:46 to 2026-11-27 00:12:40 UTC`` (or says it is unknown)."""
    if span is None:
        return "holds no readable cycle manifest"
    from datetime import UTC, datetime

    def at(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")

    return f"holds {span[2]} cycles from {at(span[0])} to {at(span[1])} UTC"
