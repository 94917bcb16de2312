"""Handlers of the ``split_condition``, ``split_algorithm`` and ``topic_to_bundle`` vector kinds."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from balancer.bundles import (
    BundleRange,
    NamespaceBundles,
    bundle_name,
    split_in_n,
    topic_hash,
    topic_namespace,
)
from balancer.errors import InvalidInput
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageMessageData,
)
from balancer.split import algorithms as alg
from balancer.split.conditions import find_bundles_to_split
from balancer.vectors.kinds_common import Case, expect, run_cases, unsupported, vector_config
from balancer.vectors.report import RoundReport

FLOW_BY_RATE = "FlowOrQpsEquallyDivideBundleSplitAlgorithmTest#testSplitBundleByFlowOrQps"


# ---- split_condition ------------------------------------------------------------------------------
def handle_split_condition(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    config = vector_config(data.get("config"))

    def case() -> list[str]:
        stats = {b: NamespaceBundleStats.model_validate(s) for b, s in inp["broker_lastStats"].items()}
        load = LoadData(
            broker_data={"broker-1:8080": BrokerData(local_data=LocalBrokerData(last_stats=stats))}
        )
        long_terms = inp.get("bundleData_longTerm") or {
            b: d.get("longTermData", {}) for b, d in (inp.get("bundleData") or {}).items()
        }
        for b, lt in long_terms.items():
            load.bundle_data[b] = BundleData(long_term_data=TimeAverageMessageData.model_validate(lt))
        counts: dict[str, int] = {}
        if "namespace_current_bundle_count" in inp:
            counts = {b.rsplit("/", 1)[0]: int(inp["namespace_current_bundle_count"]) for b in stats}
        found = find_bundles_to_split(load, config, counts)
        if "number_of_bundles_to_split" in exp:
            return expect("bundles to split", exp["number_of_bundles_to_split"], len(found))
        if "bundlesToSplit" in exp:
            return expect("bundles to split", exp["bundlesToSplit"], {c.bundle: c.broker for c in found})
        return ["vector has no recognised expectation"]

    return run_cases(name, [("split condition", case)])


# ---- split_algorithm ------------------------------------------------------------------------------
def handle_split_algorithm(name: str, data: dict[str, Any]) -> list[RoundReport]:
    cfg = data.get("config") or {}
    algorithm = cfg.get("algorithm")
    operation = str(cfg.get("operation", ""))
    if algorithm == alg.RANGE_EQUALLY_DIVIDE:
        return _range(name, data)
    if algorithm == alg.TOPIC_COUNT_EQUALLY_DIVIDE:
        return _topic_count(name, data)
    if algorithm == alg.SPECIFIED_POSITIONS_DIVIDE:
        return _positions(name, data)
    if algorithm == alg.FLOW_OR_QPS_EQUALLY_DIVIDE:
        return _flow_or_qps(name, data)
    if operation.startswith("NamespaceBundleFactory.splitBundles"):
        inp = data["input"]
        if "boundary_cases" in inp:
            return _fixed_boundary(name, data)
        if "cases" in inp:
            return _split_in_n(name, data)
        if "start" in inp:
            return _split_chain(name, data)
    return unsupported(name, "split_algorithm", data)


def _hexes(xs: list[int] | None) -> list[str] | None:
    return None if xs is None else [f"0x{x:08x}" for x in xs]


def _range(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]

    def case() -> list[str]:
        got = alg.split_boundaries(
            alg.RANGE_EQUALLY_DIVIDE, BundleRange(inp["lower"], inp["upper"]), vector_config({})
        )
        return expect("boundaries", exp["boundaries"], got)

    return run_cases(name, [("boundaries", case)])


def _topic_count(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]

    def case() -> list[str]:
        diff = []
        for t, h in (inp.get("topic_hashes_crc32") or {}).items():
            diff += expect(f"hash of {t!r}", h, alg.raw_hash(t))
        got = alg.split_boundaries(
            alg.TOPIC_COUNT_EQUALLY_DIVIDE, BundleRange.full(), vector_config({}), inp["topics"]
        )
        want = exp["boundaries"] or []
        return diff + expect("boundaries", want, got)

    return run_cases(name, [("boundaries", case)])


def _positions(name: str, data: dict[str, Any]) -> list[RoundReport]:
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(data["input"]["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            lower = c.get("lower")
            upper = c.get("upper")
            rng = BundleRange(0 if lower is None else lower, 0xFFFFFFFF if upper is None else upper)
            topics = c["topics"] if isinstance(c["topics"], list) else ["t1", "t2"]
            want = c["expected"]
            try:
                got = alg.split_boundaries(
                    alg.SPECIFIED_POSITIONS_DIVIDE, rng, vector_config({}), topics, c["positions"]
                )
            except InvalidInput as e:
                if isinstance(want, str) and want.startswith("error"):
                    return []
                return [f"unexpected error: {e}"]
            if isinstance(want, str):
                return [f"expected {want!r}, got boundaries {got}"]
            return expect("boundaries", want or [], got)

        cases.append((f"case {i}", case))
    return run_cases(name, cases)


def _flow_topics(data: dict[str, Any]) -> dict[str, NamespaceBundleStats]:
    inp = data["input"]
    if "topic_stats" in inp:
        return {t: NamespaceBundleStats.model_validate(s) for t, s in inp["topic_stats"].items()}
    if data.get("source") == FLOW_BY_RATE:
        # The input is prose; this is the topic set it describes.
        out: dict[str, NamespaceBundleStats] = {}
        base = "persistent://test-tenant1/test-namespace1/test"
        for i in range(1, 13):
            rate_in = 24.5 if i <= 5 else 25.5
            for j in range(20):
                out[f"{base}{i}-partition-{j}"] = NamespaceBundleStats(
                    msg_rate_in=rate_in, msg_rate_out=25, msg_throughput_in=1000, msg_throughput_out=1000
                )
        out[f"{base}695-partition-0"] = NamespaceBundleStats(
            msg_rate_in=25, msg_rate_out=35, msg_throughput_in=1000, msg_throughput_out=1000
        )
        return out
    raise InvalidInput("input", inp, "no topic_stats and no known topic description")


def _flow_or_qps(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    config = vector_config(data.get("config"))

    def case() -> list[str]:
        stats = _flow_topics(data)
        diff: list[str] = []
        if "topic_count" in inp:
            diff += expect("topic count", inp["topic_count"], len(stats))
        if "bundle_total_msg_rate" in inp:
            diff += expect(
                "bundle msg rate", inp["bundle_total_msg_rate"], sum(s.msg_rate for s in stats.values()), 1e-9
            )
        for t, h in (inp.get("topic_hashes_crc32") or {}).items():
            diff += expect(f"hash of {t}", h, alg.raw_hash(t))
        got = alg.split_boundaries(
            alg.FLOW_OR_QPS_EQUALLY_DIVIDE, BundleRange.full(), config, list(stats), topic_stats=stats
        )
        diff += expect("boundaries", exp["boundaries"], got)
        # Upstream's own property: every group between consecutive cuts stays under both limits.
        hashes = sorted((alg.raw_hash(t), s) for t, s in stats.items())
        edges = [0, *got, 0x100000000]
        for lo, hi in pairwise(edges):
            group = [s for h, s in hashes if lo <= h < hi]
            rate = sum(s.msg_rate for s in group)
            if len(group) > 1 and rate >= config.loadBalancerNamespaceBundleMaxMsgRate:
                diff.append(f"group [0x{lo:08x}, 0x{hi:08x}) carries {rate} msg/s")
        return diff

    return run_cases(name, [("boundaries", case)])


def _fixed_boundary(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp = data["input"]
    parent = BundleRange.parse(inp["parent"])
    layout = NamespaceBundles("pulsar/use/ns1", (parent.lower, parent.upper))
    cases: list[tuple[str, Case]] = []
    for c in inp["boundary_cases"]:

        def case(c: dict[str, Any] = c) -> list[str]:
            want = c["expected"]
            try:
                new = layout.split(parent, [c["boundary"]])
            except InvalidInput as e:
                return (
                    [] if isinstance(want, str) and want.startswith("error") else [f"unexpected error: {e}"]
                )
            if isinstance(want, str):
                return [f"expected {want!r}, got {[r.text for r in new.ranges]}"]
            return expect("children", want, [r.text for r in new.ranges])

        cases.append((f"boundary {c['boundary']}", case))
    return run_cases(name, cases)


def _split_in_n(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    full = NamespaceBundles("pulsar/use/ns1", (0, 0xFFFFFFFF))
    state: dict[str, NamespaceBundles] = {}
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(inp["cases"]):

        def case(i: int = i, c: dict[str, Any] = c) -> list[str]:
            parent = BundleRange.parse(c["parent"])
            # The first split is of the whole range; later ones split children of that result.
            layout = full if i == 0 else state["after_first"]
            new = layout.split(parent, split_in_n(parent, int(c["n"])))
            if i == 0:
                state["after_first"] = new
            cuts = [f"0x{b:08x}" for b in new.boundaries if parent.lower <= b <= parent.upper]
            count = int(str(exp["bundle_count_after"][i]).rsplit("=", 1)[-1])
            return expect("partitions", exp["partitions"][i], cuts) + expect(
                "bundle count", count, len(new.ranges)
            )

        cases.append((f"case {i}", case))
    return run_cases(name, cases)


def _split_chain(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    start = BundleRange.parse(inp["start"])
    state = {"layout": NamespaceBundles(inp["namespace"], (start.lower, start.upper))}
    cases: list[tuple[str, Case]] = []
    for s in exp["splits"]:

        def case(s: dict[str, Any] = s) -> list[str]:
            parent = BundleRange.parse(s["parent"])
            cuts = alg.split_boundaries(alg.RANGE_EQUALLY_DIVIDE, parent, vector_config({}))
            new = alg.split_layout(state["layout"], parent, cuts)
            if new is None:
                return [f"{parent.text} could not be split"]
            state["layout"] = new
            children = [r.text for r in new.ranges if parent.lower <= r.lower and r.upper <= parent.upper]
            return expect("children", s["children"], children)

        cases.append((f"split {s['parent']}", case))
    return run_cases(name, cases)


# ---- topic_to_bundle ------------------------------------------------------------------------------
def handle_topic_to_bundle(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    if "boundaries" in inp and "topic" in inp:
        return _find_bundle(name, data)
    if "hash" in inp and "cases" in inp:
        return _includes(name, data)
    if "constructor" in inp or "names" in exp:
        return _formatting(name, data)
    return unsupported(name, "topic_to_bundle", data)


def _find_bundle(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    layout = NamespaceBundles.from_texts(inp["namespace"], inp["boundaries"])

    def find() -> list[str]:
        return expect("hash", exp["hash"], topic_hash(inp["topic"])) + expect(
            "bundle", exp["bundle"], layout.find_bundle(inp["topic"])
        )

    def mismatch() -> list[str]:
        try:
            got = layout.find_bundle(inp["mismatched_topic"])
        except InvalidInput:
            return []
        return [f"expected a namespace mismatch error, got {got}"]

    return run_cases(name, [("find bundle", find), ("namespace mismatch", mismatch)])


def _includes(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp = data["input"]
    cases: list[tuple[str, Case]] = [("hash", lambda: expect("hash", inp["hash"], topic_hash(inp["topic"])))]
    for i, c in enumerate(inp["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            rng = BundleRange(*c["bundle_range"])
            diff = expect("upper closed", c["upper_closed"], rng.upper_closed)
            got = topic_namespace(inp["topic"]) == c["namespace"] and rng.includes(topic_hash(inp["topic"]))
            return diff + expect(f"{c['namespace']}/{rng.text} includes topic", c["expected"], got)

        cases.append((f"case {i}", case))
    return run_cases(name, cases)


def _formatting(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]

    def names() -> list[str]:
        got = [bundle_name(c["namespace"], BundleRange(c["lower"], c["upper"])) for c in inp["cases"]]
        return expect("names", exp["names"], got)

    def constructor() -> list[str]:
        c = inp["constructor"]
        layout = NamespaceBundles.from_texts(c["namespace"], c["partitions"])
        got = [{"range": r.text, "upper": "closed" if r.upper_closed else "open"} for r in layout.ranges]
        return expect("bundles", exp["constructor_bundles"], got)

    return run_cases(name, [("names", names), ("constructor", constructor)])
