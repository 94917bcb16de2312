"""Cordons in placement (pure): a cordoned broker gets no new bundle from shedding, the orphan rule
or a placement; and a drain's next moves: every bundle but the heartbeat ones, to placement's pick."""

from __future__ import annotations

import random

import httpx
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


def test_idle_bundles_go_first_and_only_they_move_while_the_spacing_holds() -> None:
    from balancer.explain import explain

    load = cluster(n_cool=3)
    owned = sorted(load.broker_data[HOT].local_data.last_stats)
    idle = {owned[-1], owned[-2]}
    order = remaining(owned, idle)
    assert order[:2] == sorted(idle) and order[2:] == [b for b in owned if b not in idle]
    ctx = PlacementContext.from_load(load, cordoned=frozenset({HOT}))
    hold = explain("spacing", "the next bundle with traffic goes 15 s after the last one's unload")
    step = drain_moves(
        HOT,
        owned,
        load,
        CFG,
        LeastLongTermMessageRate(),
        ctx,
        random.Random(3),
        idle=idle,
        hold=hold,
        limit=9,
    )
    assert [m.bundle for m in step.moves] == sorted(idle)
    assert all(m.explanation.numbers["idle"] for m in step.moves)
    assert step.waiting is hold
    # The idle ones gone, a held drain moves nothing and says why; unheld, the next with traffic goes.
    held = drain_moves(
        HOT,
        owned,
        load,
        CFG,
        LeastLongTermMessageRate(),
        ctx,
        random.Random(3),
        skip=idle,
        idle=idle,
        hold=hold,
    )
    assert held.moves == [] and held.waiting is hold
    free = drain_moves(
        HOT, owned, load, CFG, LeastLongTermMessageRate(), ctx, random.Random(3), skip=idle, idle=idle
    )
    assert [m.bundle for m in free.moves] == order[2:3] and not free.moves[0].explanation.numbers["idle"]
    assert free.waiting is None


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


def test_metrics_show_the_cordons_and_the_drain() -> None:
    from types import SimpleNamespace

    from service.api.metrics import PrometheusMetrics
    from service.leader.cordons import Cordon
    from service.leader.drain import DrainState

    m = PrometheusMetrics(cluster="c")
    text = m.render().decode()
    assert "loadmgr_broker_cordoned{" not in text and "loadmgr_drain_state{" not in text
    state = DrainState("b1:8080", "running", moved=3, remaining=2)
    m.watch(
        SimpleNamespace(
            store=None,
            cordons=lambda: {"b1:8080": Cordon("b1:8080", 1, None, "drain")},
            drain_state=lambda: state,
        )
    )
    text = m.render().decode()
    assert 'loadmgr_broker_cordoned{broker="b1:8080",cluster="c"} 1.0' in text
    assert 'loadmgr_drain_state{broker="b1:8080",cluster="c",state="running"} 1.0' in text
    assert 'loadmgr_drain_state{broker="b1:8080",cluster="c",state="done"} 0.0' in text
    assert 'loadmgr_drain_bundles_moved{broker="b1:8080",cluster="c"} 3.0' in text
    assert 'loadmgr_drain_bundles_remaining{broker="b1:8080",cluster="c"} 2.0' in text


def test_drain_state_round_trips_and_hostile_nodes_are_refused() -> None:
    from service.leader.cordons import parse_cordons, parse_drain
    from service.leader.drain import DrainState, InFlight

    s = DrainState(
        "b1:8080", "running", 1, 2, "admin", False, 5, 2, ["x/y/0x0_0x1"], InFlight("a/b/r", "b2:8080", 3)
    )
    s.given_up = {"a/b/q": "stuck"}
    again = DrainState.from_json(s.to_json())
    assert again == s
    for junk in (
        b"{",
        b"[]",
        b'{"broker": 5}',
        b'{"broker": "b", "state": "exploded"}',
        b'{"broker": "b", "inFlight": {"bundle": 1}}',
        b'{"broker": "b", "moved": true}',
    ):
        assert parse_drain(junk) is None, junk
    got = parse_cordons(b'{"brokers": {"b1:8080": {"since": 5}, "bad id": {}, "b2:8080": "x"}}')
    assert set(got) == {"b1:8080", "b2:8080"} and got["b1:8080"].since_ms == 5
    assert parse_cordons(b"not json") == {} and parse_cordons(b'{"brokers": []}') == {}


