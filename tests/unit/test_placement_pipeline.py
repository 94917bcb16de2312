"""Broker filters and the selectBroker pipeline: each filter's removals and Pulsar's fallbacks."""

from __future__ import annotations

import random

import pytest

from balancer.config import LoadBalancerConfig
from balancer.models import BrokerData, LoadData, LocalBrokerData, NamespaceBundleStats, ResourceUsage
from balancer.placement import filters as f
from balancer.placement.context import IsolationPolicy, PlacementContext
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.pipeline import assign_bundle, select_broker

CLASS = LoadBalancerConfig().loadManagerClassName
BUNDLE = "t/ns/0x00000000_0x40000000"


def broker(cpu: float = 10, version: str = "4.0.3", cls: str | None = CLASS, **kw: object) -> BrokerData:
    ld = LocalBrokerData(
        cpu=ResourceUsage(usage=cpu, limit=100),
        broker_version_string=version,
        load_manager_class_name=cls,
        **kw,
    )
    return BrokerData(local_data=ld)


def cluster(**brokers: BrokerData) -> LoadData:
    return LoadData(broker_data=dict(brokers))


def run(
    load: LoadData, ctx: PlacementContext | None = None, bundle: str = BUNDLE, seed: int = 3, **cfg: object
):  # type: ignore[no-untyped-def]
    config = LoadBalancerConfig.from_dict(cfg)
    return select_broker(
        bundle, load, config, LeastLongTermMessageRate(), ctx or PlacementContext(), random.Random(seed)
    )


def step(decision, name):  # type: ignore[no-untyped-def]
    return next(s for s in decision.filter_steps if s.reason == name)


class TestNamespacePolicies:
    def test_shared_needs_topic_mode_and_data(self) -> None:
        load = cluster(a=broker(), b=broker(persistent_topics_enabled=False))
        ctx = PlacementContext(available_brokers=["a", "b", "ghost"])
        out, exp = f.namespace_policy_candidates("t/ns", BUNDLE, ["a", "b", "ghost"], load, ctx)
        assert out == ["a"]
        assert set(exp.numbers["removed"]) == {"b", "ghost"}
        ctx.non_persistent_bundles.add(BUNDLE)
        out, _ = f.namespace_policy_candidates("t/ns", BUNDLE, ["a", "b"], load, ctx)
        assert out == ["a", "b"]

    def test_primaries_of_other_policies_are_not_shared(self) -> None:
        load = cluster(**{"iso:8080": broker(), "free:8080": broker()})
        ctx = PlacementContext(isolation_policies=[IsolationPolicy("p", ["other/.*"], ["iso"])])
        out, exp = f.namespace_policy_candidates("t/ns", BUNDLE, ["iso:8080", "free:8080"], load, ctx)
        assert out == ["free:8080"]
        assert "isolation policy" in exp.numbers["removed"]["iso:8080"]

    def test_from_pulsar_json(self) -> None:
        p = IsolationPolicy.from_pulsar(
            "p",
            {
                "namespaces": ["t/.*"],
                "primary": ["h1"],
                "secondary": ["h2"],
                "auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": "2"}},
            },
        )
        assert (p.min_limit, p.applies_to("t/ns"), p.applies_to("x/t/ns")) == (2, True, False)


