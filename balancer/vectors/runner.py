"""Runs one parsed vector (the schema of ``tests/vectors/README.md``) and reports each round.

A file with a ``strategy`` member is a shedder vector and is run here: one strategy instance for
all its rounds (history and hit counters carry over), one :class:`LoadData` per round, the
strategy called directly as Pulsar's tests do. Other files dispatch on ``kind`` through
:data:`balancer.vectors.kinds.KIND_HANDLERS`. A vector that cannot be run yields a failed report
saying why instead of raising, so one bad file never hides the results of the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from balancer.config import LoadBalancerConfig
from balancer.errors import LoadMgrError
from balancer.models import BrokerData, BundleData, LoadData, LocalBrokerData, TimeAverageMessageData
from balancer.shedding.base import SheddingResult
from balancer.shedding.registry import create_shedder
from balancer.vectors.kinds import KIND_HANDLERS
from balancer.vectors.report import RoundReport

EXPECTATIONS = (
    "expected_unloads",
    "expected_unload_count",
    "expected_unload_count_by_broker",
    "expected_contains_brokers",
    "expected_nonempty",
    "expected_placement_for_unloaded",
)
DERIVED_PREFIX = "derived_"
# On a failure, show up to this many per-broker explanations so the diff says *why*.
MAX_EXPLANATIONS = 12


def run_vector(name: str, data: dict[str, Any]) -> list[RoundReport]:
    """Every checked round of one vector, in order."""
    if "strategy" in data:
        return _run_shedder(name, data)
    kind = data.get("kind")
    handler = KIND_HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        known = ", ".join(sorted(KIND_HANDLERS)) or "none registered"
        why = (
            f"unknown vector kind {kind!r} (known: {known})"
            if kind is not None
            else "no 'strategy' or 'kind'"
        )
        return [RoundReport(name, "vector", False, [why])]
    try:
        return handler(name, data)
    except Exception as e:  # a handler bug must not abort the whole run
        return [RoundReport(name, "vector", False, [f"{kind} handler raised {type(e).__name__}: {e}"])]


def _run_shedder(name: str, data: dict[str, Any]) -> list[RoundReport]:
    try:
        strategy = create_shedder(str(data["strategy"]))
        config = LoadBalancerConfig.from_dict(data.get("config") or {})
    except LoadMgrError as e:
        return [RoundReport(name, "setup", False, [str(e)])]
    rounds = data.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        return [RoundReport(name, "setup", False, ["'rounds' must be a non-empty list"])]
    reports: list[RoundReport] = []
    for i, rnd in enumerate(rounds):
        label = f"round {i}"
        try:
            load = load_data_of_round(rnd)
        except (ValidationError, ValueError, TypeError, AttributeError) as e:
            reports.append(RoundReport(name, label, False, [f"invalid round: {_short(e)}"]))
            # Later rounds depend on this one's state; running them would report noise.
            break
        result = strategy.find_bundles_for_unloading(load, config)
        diff = check_round(rnd, result)
        reports.append(RoundReport(name, label, not diff, diff + _context(result) if diff else []))
        derived = {k[len(DERIVED_PREFIX) :]: v for k, v in rnd.items() if k.startswith(DERIVED_PREFIX)}
        if derived:
            if "order_matters" in rnd:
                derived.setdefault("order_matters", rnd["order_matters"])
            ddiff = check_round(derived, result)
            reports.append(
                RoundReport(name, f"{label} derived", not ddiff, ddiff + _context(result) if ddiff else [])
            )
    return reports


def load_data_of_round(rnd: Mapping[str, Any]) -> LoadData:
    """The vector's brokers, bundles and recently-unloaded map as the leader's :class:`LoadData`."""
    brokers = rnd.get("brokers") or {}
    bundles = rnd.get("bundles") or {}
    load = LoadData()
    for broker, b in brokers.items():
        load.broker_data[broker] = BrokerData(local_data=LocalBrokerData.model_validate(b))
    for bundle, d in bundles.items():
        # A missing window is read as no traffic, not as Pulsar's seed defaults for unseen bundles.
        load.bundle_data[bundle] = BundleData(
            short_term_data=TimeAverageMessageData.model_validate(d.get("shortTerm") or {}),
            long_term_data=TimeAverageMessageData.model_validate(d.get("longTerm") or {}),
        )
    for bundle, ts in (rnd.get("recentlyUnloaded") or {}).items():
        load.recently_unloaded_bundles[bundle] = int(ts)
    return load


def check_round(expect: Mapping[str, Any], result: SheddingResult) -> list[str]:
    """Differences between a round's expectations and the result; empty when all hold."""
    actual = {b: list(v) for b, v in result.unloads.items() if v}
    diff: list[str] = []
    if not any(k in expect for k in EXPECTATIONS):
        return ["round carries no expectation (expected_* member)"]
    for key in EXPECTATIONS:
        if key in expect:
            diff += _CHECKS[key](expect[key], actual, result, bool(expect.get("order_matters")))
    return diff