def test_the_sequencer_records_the_bundle_in_flight_before_moving_it_and_waits_for_it() -> None:
    from balancer.cycle import Move
    from balancer.drain import DrainStep
    from balancer.explain import explain
    from service.leader.drain import DONE, DrainSequencer, DrainState, Observation

    bundles = ["t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"]
    owners = dict.fromkeys(bundles, HOT)
    events: list[str] = []

    def persist(s: DrainState) -> None:
        events.append(f"persist:{s.in_flight.bundle if s.in_flight else None}")

    def submit(moves: list[Move]) -> list[Move]:
        events.append(f"submit:{moves[0].bundle}")
        return moves

    def plan(skip: set[str]) -> DrainStep:
        todo = [b for b in sorted(owners) if owners[b] == HOT and b not in skip]
        return DrainStep(moves=[Move(b, HOT, "cool0:8080", explain("drain")) for b in todo[:1]])

    seq = DrainSequencer(persist, submit, lambda *a: None, served_timeout_ms=1000)
    state = DrainState(HOT, total=2)

    def tick(now: int) -> bool:
        owned = [b for b, o in owners.items() if o == HOT]
        return seq.tick(state, Observation(owners, bundles, {HOT, "cool0:8080"}, now), owned, plan)

    assert tick(0)
    assert events == [f"persist:{bundles[0]}", f"submit:{bundles[0]}"]
    assert not tick(500)  # not served yet: nothing else moves
    assert events[-1] == f"submit:{bundles[0]}"
    owners[bundles[0]] = "cool0:8080"  # served at its destination
    assert tick(600)
    assert state.moved == 1 and state.in_flight is not None and state.in_flight.bundle == bundles[1]
    # Not served within the timeout, still on the drained broker: tried again, then given up.
    for now in (2000, 2001, 4000, 4001, 6000, 6001):
        tick(now)
    assert state.given_up == {bundles[1]: f"still owned by {HOT} after the move"}
    assert state.state == DONE and state.moved == 1 and "1 left in place" in state.message
    assert not tick(7000)  # a finished drain does nothing more
    assert [e for e in events if e.startswith("submit")].count(f"submit:{bundles[0]}") == 1


def test_a_drain_held_by_its_spacing_says_why_once_and_is_not_done() -> None:
    from balancer.drain import DrainStep
    from balancer.explain import explain
    from service.leader.drain import RUNNING, DrainSequencer, DrainState, Observation

    writes: list[str] = []
    hold = explain("spacing", "the next bundle with traffic goes 15 s after the last one's unload")
    seq = DrainSequencer(lambda s: writes.append(s.message), lambda m: m, lambda *a: None)
    state = DrainState(HOT, total=1)
    obs = Observation({"a/b/1": HOT}, ["a/b/1"], {HOT, "cool0:8080"}, 1000)
    assert seq.tick(state, obs, ["a/b/1"], lambda skip: DrainStep(waiting=hold))
    assert not seq.tick(state, obs, ["a/b/1"], lambda skip: DrainStep(waiting=hold))  # written once
    assert state.state == RUNNING and state.in_flight is None and state.remaining == 1
    assert writes == [f"1 bundle(s) left; {hold.message}"]


def test_bundles_pulsar_places_on_a_cordoned_broker_are_intruders_the_kept_ones_are_not() -> None:
    from balancer.drain import intruders

    kept, gained = intruders(None, ["a/b/1", "a/b/2"])
    assert kept == {"a/b/1", "a/b/2"} and gained == []
    kept, gained = intruders(kept, ["a/b/1", "a/b/3", "pulsar/c/hot:8080/0x00000000_0xffffffff"])
    assert gained == ["a/b/3"] and kept == {"a/b/1"}
    kept, gained = intruders(kept, ["a/b/1", "a/b/2"])  # a/b/2 left and came back: gained
    assert gained == ["a/b/2"]


