"""Handlers of the ``placement`` vector kind: placement strategies and broker filters."""

from __future__ import annotations

import random
from typing import Any

from balancer.bundles import NamespaceBundles
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    ResourceUsage,
    TimeAverageMessageData,
)
from balancer.placement import filters as f
from balancer.placement.context import IsolationPolicy, PlacementContext
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from balancer.placement.pipeline import assign_bundle
from balancer.placement.round_robin import RoundRobinBrokerSelector
from balancer.vectors.kinds_common import Case, expect, run_cases, snake, unsupported, vector_config
from balancer.vectors.kinds_policies import (
    handle_anti_affinity_filter,
    handle_anti_affinity_unload,
    handle_shedding_cycle,
)
from balancer.vectors.report import RoundReport

RESOURCES = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")


def _broker(**local: Any) -> BrokerData:
    return BrokerData(local_data=LocalBrokerData.model_validate(local))


# ---- placement ------------------------------------------------------------------------------------
def handle_placement(name: str, data: dict[str, Any]) -> list[RoundReport]:
    cfg = data.get("config") or {}
    inp = data.get("input") or {}
    if cfg.get("strategy") == "LeastLongTermMessageRate":
        return _lltmr(name, data)
    if cfg.get("strategy") == "LeastResourceUsageWithWeight":
        return _lruw_steps(name, data) if "steps" in inp else _lruw_history(name, data)
    if cfg.get("strategy") == "RoundRobinBrokerSelector":
        return _round_robin(name, data)
    handlers = {
        "BrokerVersionFilter": _version_filter,
        "BrokerLoadManagerClassFilter": _class_filter,
        "applyNamespacePolicies": _isolation,
        "removeMostServicingBrokersForNamespace": _even_distribution,
        "filterAntiAffinityGroupOwnedBrokers": handle_anti_affinity_filter,
        "shouldAntiAffinityNamespaceUnload": handle_anti_affinity_unload,
        "doLoadShedding": handle_shedding_cycle,
    }
    h = handlers.get(str(cfg.get("filter")))
    if h is not None:
        return h(name, data)
    if "loadBalancerBrokerMaxTopics" in cfg:
        return _max_topics(name, data)
    return unsupported(name, "placement", data)


def _lltmr(name: str, data: dict[str, Any]) -> list[RoundReport]:
    config = vector_config(data["config"])
    inp = data["input"]
    strategy = LeastLongTermMessageRate()
    load = LoadData()
    for b, spec in inp["brokers_initial"].items():
        bd = _broker(cpu=spec.get("cpu") or {})
        for k, v in (spec.get("timeAverage") or {}).items():
            setattr(bd.time_average_data, snake(k), float(v))
        load.broker_data[b] = bd
    rng = random.Random(0)
    cases: list[tuple[str, Case]] = []
    for i, (step, want) in enumerate(zip(inp["steps"], data["expected"]["selected_per_step"], strict=True)):

        def case(step: dict[str, Any] = step, want: str = want) -> list[str]:
            for b, change in (step.get("change") or {}).items():
                bd = load.broker_data[b]
                for k, v in change.items():
                    if k.startswith("timeAverage."):
                        setattr(bd.time_average_data, snake(k.split(".", 1)[1]), float(v))
                    else:
                        setattr(bd.local_data, snake(k), ResourceUsage.model_validate(v))
            choice = strategy.select_broker(inp["candidates"], "b", BundleData(), load, config, rng)
            return expect("selected", want, choice.broker) + (
                [f"  because {choice.explanation}"] if choice.broker != want else []
            )

        cases.append((f"step {i}", case))
    return run_cases(name, cases)


def _usage_broker(pct: float, empty: bool = False) -> BrokerData:
    usage = {"usage": pct, "limit": 100}
    return _broker(
        **{r: usage for r in RESOURCES},
        msgRateIn=100,
        msgRateOut=100,
        bundles=[] if empty else ["0x00000000_0xffffffff"],
    )