class TestFilters:
    def test_max_topics_all_over_keeps_everybody(self) -> None:
        out, exp = f.max_topics_filter(["a", "b"], {"a": 60_000, "b": 70_000}, 50_000)
        assert out == ["a", "b"] and exp.numbers["all_over_kept"] is True
        out, exp = f.max_topics_filter(["a", "b"], {"a": 60_000, "b": 50_000}, 50_000)
        assert out == ["b"] and "60000 topics" in exp.numbers["removed"]["a"]

    def test_anti_affinity_prefers_brokers_without_group(self) -> None:
        ctx = PlacementContext(anti_affinity_groups={"t/a": "g", "t/b": "g", "t/c": "other"})
        ctx.add_range("x", "t/a/0x00000000_0x10000000")
        ctx.add_range("y", "t/c/0x00000000_0x10000000")
        counts = f.anti_affinity_counts(ctx, "g")
        assert counts == {"x": 1}
        out, _ = f.anti_affinity_filter(["x", "y", "z"], counts, ctx, domains_enabled=False)
        assert out == ["y", "z"]

    def test_anti_affinity_failure_domains(self) -> None:
        ctx = PlacementContext(
            anti_affinity_groups={"t/a": "g"}, failure_domains={"x": "d1", "y": "d1", "z": "d2"}
        )
        ctx.add_range("x", "t/a/0x00000000_0x10000000")
        out, exp = f.anti_affinity_filter(["x", "y", "z"], f.anti_affinity_counts(ctx, "g"), ctx, True)
        assert out == ["z"]  # y holds nothing, but its domain d1 does
        assert exp.numbers["domain_counts"] == {"d1": 1, "d2": 0}

    def test_anti_affinity_unload_rule(self) -> None:
        assert f.anti_affinity_allows_unload("x", ["x", "y"], {"x": 1, "y": 1}) is not None
        assert f.anti_affinity_allows_unload("x", ["x", "y"], {"x": 2, "y": 1}) is None
        assert f.anti_affinity_allows_unload("x", ["x", "y"], {"x": 1}) is None

    def test_anti_affinity_unload_needs_every_candidate_at_the_least(self) -> None:
        # Pulsar allows the move while some candidate holds more than the least (z could shed later).
        counts = {"x": 1, "y": 1, "z": 2}
        assert f.anti_affinity_allows_unload("x", ["x", "y", "z"], counts) is None
        # Only the policy set counts: z, outside it, neither helps nor blocks.
        blocked = f.anti_affinity_allows_unload("x", ["x", "y"], {"x": 1, "y": 1})
        assert blocked is not None and blocked.numbers["candidates"] == 2
        assert f.anti_affinity_allows_unload("x", ["x", "y", "w"], {"x": 1, "y": 1}) is None  # w holds 0

    def test_anti_affinity_groups_compare_case_insensitively(self) -> None:
        ctx = PlacementContext(anti_affinity_groups={"t/a": "Payments", "t/b": "payments"})
        ctx.add_range("x", "t/a/0x00000000_0xffffffff")
        ctx.add_range("y", "t/b/0x00000000_0xffffffff")
        assert f.anti_affinity_counts(ctx, "PAYMENTS") == {"x": 1, "y": 1}

    def test_class_filter_keeps_brokers_without_data(self) -> None:
        load = cluster(a=broker(), b=broker(cls=None))
        out, exp = f.load_manager_class_filter(["a", "b", "ghost"], load, CLASS)
        assert out == ["a", "ghost"] and "None" in exp.numbers["removed"]["b"]

    @pytest.mark.parametrize(
        ("versions", "latest"),
        [
            (["4.0.3", "4.0.10"], "4.0.10"),
            (["4.1.0-SNAPSHOT", "4.1.0"], "4.1.0"),
            (["1.0.0-rc.1", "1.0.0-rc.2"], "1.0.0-rc.2"),
        ],
    )
    def test_version_order(self, versions: list[str], latest: str) -> None:
        load = cluster(**{f"b{i}": broker(version=v) for i, v in enumerate(versions)})
        out, _, v = f.broker_version_filter(list(load.broker_data), load)
        assert str(v) == latest and [load.broker_data[b].local_data.broker_version_string for b in out] == [
            latest
        ]

    def test_version_unparsable_aborts(self) -> None:
        load = cluster(a=broker(version="4.0"), b=broker())
        with pytest.raises(f.FilterAborted, match="a"):
            f.broker_version_filter(["a", "b"], load)


