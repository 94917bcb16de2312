"""Cordons in placement (pure): a cordoned broker gets no new bundle from shedding, the orphan rule
or a placement; and a drain's next moves: every bundle but the heartbeat ones, to placement's pick."""

from __future__ import annotations

import random

import pytest

from balancer.drain import drain_moves, remaining, stays_on_broker
from balancer.errors import InvalidInput
from balancer.placement.context import PlacementContext
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from balancer.placement.pipeline import assign_bundle, select_broker
from tests.unit.test_cycle import CFG, cluster, plan

HOT = "hot:8080"


def test_a_cordoned_broker_is_never_a_shedding_destination() -> None:
    load = cluster(n_cool=3)
    free = plan(load)
    assert {m.destination for m in free.moves} & {"cool0:8080"}, "cool0 is the natural destination"
    load = cluster(n_cool=3)
    ctx = PlacementContext.from_load(load, cordoned=frozenset({"cool0:8080"}))
    p = plan(load, ctx)
    assert p.moves
    assert all(m.destination not in ("cool0:8080", HOT) for m in p.moves)


def test_every_other_broker_cordoned_leaves_nowhere_to_shed_to() -> None:
    load = cluster(n_cool=2)
    ctx = PlacementContext.from_load(load, cordoned=frozenset({"cool0:8080", "cool1:8080"}))
    p = plan(load, ctx)
    assert not p.moves
    assert {s.reason for s in p.skipped} == {"no_other_broker"}


@pytest.mark.parametrize("strategy", [LeastLongTermMessageRate, LeastResourceUsageWithWeight])
def test_orphans_and_placements_avoid_cordoned_brokers(strategy: type) -> None:
    load = cluster(n_cool=2)
    ctx = PlacementContext.from_load(load, cordoned=frozenset({"cool0:8080", HOT}))
    rng = random.Random(1)
    for i in range(6):
        d = assign_bundle(f"new/ns/0x{i:08x}_0x{i + 1:08x}", load, CFG, strategy(), ctx, rng)
        assert d.broker == "cool1:8080", d.explanation
    d = select_broker("o/ns0/0x00000000_0xffffffff", load, CFG, strategy(), ctx, rng)
    assert d.broker == "cool1:8080"
    assert "cool0:8080" not in d.candidates and HOT not in d.candidates


def test_a_preallocation_to_a_broker_cordoned_since_is_placed_afresh() -> None:
    load = cluster(n_cool=2)
    ctx = PlacementContext.from_load(load)
    bundle = "new/ns/0x00000000_0x10000000"
    ctx.preallocated_bundle_to_broker[bundle] = "cool0:8080"
    ctx.cordoned = frozenset({"cool0:8080"})
    d = assign_bundle(bundle, load, CFG, LeastLongTermMessageRate(), ctx, random.Random(2))
    assert d.broker not in (None, "cool0:8080")
    assert ctx.preallocated_bundle_to_broker[bundle] == d.broker


def test_heartbeat_bundles_stay_with_their_broker() -> None:
    assert stays_on_broker("pulsar/hot:8080/0x00000000_0xffffffff")
    assert stays_on_broker("pulsar/standalone/hot:8080/0x00000000_0xffffffff")
    assert stays_on_broker("sla-monitor/standalone/hot:8080/0x00000000_0xffffffff")
    assert not stays_on_broker("pulsar/system/0x00000000_0xffffffff")
    assert not stays_on_broker("t/ns/0x00000000_0x40000000")


def test_drain_moves_one_bundle_at_a_time_in_order_never_to_a_cordoned_broker() -> None:
    load = cluster(n_cool=3)
    owned = [*load.broker_data[HOT].local_data.last_stats, "pulsar/standalone/hot:8080/0x00000000_0xffffffff"]
    ctx = PlacementContext.from_load(load, cordoned=frozenset({HOT, "cool0:8080"}))
    step = drain_moves(HOT, owned, load, CFG, LeastLongTermMessageRate(), ctx, random.Random(3))
    assert len(step.moves) == 1
    first = step.moves[0]
    assert first.bundle == remaining(owned)[0] == "t/ns/0x00000000_0x40000000"
    assert first.source == HOT and first.destination in ("cool1:8080", "cool2:8080")
    assert (
        first.explanation.reason == "drain" and first.explanation.numbers["destination"] == first.destination
    )
    assert step.stays == ["pulsar/standalone/hot:8080/0x00000000_0xffffffff"]
    # The in-flight bundle is skipped: the next one comes, and every move leaves the cordoned set.
    nxt = drain_moves(
        HOT, owned, load, CFG, LeastLongTermMessageRate(), ctx, random.Random(3), skip={first.bundle}, limit=5
    )
    assert [m.bundle for m in nxt.moves] == remaining(owned)[1:]
    assert all(m.destination in ("cool1:8080", "cool2:8080") for m in nxt.moves)


def test_drain_of_an_uncordoned_broker_is_refused() -> None:
    load = cluster()
    ctx = PlacementContext.from_load(load)
    with pytest.raises(InvalidInput) as e:
        drain_moves(
            HOT, ["t/ns/0x00000000_0x40000000"], load, CFG, LeastLongTermMessageRate(), ctx, random.Random()
        )
    assert e.value.field == "broker" and e.value.value == HOT


def test_drain_with_nowhere_to_go_moves_nothing_and_says_why() -> None:
    load = cluster(n_cool=1)
    ctx = PlacementContext.from_load(load, cordoned=frozenset({HOT, "cool0:8080"}))
    owned = list(load.broker_data[HOT].local_data.last_stats)
    step = drain_moves(HOT, owned, load, CFG, LeastLongTermMessageRate(), ctx, random.Random(), limit=9)
    assert not step.moves
    assert [u.subject for u in step.unplaced] == sorted(owned)
    assert {u.reason for u in step.unplaced} == {"drain_no_destination"}