def _lruw_steps(name: str, data: dict[str, Any]) -> list[RoundReport]:
    config = vector_config(data["config"])
    strategy = LeastResourceUsageWithWeight()
    rng = random.Random(0)
    cases: list[tuple[str, Case]] = []
    for i, step in enumerate(data["input"]["steps"]):

        def case(step: dict[str, Any] = step) -> list[str]:
            empty = set(step.get("broker_with_empty_bundles") or [])
            load = LoadData(
                broker_data={
                    b: _usage_broker(p, b in empty) for b, p in step["usage_percent_all_resources"].items()
                }
            )
            # The step's brokers map replaces the previous one: the leader reports the new active set.
            strategy.on_active_brokers_change(set(load.broker_data))
            choice = strategy.select_broker(step["candidates"], "b", BundleData(), load, config, rng)
            diff = expect("history", step["expected_history_after"], strategy.history, tol=1e-6)
            diff += expect(
                "average", step["expected_avg"], choice.explanation.numbers.get("average"), tol=1e-5
            )
            best = strategy.best_set(step["candidates"], config)
            diff += expect("best set", sorted(step["expected_best_set"]), sorted(best))
            want = step.get("expected_selected")
            if want is not None:
                diff += expect("selected", want, choice.broker)
            elif choice.broker not in step["expected_best_set"]:
                diff.append(f"selected {choice.broker!r} is not in the best set {step['expected_best_set']}")
            return diff

        cases.append((f"step {i}", case))
    return run_cases(name, cases)


def _lruw_history(name: str, data: dict[str, Any]) -> list[RoundReport]:
    config = vector_config(data["config"])
    inp, exp = data["input"], data["expected"]

    def case() -> list[str]:
        strategy = LeastResourceUsageWithWeight(history=inp["history_before"])
        load = LoadData(
            broker_data={b: _usage_broker(p) for b, p in inp["broker_usage_percent_all_resources"].items()}
        )
        choice = strategy.select_broker(inp["candidates"], "b", BundleData(), load, config, random.Random(0))
        diff = expect("history", exp["history_after"], strategy.history, tol=1e-6)
        diff += expect("average", exp["avg"], choice.explanation.numbers.get("average"), tol=1e-5)
        return diff + expect("selected", exp["selected"], choice.broker)

    return run_cases(name, [("select", case)])


