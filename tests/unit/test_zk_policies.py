"""Parsing Pulsar's policy nodes: good shapes are read as Pulsar reads them, bad ones name the field."""

from __future__ import annotations

from balancer.placement.context import PlacementContext
from service.zookeeper.metadata.policies import (
    PlacementPolicies,
    parse_anti_affinity_group,
    parse_failure_domain,
    parse_isolation_policies,
)

GOOD = {
    "namespaces": ["iso/.*"],
    "primary": ["iso-[12]"],
    "secondary": ["iso-3"],
    "auto_failover_policy": {"policy_type": "min_available", "parameters": {"min_limit": "2"}},
}


def test_isolation_policies_in_name_order_and_a_bad_one_costs_only_itself() -> None:
    doc = {"z": GOOD, "a": dict(GOOD, primary=["("]), "m": "not an object", "b": GOOD}
    policies, errors = parse_isolation_policies(doc)
    assert [p.name for p in policies] == ["b", "z"]
    assert policies[0].min_limit == 2 and policies[0].is_primary("iso-1")
    assert not policies[0].is_primary("iso-10")  # full match, as Java's String.matches
    assert len(errors) == 2
    assert any("a.primary" in e and "'('" in e for e in errors)
    assert any("'m'" in e for e in errors)
    assert parse_isolation_policies(["x"])[1] == ["expected a JSON object of policies, got list"]


def test_failure_domain_needs_a_list_of_broker_ids() -> None:
    assert parse_failure_domain({"brokers": ["b1:8080", "b2:8080"]}) == (["b1:8080", "b2:8080"], None)
    brokers, err = parse_failure_domain({"brokers": "b1:8080"})
    assert brokers == [] and err is not None and "brokers" in err and "'b1:8080'" in err
    assert parse_failure_domain(None)[1] is not None


def test_anti_affinity_group_blank_is_unset_and_a_number_is_an_error() -> None:
    assert parse_anti_affinity_group({"namespaceAntiAffinityGroup": "payments"}) == ("payments", None)
    assert parse_anti_affinity_group({"namespaceAntiAffinityGroup": "  "}) == (None, None)
    assert parse_anti_affinity_group({"bundles": {}}) == (None, None)
    group, err = parse_anti_affinity_group({"namespaceAntiAffinityGroup": 7})
    assert group is None and err is not None and "namespaceAntiAffinityGroup" in err and "7" in err


def test_apply_replaces_what_an_earlier_read_put_in_the_context() -> None:
    ctx = PlacementContext(anti_affinity_groups={"gone/ns": "g"}, failure_domains={"old:1": "d"})
    PlacementPolicies(anti_affinity_groups={"t/ns": "g"}).apply_to(ctx)
    assert ctx.anti_affinity_groups == {"t/ns": "g"} and ctx.failure_domains == {}
