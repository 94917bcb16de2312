"""Handlers of the ``report_update`` and ``time_average`` vector kinds: when a broker rewrites its
report, and how bundle data is averaged, seeded and chosen for writing."""

from __future__ import annotations

from typing import Any

from balancer.loaddata import (
    initial_bundle_data,
    need_report_update,
    top_k_bundles_to_write,
    update_bundle_data,
)
from balancer.models import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceQuota,
    TimeAverageMessageData,
)
from balancer.report_cadence import host_usage_due
from balancer.vectors.kinds_common import Case, expect, run_cases, unsupported, vector_config
from balancer.vectors.report import RoundReport


# ---- report_update --------------------------------------------------------------------------------
def handle_report_update(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    steps = inp.get("steps")
    if not isinstance(steps, list):
        return unsupported(name, "report_update", data)
    overrides: dict[str, Any] = {}
    now = 1_700_000_000_000
    cases: list[tuple[str, Case]] = []
    for i, (step, want) in enumerate(zip(steps, exp["needUpdate_per_step"], strict=True)):

        def case(step: dict[str, Any] = step, want: bool = want) -> list[str]:
            overrides.update(step.get("conf_change") or {})  # cumulative, as upstream
            config = vector_config(data.get("config"), overrides)
            last = LocalBrokerData.model_validate({**step["last"], "lastUpdate": now})
            cur = LocalBrokerData.model_validate({**step["cur"], "lastUpdate": now})
            why = need_report_update(last, cur, config, now)
            return expect(f"needUpdate ({step.get('why', '')})", want, why is not None) + (
                [f"  because {why}"] if (why is not None) != want and why is not None else []
            )

        cases.append((f"step {i}", case))
    return run_cases(name, cases)


# ---- time_average ---------------------------------------------------------------------------------
def handle_time_average(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp = data["input"]
    if "resource_quota_node" in inp:
        return _quota_seed(name, data)
    if "loadBalancerMaxNumberOfBundlesInBundleLoadReport" in (data.get("config") or {}):
        return _top_k(name, data)
    return unsupported(name, "time_average", data)


def _window(w: TimeAverageMessageData) -> dict[str, Any]:
    return {
        "maxSamples": w.max_samples,
        "numSamples": w.num_samples,
        "msgRateIn": w.msg_rate_in,
        "msgRateOut": w.msg_rate_out,
        "msgThroughputIn": w.msg_throughput_in,
        "msgThroughputOut": w.msg_throughput_out,
    }


def _quota_seed(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    bundle = "my-tenant/my-ns/0x00000000_0x10000000"
    quota = ResourceQuota.model_validate(inp["resource_quota_node"])

    def seed() -> list[str]:
        bd, source = initial_bundle_data(bundle, {}, {bundle: quota})
        return (
            expect("seed source", "quota", source)
            + expect("shortTermData", exp["shortTermData"], _window(bd.short_term_data), tol=1e-9)
            + expect("longTermData", exp["longTermData"], _window(bd.long_term_data), tol=1e-9)
        )

    def samples() -> list[str]:
        load = LoadData(broker_data={"broker-1:8080": BrokerData()})
        diff = []
        for i, rate in enumerate(inp["then_apply_samples_rateIn"]):
            stats = NamespaceBundleStats(msg_rate_in=rate)
            load.broker_data["broker-1:8080"].local_data.last_stats = {bundle: stats}
            update_bundle_data(load, 0, {}, {bundle: quota})
            bd = load.bundle_data[bundle]
            for label, window, want in (
                ("shortTerm", bd.short_term_data, exp["shortTerm_msgRateIn_after_samples"][i]),
                ("longTerm", bd.long_term_data, exp["longTerm_msgRateIn_after_samples"][i]),
            ):
                got = {"numSamples": window.num_samples, "msgRateIn": window.msg_rate_in}
                diff += expect(f"{label} after sample {i}", want, got, tol=1e-9)
        return diff

    def default() -> list[str]:
        bd, source = initial_bundle_data(bundle, {}, {})
        w = bd.short_term_data
        return expect("seed source", "default", source) + expect(
            "default seed",
            {"numSamples": 0, "msgRateIn": 50.0, "msgThroughputIn": 50000.0},
            {"numSamples": w.num_samples, "msgRateIn": w.msg_rate_in, "msgThroughputIn": w.msg_throughput_in},
        )

    return run_cases(name, [("quota seed", seed), ("samples decay", samples), ("default seed", default)])


def _top_k(name: str, data: dict[str, Any]) -> list[RoundReport]:
    inp, exp = data["input"], data["expected"]
    config = vector_config(data["config"])
    brokers = int(data["config"].get("brokers", 1))

    def case() -> list[str]:
        load = LoadData(broker_data={f"broker-{i}:8080": BrokerData() for i in range(brokers)})
        names = {}
        for b in inp["bundles"]:
            bundle = f"my-tenant/my-ns/bundle-{b['index']}"
            names[bundle] = b["index"]
            long = TimeAverageMessageData.model_validate({"maxSamples": 1000, **b["longTermData"]})
            load.bundle_data[bundle] = BundleData(long_term_data=long)
        written = sorted(names[b] for b in top_k_bundles_to_write(load, config))
        return expect("written bundle indexes", sorted(exp["written_bundle_indexes"]), written)

    return run_cases(name, [("top-k", case)])


# ---- report_cadence -------------------------------------------------------------------------------
def handle_report_cadence(name: str, data: dict[str, Any]) -> list[RoundReport]:
    """Each case: report times (ms), optional config changes at given times, and the report times
    at which the host is measured (the others reuse the last measurement)."""
    cases: list[tuple[str, Case]] = []
    for i, c in enumerate(data["input"]["cases"]):

        def case(c: dict[str, Any] = c) -> list[str]:
            overrides: dict[str, Any] = dict(c.get("config") or {})
            changes = {int(t): v for t, v in (c.get("config_changes_at") or {}).items()}
            last: int | None = None
            measured = []
            for t in c["report_times_ms"]:
                overrides.update(changes.get(int(t), {}))
                config = vector_config(data.get("config"), overrides)
                if host_usage_due(last, int(t), config):
                    last = int(t)
                    measured.append(int(t))
            return expect("measured at", c["expected_measured_at_ms"], measured)

        cases.append((f"case {i}: {c.get('label', '')}".rstrip(": "), case))
    return run_cases(name, cases)