def _round_robin(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    rr = RoundRobinBrokerSelector()
    config = vector_config({})
    load, rng = LoadData(), random.Random(0)
    cases: list[tuple[str, Case]] = []
    for i, call in enumerate(inp["calls_in_order"]):

        def case(call: dict[str, Any] = call) -> list[str]:
            choice = rr.select_broker(call["candidates"], "b", BundleData(), load, config, rng)
            return expect(f"selected from {call['candidates']}", call["expected"], choice.broker)

        cases.append((f"call {i}", case))
    then = inp.get("then")
    if then:

        def wrap() -> list[str]:
            rr.counter = int(then["set_counter_to"])
            choice = rr.select_broker(then["candidates"], "b", BundleData(), load, config, rng)
            return expect("selected", exp["then_selected"], choice.broker) + expect(
                "counter after", exp["then_counter_after"], rr.counter
            )

        cases.append(("counter wrap", wrap))
    return run_cases(name, cases)


def _version_filter(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    load = LoadData(broker_data={b: _broker(brokerVersionString=v) for b, v in inp["brokers"].items()})

    def case() -> list[str]:
        out, _, latest = f.broker_version_filter(inp["candidates"], load)
        got = (
            None if latest is None else {"major": latest.major, "minor": latest.minor, "patch": latest.patch}
        )
        return expect("latest version", exp["latestVersion"], got) + expect(
            "candidates after", exp["candidates_after"], out
        )

    def missing() -> list[str]:
        # The note: a candidate without a version aborts the filter (the pipeline then restores P).
        load.broker_data["broker4"] = _broker()
        try:
            f.broker_version_filter([*inp["candidates"], "broker4"], load)
        except f.FilterAborted:
            return []
        finally:
            del load.broker_data["broker4"]
        return ["a candidate without a version did not abort the filter"]

    return run_cases(name, [("latest", case), ("missing version aborts", missing)])


def _class_filter(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp = data["input"]
    load = LoadData(
        broker_data={
            b: _broker(loadManagerClassName=c) for b, c in inp["brokers_loadManagerClassName"].items()
        }
    )
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(inp["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            out, _ = f.load_manager_class_filter(c["candidates"], load, c["conf.loadManagerClassName"])
            return expect("candidates after", c["expected"], out)

        cases.append((f"case {i}", case))
    return run_cases(name, cases)


def _isolation(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp = data["input"]
    pol = inp["isolation_policy"]
    hosts = {"<broker1Host>": "broker1.example", "<broker2Host>": "broker2.example"}

    def sub(s: str) -> str:
        for k, v in hosts.items():
            s = s.replace(k, v)
        return s

    ids = {b: sub(addr) for b, addr in inp["brokers"].items()}
    back = {v: k for k, v in ids.items()}
    load = LoadData(broker_data={i: _broker() for i in ids.values()})
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(inp["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            policy = IsolationPolicy(
                "policy",
                pol["namespaces"],
                [sub(p) for p in pol["primary"]],
                [sub(p) for p in pol["secondary"]],
                int(c["min_limit"]),
            )
            ctx = PlacementContext(isolation_policies=[policy])
            avail = [ids[b] for b in c["available"]]
            out, _ = f.namespace_policy_candidates(
                inp["namespace"], inp["namespace"] + "/0x00000000_0xffffffff", avail, load, ctx
            )
            return expect("candidates", sorted(c["expected"]), sorted(back[b] for b in out))

        cases.append((f"case {i} min_limit={c['min_limit']} available={c['available']}", case))
    return run_cases(name, cases)


def _even_distribution(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp = data["input"]
    ns = inp["assignedBundle"].rsplit("/", 1)[0]
    ctx = PlacementContext()
    cases: list[tuple[str, Case]] = []
    for i, step in enumerate(inp["steps"]):

        def case(step: dict[str, Any] = step) -> list[str]:
            if step.get("ranges_cache_add"):
                broker, namespace, rng = step["ranges_cache_add"]
                ctx.add_range(broker, f"{namespace}/{rng}")
            counts = {b: len(per.get(ns, ())) for b, per in ctx.bundle_ranges.items()}
            out, _ = f.even_distribution_filter(step["candidates"], counts)
            return expect("candidates", sorted(step["expected"]), sorted(out))

        cases.append((f"step {i}", case))
    return run_cases(name, cases)


def _max_topics(name: str, data: dict[str, Any]) -> list[RoundReport]:
    cfg, inp = data["config"], data["input"]
    config = vector_config(cfg)
    first = inp["first_bundle_stored_bundle_data"]
    brokers = [f"broker-{i}.example:8080" for i in range(int(cfg.get("brokers", 2)))]
    load = LoadData(
        broker_data={
            b: _broker(loadManagerClassName=config.loadManagerClassName, bundles=[]) for b in brokers
        }
    )
    bundles = NamespaceBundles.initial("test/test/test", 50).bundle_names
    stored = BundleData(
        long_term_data=TimeAverageMessageData.model_validate(first["longTermData"]), topics=first["topics"]
    )
    ctx = PlacementContext.from_load(load)

    def case() -> list[str]:
        rng, strategy = random.Random(7), LeastLongTermMessageRate()
        d0 = assign_bundle(bundles[0], load, config, strategy, ctx, rng, stored_bundle_data=stored)
        diff = []
        for b in bundles[1:]:
            d = assign_bundle(b, load, config, strategy, ctx, rng)
            if d.broker == d0.broker:
                diff.append(f"{b} assigned to {d.broker}, which holds the {first['topics']}-topic bundle")
        return diff

    return run_cases(name, [("50 assignments", case)])
