"""Helpers shared by the placement/split/hash vector handlers: config, comparisons, reports."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.vectors.report import RoundReport

_WEIGHT_KEYS = {
    "cpu": "loadBalancerCPUResourceWeight",
    "memory": "loadBalancerMemoryResourceWeight",
    "directmemory": "loadBalancerDirectMemoryResourceWeight",
    "bwin": "loadBalancerBandwidthInResourceWeight",
    "bwout": "loadBalancerBandwidthOutResourceWeight",
}


def vector_config(
    raw: Mapping[str, Any] | None, extra: Mapping[str, Any] | None = None
) -> LoadBalancerConfig:
    """The vector's Pulsar keys (its descriptive members ignored); ``weights`` prose like
    ``"cpu 1.0, directMemory 0.1"`` becomes the weight keys."""
    values: dict[str, Any] = {}
    known = LoadBalancerConfig.model_fields
    for k, v in (raw or {}).items():
        if k in known:
            values[k] = v
        elif k == "weights" and isinstance(v, str) and not v.startswith("defaults"):
            for part in v.split(","):
                name, _, num = part.strip().rpartition(" ")
                key = _WEIGHT_KEYS.get(name.strip().lower())
                if key is not None:
                    values[key] = float(num)
    values.update(extra or {})
    return LoadBalancerConfig.from_dict(values)


def close(a: Any, b: Any, tol: float = 1e-6) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)
    return bool(a == b)


def expect(label: str, expected: Any, actual: Any, tol: float | None = None) -> list[str]:
    """One diff line when ``actual`` differs from ``expected`` (numbers within ``tol``)."""
    if tol is not None:
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            if set(expected) == set(actual) and all(close(expected[k], actual[k], tol) for k in expected):
                return []
        elif close(expected, actual, tol):
            return []
    elif expected == actual:
        return []
    return [f"{label}: expected {expected!r}, got {actual!r}"]


Case = Callable[[], list[str]]


def run_cases(name: str, cases: list[tuple[str, Case]]) -> list[RoundReport]:
    """One report per case; an exception inside a case fails that case with its message."""
    out = []
    for label, fn in cases:
        try:
            diff = fn()
        except Exception as e:
            diff = [f"raised {type(e).__name__}: {e}"]
        out.append(RoundReport(name, label, not diff, diff))
    return out


def snake(camel: str) -> str:
    """A vector's camelCase member name as the model's snake_case attribute."""
    return "".join("_" + c.lower() if c.isupper() else c for c in camel)


def unsupported(name: str, kind: str, data: Mapping[str, Any]) -> list[RoundReport]:
    return [RoundReport(name, "vector", False, [f"no {kind} handler for source {data.get('source')!r}"])]
