"""A drain's consecutive placements count the bundles it already sent (Pulsar's preallocation).

A drain moves one bundle per leader tick, faster than the destinations' reports follow (Extensible
brokers' load reports lag ~60 s): placing each bundle on the reports alone sent 4 of 4 bundles to
the same broker on real brokers. Each move's bundle is preallocated to its destination until that
broker reports it or leaves; a refused or given-up move leaves no preallocation behind."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from balancer.config import LoadBalancerConfig
from balancer.cycle import Move
from balancer.drain import DrainStep, drain_moves
from balancer.loaddata import update_bundle_data
from balancer.models import BrokerData, LoadData, LocalBrokerData, NamespaceBundleStats, ResourceUsage
from balancer.placement.base import PlacementStrategy
from balancer.placement.context import PlacementContext
from balancer.placement.least_long_term_message_rate import LeastLongTermMessageRate
from balancer.placement.least_resource_usage_with_weight import LeastResourceUsageWithWeight

CFG = LoadBalancerConfig()
NOW = 1_700_000_000_000
SRC = "drained:8080"
RANGES = ["0x00000000_0x40000000", "0x40000000_0x80000000", "0x80000000_0xc0000000", "0xc0000000_0xffffffff"]


def stats(rate: float) -> NamespaceBundleStats:
    return NamespaceBundleStats(msg_rate_in=rate, msg_throughput_in=rate * 1000, topics=4)


def broker(bundles: dict[str, float]) -> BrokerData:
    last = {b: stats(r) for b, r in bundles.items()}
    return BrokerData(
        local_data=LocalBrokerData(
            cpu=ResourceUsage(usage=10, limit=100),
            last_stats=last,
            bundles=set(last),
            msg_rate_in=sum(bundles.values()),
            msg_throughput_in=sum(bundles.values()) * 1000,
            load_manager_class_name=CFG.loadManagerClassName,
        )
    )


def cluster(bundles: list[str], dests: dict[str, dict[str, float]]) -> LoadData:
    load = LoadData()
    load.broker_data[SRC] = broker(dict.fromkeys(bundles, 100.0))
    for name, owned in dests.items():
        load.broker_data[name] = broker(owned)
    update_bundle_data(load, NOW, {}, {})
    return load


def drain_all(
    load: LoadData, bundles: list[str], strategy: PlacementStrategy, seed: int
) -> tuple[list[Move], PlacementContext]:
    """One move per tick, as the leader's drain makes them; every report stays as it was (no
    destination reports its new bundle yet), only the ownership the leader reads changes."""
    ctx = PlacementContext.from_load(load, cordoned=frozenset({SRC}))
    rng = random.Random(seed)
    owned, moves = list(bundles), []
    while owned:
        ctx.refresh(load)  # the leader refreshes its view each tick; the reports did not change
        step = drain_moves(SRC, owned, load, CFG, strategy, ctx, rng)
        assert len(step.moves) == 1, step.unplaced
        moves.append(step.moves[0])
        owned.remove(step.moves[0].bundle)
    return moves, ctx


def spread(moves: list[Move]) -> list[int]:
    return sorted(Counter(m.destination for m in moves).values())


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("same_namespace", [False, True])
def test_a_drain_spreads_equal_bundles_evenly_over_equal_idle_brokers(
    seed: int, same_namespace: bool
) -> None:
    bundles = [f"t/ns/{r}" if same_namespace else f"t/ns{i}/{r}" for i, r in enumerate(RANGES)]
    load = cluster(bundles, {"d1:8080": {}, "d2:8080": {}})
    moves, _ = drain_all(load, bundles, LeastLongTermMessageRate(), seed)
    assert spread(moves) == [2, 2], [m.destination for m in moves]


def test_a_drain_does_not_pile_onto_the_broker_that_looked_least_loaded_when_it_began() -> None:
    """The observed case: one destination a little quieter than the other when the drain starts.
    Without preallocation every bundle went there (its report never showed them)."""
    bundles = [f"t/ns{i}/{r}" for i, r in enumerate(RANGES)]
    load = cluster(
        bundles,
        {"d1:8080": {"q/a/0x00000000_0xffffffff": 1.0}, "d2:8080": {"q/b/0x00000000_0xffffffff": 2.0}},
    )
    moves, _ = drain_all(load, bundles, LeastLongTermMessageRate(), seed=1)
    assert spread(moves) == [2, 2], [m.destination for m in moves]
    k = 3
    dests = {f"d{i}:8080": {f"q/n{i}/0x00000000_0xffffffff": float(i + 1)} for i in range(k)}
    bundles = [f"t/ns{i}/0x00000000_0xffffffff" for i in range(6)]
    moves, _ = drain_all(cluster(bundles, dests), bundles, LeastLongTermMessageRate(), seed=2)
    assert spread(moves) == [2, 2, 2], [m.destination for m in moves]


def test_the_even_distribution_filter_counts_the_drains_bundles_under_any_strategy() -> None:
    """LeastResourceUsageWithWeight reads only the reports' usage (as Pulsar's does); a namespace's
    bundles still spread, through the preallocated ranges the even-distribution filter counts."""
    bundles = [f"t/ns/{r}" for r in RANGES]
    for seed in range(4):
        load = cluster(bundles, {"d1:8080": {}, "d2:8080": {}})
        moves, _ = drain_all(load, bundles, LeastResourceUsageWithWeight(), seed)
        assert spread(moves) == [2, 2], [m.destination for m in moves]


def test_the_preallocation_ends_when_the_destination_reports_the_bundle() -> None:
    bundles = [f"t/ns{i}/{r}" for i, r in enumerate(RANGES[:2])]
    load = cluster(bundles, {"d1:8080": {}, "d2:8080": {}})
    moves, ctx = drain_all(load, bundles, LeastLongTermMessageRate(), seed=0)
    strategy = LeastLongTermMessageRate()
    first = moves[0]
    dest = load.broker_data[first.destination]
    assert ctx.preallocated_bundle_to_broker[first.bundle] == first.destination
    assert first.bundle in dest.preallocated_bundle_data
    counted = strategy.score(dest, CFG)
    assert counted > 0  # the bundle's load counts there before any report shows it
    # The destination's next report lists the bundle, the drained broker's no longer does.
    dest.local_data = broker({first.bundle: 100.0}).local_data
    load.broker_data[SRC].local_data = broker({b: 100.0 for b in bundles if b != first.bundle}).local_data
    update_bundle_data(load, NOW + 60_000, {}, {})
    ctx.refresh(load, changed=[first.destination, SRC])
    assert first.bundle not in ctx.preallocated_bundle_to_broker
    assert first.bundle not in dest.preallocated_bundle_data
    assert strategy.score(dest, CFG) == pytest.approx(counted)  # counted once, from the report now
    assert ctx.bundle_ranges[first.destination] == {"t/ns0": {RANGES[0]}}
    # The other destination leaves before reporting its bundle: its preallocation goes with it.
    second = moves[1]
    assert ctx.preallocated_bundle_to_broker[second.bundle] == second.destination
    del load.broker_data[second.destination]
    ctx.refresh(load)
    assert ctx.preallocated_bundle_to_broker == {}


def test_a_refused_or_given_up_move_leaves_no_preallocation_a_served_one_keeps_it() -> None:
    from service.leader.drain import DrainSequencer, DrainState, Observation

    bundles = [f"t/ns{i}/{r}" for i, r in enumerate(RANGES[:3])]
    load = cluster(bundles, {"d1:8080": {}, "d2:8080": {}})
    ctx = PlacementContext.from_load(load, cordoned=frozenset({SRC}))
    owners = dict.fromkeys(bundles, SRC)
    refuse = {bundles[0]}
    rng = random.Random(0)

    def submit(moves: list[Move]) -> list[Move]:
        return [m for m in moves if m.bundle not in refuse]

    def plan(skip: set[str]) -> DrainStep:
        owned = [b for b, o in owners.items() if o == SRC]
        return drain_moves(SRC, owned, load, CFG, LeastLongTermMessageRate(), ctx, rng, skip=skip)

    released: list[tuple[str, str]] = []

    def release(bundle: str, dest: str) -> None:
        released.append((bundle, dest))
        ctx.release(load, bundle, dest)

    seq = DrainSequencer(
        lambda s: None,
        submit,
        lambda *a: None,
        served_timeout_ms=1000,
        release=release,
    )
    state = DrainState(SRC, total=3)

    def tick(now: int) -> None:
        owned = [b for b, o in owners.items() if o == SRC]
        seq.tick(state, Observation(owners, bundles, set(load.broker_data), now), owned, plan)

    tick(0)  # bundles[0] refused: its preallocation is released at once
    assert state.in_flight is None and state.attempts == {bundles[0]: 1}
    assert ctx.preallocated_bundle_to_broker == {}
    assert all(not d.preallocated_bundle_data for d in load.broker_data.values())
    assert all(RANGES[0] not in r.get("t/ns0", set()) for b, r in ctx.bundle_ranges.items() if b != SRC)
    refuse.clear()
    tick(1)
    f = state.in_flight
    assert f is not None and f.bundle == bundles[0]
    assert ctx.preallocated_bundle_to_broker == {f.bundle: f.destination}
    owners[f.bundle] = f.destination  # served: the preallocation stays until the report shows it
    tick(2)
    assert ctx.preallocated_bundle_to_broker[bundles[0]] == f.destination
    g = state.in_flight
    assert g is not None and g.bundle == bundles[1]
    assert g.destination != f.destination  # the first one counted: the other idle broker
    # Not served within the timeout and still on the drained broker: that attempt's preallocation is
    # released before the bundle is placed again (attempt 2).
    tick(2000)
    assert (g.bundle, g.destination) in released
    h = state.in_flight
    assert h is not None and h.bundle == bundles[1] and state.attempts == {bundles[1]: 1}
    assert ctx.preallocated_bundle_to_broker == {bundles[0]: f.destination, h.bundle: h.destination}
    # Served by another broker than the one decided (Pulsar's lookup chose): released too.
    other = next(b for b in ("d1:8080", "d2:8080") if b != h.destination)
    owners[h.bundle] = other
    tick(2001)
    assert (h.bundle, h.destination) in released
    last = state.in_flight
    assert last is not None and last.bundle == bundles[2]
    assert ctx.preallocated_bundle_to_broker == {bundles[0]: f.destination, bundles[2]: last.destination}
    assert set(load.broker_data[h.destination].preallocated_bundle_data) <= {bundles[0], bundles[2]}


@pytest.mark.parametrize("seed", range(3))
def test_balanced_shedders_placement_counts_the_drains_bundles_across_its_shedding_cycles(seed: int) -> None:
    """BalancedShedder's placement counts what it placed since its view (``pending``), and a shedding
    cycle builds a new view; the bundles preallocated before it that no report lists yet start the
    new view's ``pending``, so a drain that outlives a cycle still spreads."""
    from balancer.shedding.balanced import BalancedShedder

    bundles = [f"t/ns{i}/{r}" for i, r in enumerate(RANGES)]
    quiet = {"d1:8080": {"q/a/0x00000000_0xffffffff": 1.0}, "d2:8080": {"q/b/0x00000000_0xffffffff": 2.0}}
    load = cluster(bundles, quiet)
    balanced = BalancedShedder()
    ctx = PlacementContext.from_load(load, cordoned=frozenset({SRC}))
    rng = random.Random(seed)
    owned, moves = list(bundles), []
    while owned:
        balanced.find_bundles_for_unloading(load, CFG)  # a shedding cycle between two drain moves
        ctx.refresh(load)
        step = drain_moves(SRC, owned, load, CFG, balanced, ctx, rng)
        moves.append(step.moves[0])
        owned.remove(step.moves[0].bundle)
    assert spread(moves) == [2, 2], [m.destination for m in moves]