def test_pulsars_graceful_shutdown_is_asked_of_the_broker_itself() -> None:
    import httpx

    from service.pulsar.admin import PulsarAdmin

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    admin = PulsarAdmin("http://leader:8080", transport=httpx.MockTransport(answer))
    admin.shutdown_broker("http://b1:8080", max_concurrent_unload_per_sec=2)
    (r,) = seen
    assert r.method == "POST" and r.url.host == "b1" and r.url.path == "/admin/v2/brokers/shutdown"
    assert r.url.params["maxConcurrentUnloadPerSec"] == "2" and r.url.params["forcedTerminateTopic"] == "true"


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (httpx.ReadTimeout("slow"), "requested (no answer: ReadTimeout)"),  # the broker closes first
        (httpx.RemoteProtocolError("gone"), "requested (no answer: RemoteProtocolError)"),
        (httpx.ConnectError("refused"), None),  # never sent
        (httpx.Response(403, json={"reason": "not a super user"}), None),
    ],
)
def test_a_shutdown_the_broker_never_answers_was_still_requested(answer: object, outcome: str | None) -> None:
    from service.errors import ExecutorError
    from service.pulsar.admin import PulsarAdmin

    def reply(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, httpx.Response)
        return answer

    admin = PulsarAdmin("http://leader:8080", transport=httpx.MockTransport(reply))
    if outcome is None:
        with pytest.raises(ExecutorError):
            admin.shutdown_broker("http://b1:8080")
    else:
        assert admin.shutdown_broker("http://b1:8080") == outcome


def test_an_idle_bundle_left_unowned_is_off_the_broker_at_once_a_busy_one_is_waited_for() -> None:
    from service.leader.drain import DrainState, InFlight, Observation, in_flight_outcome

    state = DrainState(HOT, in_flight=InFlight("a/b/1", "cool0:8080", 0))
    busy = Observation({}, ["a/b/1"], {HOT, "cool0:8080"}, 1000)
    assert in_flight_outcome(state, busy, 30_000) == "waiting"
    idle = Observation({}, ["a/b/1"], {HOT, "cool0:8080"}, 1000, idle={"a/b/1"})
    assert in_flight_outcome(state, idle, 30_000) == "unowned"
    back = Observation({"a/b/1": HOT}, ["a/b/1"], {HOT, "cool0:8080"}, 1000, idle={"a/b/1"})
    assert in_flight_outcome(state, back, 30_000) == "waiting"
    assert in_flight_outcome(state, Observation({}, [], {HOT}, 1000), 30_000) == "gone"


def test_pulsar_placing_the_bundle_back_on_the_drained_broker_is_seen_in_seconds_not_at_the_timeout() -> None:
    from service.leader.drain import DrainState, InFlight, Observation, in_flight_outcome

    state = DrainState(HOT, in_flight=InFlight("a/b/1", "cool0:8080", 0))

    def on_hot(now: int) -> Observation:
        return Observation({"a/b/1": HOT}, ["a/b/1"], {HOT, "cool0:8080"}, now)

    # Pulsar mode (back_after_ms): the drained broker owning it 5 s after the move started is back.
    assert in_flight_outcome(state, on_hot(4_999), 30_000, 5_000) == "waiting"
    assert in_flight_outcome(state, on_hot(5_000), 30_000, 5_000) == "back"
    # ZooKeeper-native (no back_after_ms): the agent's handoff is under way until the timeout.
    assert in_flight_outcome(state, on_hot(5_000), 30_000) == "waiting"
    assert in_flight_outcome(state, on_hot(30_000), 30_000) == "stuck"
    # Unowned or at its destination is never "back".
    unowned = Observation({}, ["a/b/1"], {HOT, "cool0:8080"}, 6_000)
    assert in_flight_outcome(state, unowned, 30_000, 5_000) == "waiting"


