"""Small builders for shedder tests: clusters written like the vectors, usages in percent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from balancer.models import LoadData
from balancer.vectors.runner import load_data_of_round

MB = 1024 * 1024


def _use(percent: float) -> dict[str, float]:
    return {"usage": percent, "limit": 100.0}


def broker(
    cpu: float = 0.0,
    bw_in: float = 0.0,
    bw_out: float = 0.0,
    direct: float = 0.0,
    memory: float = 0.0,
    rate: float = 0.0,
    tp: float = 0.0,
    bundles: Iterable[str] = (),
) -> dict[str, Any]:
    """A broker report; ``rate``/``tp`` are in+out totals, split evenly."""
    return {
        "cpu": _use(cpu),
        "memory": _use(memory),
        "directMemory": _use(direct),
        "bandwidthIn": _use(bw_in),
        "bandwidthOut": _use(bw_out),
        "msgRateIn": rate / 2,
        "msgRateOut": rate / 2,
        "msgThroughputIn": tp / 2,
        "msgThroughputOut": tp / 2,
        "bundles": list(bundles),
    }


def bundle(rate: float = 0.0, tp: float = 0.0) -> dict[str, Any]:
    st = {
        "msgRateIn": rate / 2,
        "msgRateOut": rate / 2,
        "msgThroughputIn": tp / 2,
        "msgThroughputOut": tp / 2,
    }
    return {"shortTerm": st, "longTerm": dict(st)}


def cluster(
    brokers: Mapping[str, dict[str, Any]],
    bundles: Mapping[str, dict[str, Any]] | None = None,
    recent: Mapping[str, int] | None = None,
) -> LoadData:
    return load_data_of_round(
        {"brokers": brokers, "bundles": bundles or {}, "recentlyUnloaded": recent or {}}
    )