class TestPipeline:
    def test_every_filter_reports_a_step(self) -> None:
        d = run(cluster(a=broker(), b=broker()))
        assert [s.reason for s in d.filter_steps] == [
            "shared_brokers",
            "max_topics",
            "even_distribution",
            "load_manager_class",
        ]
        assert d.broker in {"a", "b"}

    def test_all_filtered_out_restores_policy_set(self) -> None:
        load = cluster(a=broker(cls="x"), b=broker(cls="y"))
        d = run(load)
        assert d.broker in {"a", "b"}
        assert step(d, "no_candidates_left").numbers["restored_to"] == 2
        assert set(step(d, "load_manager_class").numbers["removed"]) == {"a", "b"}

    def test_version_abort_restores_even_after_other_filters(self) -> None:
        ctx = PlacementContext()
        ctx.add_range("b", "t/ns/0x40000000_0x80000000")
        d = run(cluster(a=broker(version="bad"), b=broker()), ctx, preferLaterVersions=True)
        assert "a" in step(d, "filter_aborted").message
        assert set(d.candidates) == {"a", "b"}  # even distribution's removal of b is undone too

    def test_all_overloaded_rechecks_then_keeps_choice(self) -> None:
        d = run(cluster(a=broker(cpu=95), b=broker(cpu=99)))
        assert d.broker in {"a", "b"}
        assert step(d, "overload_recheck").numbers["usage"] > 0.85

    def test_overloaded_choice_replaced_by_a_filtered_broker(self) -> None:
        ctx = PlacementContext()
        ctx.add_range("cool", "t/ns/0x40000000_0x80000000")  # even distribution removes the cool broker
        d = run(cluster(hot=broker(cpu=95), cool=broker(cpu=5)), ctx)
        assert d.broker == "cool"
        assert step(d, "overload_recheck").numbers["second_choice"] == "cool"

    def test_broker_missing_data(self) -> None:
        ctx = PlacementContext(available_brokers=["ghost", "a"])
        d = run(cluster(a=broker()), ctx)
        assert d.broker == "a"
        assert "no load data" in step(d, "shared_brokers").numbers["removed"]["ghost"]

    def test_no_brokers_at_all(self) -> None:
        d = run(LoadData())
        assert d.broker is None and d.explanation.reason == "no_candidates"

    def test_isolated_namespace_without_its_brokers_gets_nobody(self) -> None:
        ctx = PlacementContext(isolation_policies=[IsolationPolicy("p", ["t/ns"], ["iso"])])
        d = run(cluster(**{"shared:8080": broker()}), ctx)
        assert d.broker is None

    def test_excluded_namespace_goes_round_robin(self) -> None:
        load = cluster(a=broker(), b=broker())
        ctx = PlacementContext()
        got = [run(load, ctx, loadBalancerSheddingExcludedNamespaces=["t/ns"]).broker for _ in range(4)]
        assert got == ["a", "b", "a", "b"]

    def test_bound_destination_honoured_only_if_candidate(self) -> None:
        load = cluster(a=broker(), b=broker(cls="other"), c=broker())
        config = LoadBalancerConfig()
        s, ctx = LeastLongTermMessageRate(), PlacementContext()
        d = select_broker(BUNDLE, load, config, s, ctx, random.Random(1), bound_destination="c")
        assert (d.broker, d.explanation.reason) == ("c", "bound_destination")
        d = select_broker(BUNDLE, load, config, s, ctx, random.Random(1), bound_destination="b")
        assert d.broker != "b"

    def test_assign_bundle_preallocates_and_sticks(self) -> None:
        load = cluster(a=broker(), b=broker())
        ctx, config = PlacementContext.from_load(load), LoadBalancerConfig()
        d = assign_bundle(BUNDLE, load, config, LeastLongTermMessageRate(), ctx, random.Random(1))
        assert BUNDLE in load.broker_data[d.broker].preallocated_bundle_data
        assert ctx.bundle_ranges[d.broker]["t/ns"] == {"0x00000000_0x40000000"}
        again = assign_bundle(BUNDLE, load, config, LeastLongTermMessageRate(), ctx, random.Random(9))
        assert (again.broker, again.explanation.reason) == (d.broker, "preallocated")
        # Once the broker reports the bundle, the preallocation is forgotten.
        load.broker_data[d.broker].local_data.last_stats[BUNDLE] = NamespaceBundleStats()
        ctx.refresh(load)
        assert BUNDLE not in ctx.preallocated_bundle_to_broker

    def test_even_distribution_spreads_a_namespace(self) -> None:
        load = cluster(a=broker(), b=broker(), c=broker())
        ctx, config = PlacementContext.from_load(load), LoadBalancerConfig()
        s, rng = LeastLongTermMessageRate(), random.Random(5)
        names = [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(6)]
        owners = [assign_bundle(n, load, config, s, ctx, rng).broker for n in names]
        assert sorted(owners.count(b) for b in "abc") == [2, 2, 2]