def test_a_bundle_placed_back_is_moved_again_at_once_and_given_up_after_three() -> None:
    from balancer.cycle import Move
    from balancer.drain import DrainStep
    from balancer.explain import explain
    from service.leader.drain import DrainSequencer, DrainState, Observation

    bundle = "t/ns/0x00000000_0xffffffff"
    submits: list[int] = []
    seq = DrainSequencer(
        lambda s: None, lambda m: m, lambda *a: None, served_timeout_ms=30_000, back_after_ms=5_000
    )
    state = DrainState(HOT, total=1)
    obs = lambda now: Observation({bundle: HOT}, [bundle], {HOT, "cool0:8080"}, now)  # noqa: E731

    def plan(skip: set[str]) -> DrainStep:
        return DrainStep(moves=[] if bundle in skip else [Move(bundle, HOT, "cool0:8080", explain("drain"))])

    for now in range(0, 20_001, 1_000):
        before = state.in_flight
        seq.tick(state, obs(now), [bundle], plan)
        if state.in_flight is not None and state.in_flight is not before:
            submits.append(now)
    # Each placed back is seen 5 s on (not at the 30 s timeout) and moved again; three attempts.
    assert submits == [0, 5_000, 10_000]
    assert state.given_up == {bundle: f"Pulsar placed it back on {HOT}"}


@pytest.mark.parametrize(
    ("shutdown", "code"),
    [("requested", 0), ("requested (no answer: ReadTimeout)", 0), ("failed: HTTP 403", 1)],
)
def test_drain_wait_with_then_shutdown_waits_for_the_shutdown_outcome(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], shutdown: str, code: int
) -> None:
    """The drain is done a moment before Pulsar's shutdown is asked for (its answer comes once the
    broker has closed): ``--wait`` follows it to that outcome, and exits 1 when it was refused."""
    import argparse

    import service.commands.client as client
    from service.commands import maintenance

    base = {"broker": HOT, "thenShutdown": True, "moved": 2, "total": 2, "shutdown": None}
    states = iter(
        [
            {**base, "state": "done"},
            {**base, "state": "done"},
            {**base, "state": "done", "shutdown": shutdown},
        ]
    )
    calls: list[str] = []

    def call(a: argparse.Namespace, method: str, path: str, **kw: object) -> dict[str, object]:
        calls.append(path)
        return next(states)

    monkeypatch.setattr(client, "call", call)
    monkeypatch.setattr(maintenance, "POLL_S", 0.0)
    a = argparse.Namespace(timeout=None, output="table")
    first = {**base, "state": "running", "moved": 1}
    assert maintenance._wait(a, HOT, first) == code
    assert calls == [f"/brokers/{HOT}/drain"] * 3
    assert f"shutdown {shutdown}" in capsys.readouterr().out


def test_the_drain_spaces_a_bundle_with_traffic_from_any_unload_the_broker_took_part_in() -> None:
    """Idle bundles go back to back; the next bundle with traffic waits
    loadBalancerUnloadSpacingSeconds from the last unload the drained broker took part in, an idle
    one's included (real brokers: a busy bundle sent 0.25 s after an idle one had the drain's longest
    gap)."""
    from types import SimpleNamespace
    from typing import Any

    from balancer.cycle import Move
    from balancer.explain import explain
    from service.leader.drain_runner import DrainRunner
    from service.leader.move_queue import MoveQueue

    moves = MoveQueue(clock=lambda: 0)
    runner: Any = SimpleNamespace(
        _config=SimpleNamespace(loadBalancerUnloadSpacingSeconds=15.0), jobs=SimpleNamespace(moves=moves)
    )
    assert DrainRunner._spacing_hold(runner, HOT, 1_000) is None  # nothing moved yet
    moves.track(Move("a/b/idle", HOT, "cool0:8080", explain("drain", idle=True)), "drain", 1_000)
    hold = DrainRunner._spacing_hold(runner, HOT, 1_250)
    assert hold is not None and hold.reason == "spacing" and hold.numbers["lastUnloadMs"] == 1_000
    assert "loadBalancerUnloadSpacingSeconds" in hold.message
    assert DrainRunner._spacing_hold(runner, HOT, 16_000) is None
    runner._config.loadBalancerUnloadSpacingSeconds = 0.0  # off
    assert DrainRunner._spacing_hold(runner, HOT, 1_250) is None