def _unloads(exp: Any, actual: dict[str, list[str]], _r: SheddingResult, ordered: bool) -> list[str]:
    want = {b: list(v) for b, v in exp.items() if v}
    lines: list[str] = []
    for broker in sorted(set(want) | set(actual)):
        w, a = want.get(broker, []), actual.get(broker, [])
        same = w == a if ordered else sorted(w) == sorted(a)
        if same:
            continue
        line = f"unloads of {broker}: expected {w}, got {a}"
        if not ordered or sorted(w) != sorted(a):
            missing = sorted(set(w) - set(a))
            extra = sorted(set(a) - set(w))
            line += f" (missing {missing}, unexpected {extra})"
        else:
            line += " (same bundles, different order)"
        lines.append(line)
    return lines


def _count(exp: Any, actual: dict[str, list[str]], result: SheddingResult, _o: bool) -> list[str]:
    n = result.count
    return [] if n == exp else [f"unload count: expected {exp}, got {n}"]


def _count_by_broker(exp: Any, actual: dict[str, list[str]], _r: SheddingResult, _o: bool) -> list[str]:
    want = {b: n for b, n in exp.items() if n}
    got = {b: len(v) for b, v in actual.items()}
    lines = []
    for broker in sorted(set(want) | set(got)):
        if want.get(broker, 0) != got.get(broker, 0):
            lines.append(
                f"unload count of {broker}: expected {want.get(broker, 0)}, got {got.get(broker, 0)}"
            )
    return lines


def _contains(exp: Any, actual: dict[str, list[str]], _r: SheddingResult, _o: bool) -> list[str]:
    return [f"expected {b} to shed something, it shed nothing" for b in exp if b not in actual]


def _nonempty(exp: Any, actual: dict[str, list[str]], result: SheddingResult, _o: bool) -> list[str]:
    if bool(exp) == (result.count > 0):
        return []
    return [f"expected {'some' if exp else 'no'} unloads, got {result.count}: {actual}"]


def _placement(exp: Any, actual: dict[str, list[str]], result: SheddingResult, _o: bool) -> list[str]:
    lines = []
    for source, dest in exp.items():
        bundles = actual.get(source, [])
        if not bundles:
            lines.append(
                f"placement from {source}: expected bundles bound to {dest}, but {source} shed nothing"
            )
        wrong = {b: result.destinations.get(b) for b in bundles if result.destinations.get(b) != dest}
        if wrong:
            lines.append(f"placement from {source}: expected every bundle bound to {dest}, got {wrong}")
    return lines


_CHECKS: dict[str, Callable[[Any, dict[str, list[str]], SheddingResult, bool], list[str]]] = {
    "expected_unloads": _unloads,
    "expected_unload_count": _count,
    "expected_unload_count_by_broker": _count_by_broker,
    "expected_contains_brokers": _contains,
    "expected_nonempty": _nonempty,
    "expected_placement_for_unloaded": _placement,
}


def _context(result: SheddingResult) -> list[str]:
    lines = [f"why: {result.summary}"]
    for i, e in enumerate(result.brokers.values()):
        if i >= MAX_EXPLANATIONS:
            lines.append(f"... {len(result.brokers) - MAX_EXPLANATIONS} more brokers")
            break
        lines.append(f"  {e}")
    return lines


def _short(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return " | ".join(text[:3])
