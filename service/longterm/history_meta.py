"""What a history was recorded under: the leader's load-balancer config, beside the Parquet datasets.

``<history>/_loadmgr.json`` holds ``{"config": {Pulsar key: value, ...}, "strategy": {"shedder": ...,
"placement": ...}, "written_ms": ...}``. The leading ``_`` keeps Spark and pyarrow from reading it as
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
from service.longterm.history import resolve_filesystem

log = logging.getLogger(__name__)

META_NAME = "_loadmgr.json"


def write_meta(uri: str, config: LoadBalancerConfig) -> None:
    """Record ``config`` at the history root; a failure is logged, never raised (history is optional)."""
    doc = {
        "config": config.model_dump(mode="json"),
        "strategy": {
            "shedder": config.loadBalancerLoadSheddingStrategy,
            "placement": config.loadBalancerLoadPlacementStrategy,
        },
        "written_ms": int(time.time() * 1000),
    }
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
            doc = json.loads(f.read().decode())
    except Exception as e:  # garbage or an unreachable store: say so and use the defaults
        return None, f"{META_NAME} unreadable ({e}): Pulsar's default config assumed"
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        return None, f"{META_NAME} has no 'config' object: Pulsar's default config assumed"
    return doc, f"config recorded in {META_NAME} when the history writer started"
