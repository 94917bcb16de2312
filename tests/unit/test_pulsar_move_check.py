"""The move queue's tick (``service/leader/move_tick.py``) and Pulsar mode's second unload
(``service/leader/pulsar_moves.py``): one tracker follows every move until it is served at its
destination, in both modes. Pulsar 4.0.7 may spend a ``destinationBroker`` affinity and place the
bundle itself; the leader then unloads it again to the destination it decided, a bounded number of
times, each recorded as a decision. A leader that loses its term drops its queue."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.explain import explain
from balancer.models import LoadData
from service.errors import ServiceError, StaleWrite
from service.leader.clock import now_ms
from service.leader.cluster_view import DecisionLog
from service.leader.move_queue import MoveRequest
from service.leader.move_tick import PacedMoves
from service.leader.pulsar_moves import REFUSALS, REISSUES, UNOWNED_FOR_MS, PulsarMoveCheck
from service.leader.write_window import WriteWindow
from service.zookeeper import paths as P
from service.zookeeper.metadata.records import Owner

NS = "public/skewed"
B = f"{NS}/0x00000000_0x20000000"
B2 = f"{NS}/0x20000000_0x40000000"
S, D, X = "127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"
# Spacing (loadBalancerUnloadSpacingSeconds) is test_pacing's; these ticks run on the real clock.
CONFIG = LoadBalancerConfig().with_updates({"loadBalancerUnloadSpacingSeconds": 0})


@dataclass
class _Layout:
    bundle_names: list[str]


@dataclass
class _Versioned:
    value: Any
    version: int = 0


@dataclass
class _Store:
    owners: dict[str, str] = field(default_factory=dict)
    brokers: list[str] = field(default_factory=lambda: [S, D, X])
    bundles: list[str] = field(default_factory=lambda: [B, B2])

    def broker_ids(self) -> list[str]:
        return list(self.brokers)

    def read_owner(self, bundle: str) -> Owner | None:
        who = self.owners.get(bundle)
        return None if who is None else Owner(who, 1, 0)

    def read_layout(self, ns: str) -> _Versioned | None:
        return _Versioned(_Layout(list(self.bundles))) if ns == NS else None

    def get_many(self, paths: list[str]) -> dict[str, tuple[str, None]]:
        known = {P.ownership_path(b): who for b, who in self.owners.items()}
        return {p: (known[p], None) for p in paths if p in known}

    def decode_owner(self, path: str, raw: str, stat: None) -> Owner:
        return Owner(raw, 1, 0)

    def decode_assignment(self, path: str, raw: str, stat: None) -> None:
        return None


class _Executor:
    def __init__(self, fail: ServiceError | None = None) -> None:
        self.calls: list[tuple[str, str | None, str | None, str]] = []
        self.fail = fail

    def prepare(self, bundle: str, destination: str | None) -> None:
        pass

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        if self.fail is not None:
            raise self.fail
        self.calls.append((bundle, source, destination, reason))


@dataclass
class _View:
    load: LoadData = field(default_factory=LoadData)
    owners_elsewhere: Any = None  # Modular brokers: ownership from ZooKeeper's nodes


class _Jobs(PacedMoves, PulsarMoveCheck, WriteWindow):
    def __init__(self, executor: _Executor, store: _Store) -> None:
        self.executor = executor  # type: ignore[assignment]
        self.store = store  # type: ignore[assignment]
        self.view = _View()  # type: ignore[assignment]
        self.decisions = DecisionLog(100)
        self.history = None
        self.in_flight = frozenset()
        self.unlocked_s = 0.0
        self.unlocked = contextlib.nullcontext
        self.reissued_moves = 0
        self.metrics = self  # type: ignore[assignment]
        self.unloads: list[str] = []
        self.served: list[tuple[str, str, float]] = []
        self.leader = True
        self.epoch = lambda: 7 if self.leader else None
        self._init_moves()

    @property
    def zk_native(self) -> bool:
        return False

    def is_leader(self) -> bool:
        return self.leader

    def unloaded(self, reason: str) -> None:
        self.unloads.append(reason)

    def shedding_unloads(self, brokers: int, bundles: int) -> None:
        pass

    def move_served(self, mode: str, kind: str, seconds: float) -> None:
        self.served.append((mode, kind, seconds))

    def _record(self, kind: Any, explanation: Any, to_history: bool = True, **kw: Any) -> Any:
        return self.decisions.add(0, kind, explanation, **kw)


def _move(bundle: str = B, source: str = S, dest: str | None = D) -> MoveRequest:
    return MoveRequest(bundle, source, dest, explain("overloaded", "test", subject=bundle))


def _jobs(fail: ServiceError | None = None) -> tuple[_Jobs, _Executor, _Store]:
    ex, store = _Executor(fail), _Store(owners={B: S, B2: S})
    return _Jobs(ex, store), ex, store


def _state(jobs: _Jobs, bundle: str = B) -> str | None:
    rec = next(r for r in jobs.decisions.latest(100) if r.bundle == bundle and r.state is not None)
    return rec.state


def test_a_plan_is_released_one_move_per_source_each_after_the_previous_is_served() -> None:
    jobs, ex, store = _jobs()
    jobs.moves.submit([_move(B), _move(B2)], "shedding")
    assert _state(jobs, B) == "planned" and _state(jobs, B2) == "planned"
    assert jobs.move_tick(CONFIG) == 1
    assert ex.calls == [(B, S, D, "overloaded")]
    assert _state(jobs, B) == "in_flight" and _state(jobs, B2) == "planned"
    note = next(r for r in jobs.decisions.latest(100) if r.bundle == B2).note
    assert note is not None and note["reason"] == "source_busy"
    store.owners.pop(B)  # unloaded, not looked up yet: still in flight, B2 still waits
    assert jobs.move_tick(CONFIG) == 0 and len(ex.calls) == 1
    store.owners[B] = D  # served at its destination: the next goes
    assert jobs.move_tick(CONFIG) == 1
    assert ex.calls[-1] == (B2, S, D, "overloaded")
    assert _state(jobs, B) == "served" and [(m, k) for m, k, _ in jobs.served] == [("pulsar", "shedding")]
    rec = next(r for r in jobs.decisions.latest(100) if r.bundle == B)
    assert rec.applied and rec.released_ms is not None and rec.served_ms is not None


def test_a_move_pulsar_placed_elsewhere_is_unloaded_again_to_its_destination_then_given_up() -> None:
    jobs, ex, store = _jobs()
    jobs.moves.submit([_move(B)], "shedding")
    jobs.move_tick(CONFIG)
    store.owners[B] = X  # Pulsar put it on X
    jobs.move_tick(CONFIG)
    assert ex.calls[-1] == (B, X, D, "destination_not_honoured")
    rec = jobs.decisions.latest(1)[0]
    assert rec.kind == "shedding" and (rec.source, rec.destination) == (X, D)
    assert (
        rec.explanation["numbers"]["placedOn"] == X
        and rec.explanation["numbers"]["decidedReason"] == "overloaded"
    )
    for _ in range(REISSUES + 2):
        jobs.move_tick(CONFIG)
    assert len(ex.calls) == 1 + REISSUES and jobs.reissued_moves == REISSUES  # bounded, then left there
    assert jobs.unloads == ["overloaded"] + ["destination_not_honoured"] * REISSUES
    assert jobs.moves.in_flight() == [] and _state(jobs, B) == "unserved"


def test_an_unload_again_pulsar_refuses_is_tried_at_the_next_tick_a_bounded_number_of_times() -> None:
    jobs, ex, store = _jobs()
    jobs.moves.submit([_move(B)], "shedding")
    jobs.move_tick(CONFIG)
    store.owners[B] = X
    ex.fail = ServiceError("HTTP 503")
    for _ in range(REFUSALS - 1):
        jobs.move_tick(CONFIG)
        assert jobs.moves.get_in_flight(B) is not None  # still followed
    ex.fail = None  # the bundle's move in Pulsar is over: the next try goes through
    jobs.move_tick(CONFIG)
    assert ex.calls[-1] == (B, X, D, "destination_not_honoured")
    jobs2, ex2, store2 = _jobs()
    jobs2.moves.submit([_move(B)], "shedding")
    jobs2.move_tick(CONFIG)
    store2.owners[B] = X
    ex2.fail = ServiceError("HTTP 503")
    for _ in range(REFUSALS):
        jobs2.move_tick(CONFIG)
    assert jobs2.moves.in_flight() == [] and _state(jobs2, B) == "unserved"  # refused every time: left there


def test_a_move_that_cannot_land_is_given_up_without_an_unload() -> None:
    for change in ("destination left", "split", "nobody looks it up"):
        jobs, ex, store = _jobs()
        jobs.moves.submit([_move(B)], "shedding")
        jobs.move_tick(CONFIG)
        store.owners.pop(B)
        if change == "destination left":
            store.brokers.remove(D)
        elif change == "split":
            store.bundles.remove(B)
        jobs.move_tick(CONFIG)
        if change == "nobody looks it up":
            assert jobs.moves.get_in_flight(B) is not None
            entry = jobs.moves.get_in_flight(B)
            assert entry is not None and entry.since_ms is not None
            entry.since_ms -= UNOWNED_FOR_MS + 1
            jobs.move_tick(CONFIG)
        assert jobs.moves.in_flight() == [] and len(ex.calls) == 1, change
        assert _state(jobs, B) == "unserved" and jobs.served == []


def test_a_queued_move_no_longer_on_its_source_is_refused_when_its_turn_comes() -> None:
    jobs, ex, store = _jobs()
    store.owners[B2] = X  # someone else moved it since the plan
    jobs.moves.submit([_move(B2)], "shedding")
    assert jobs.move_tick(CONFIG) == 0 and ex.calls == []
    rec = next(r for r in jobs.decisions.latest(100) if r.bundle == B2)
    assert rec.state == "refused" and not rec.applied and "no longer on" in (rec.note or {})["message"]


def test_an_operators_move_is_followed_and_holds_its_sources_slot() -> None:
    jobs, ex, store = _jobs()
    why = explain("manual_unload", "operator", subject=B)
    store.owners.pop(B)
    now = now_ms()
    rec = jobs._record("manual", why, bundle=B, source=S, destination=D, state="in_flight", released_ms=now)
    jobs.track_manual(MoveRequest(B, S, D, why), rec, now)
    jobs.moves.submit([_move(B2)], "shedding")
    assert jobs.move_tick(CONFIG) == 0  # S has an unload in flight: the operator's
    store.owners[B] = S  # Pulsar put it back where it was
    jobs.move_tick(CONFIG)
    assert ex.calls[0] == (B, S, D, "destination_not_honoured")
    assert jobs.decisions.latest(1)[0].kind == "manual"


def test_a_later_plan_replaces_what_is_still_queued() -> None:
    jobs, _, _ = _jobs()
    jobs.moves.submit([_move(B), _move(B2)], "shedding")
    jobs.move_tick(CONFIG)
    jobs.moves.submit([], "shedding")  # a cycle that plans nothing leaves the plan to finish
    assert [e.bundle for e in jobs.moves.queued()] == [B2] and _state(jobs, B2) == "planned"
    jobs.moves.submit([_move(B2, dest=X)], "shedding")  # a new plan replaces what is still queued
    assert [e.destination for e in jobs.moves.queued()] == [X]
    replaced = [r for r in jobs.decisions.latest(100) if r.bundle == B2 and r.state == "replaced"]
    assert len(replaced) == 1 and replaced[0].destination == D
    assert _state(jobs, B) == "in_flight"  # what was written is still followed


def test_losing_leadership_drops_the_queue_and_releases_nothing() -> None:
    jobs, ex, store = _jobs()
    jobs.moves.submit([_move(B), _move(B2)], "shedding")
    jobs.move_tick(CONFIG)
    jobs.leader = False
    assert jobs.move_tick(CONFIG) == 0
    assert len(jobs.moves) == 0 and _state(jobs, B2) == "dropped" and _state(jobs, B) == "dropped"
    store.owners[B] = D
    jobs.leader = True
    assert jobs.move_tick(CONFIG) == 0 and len(ex.calls) == 1 and jobs.served == []


def test_a_fenced_write_refused_stops_releasing_and_drops_the_queue() -> None:
    jobs, _, store = _jobs(fail=StaleWrite("fenced out"))
    store.owners[B2] = X
    jobs.moves.submit([_move(B), _move(B2, source=X, dest=S)], "shedding")  # two sources, two destinations
    assert jobs.move_tick(CONFIG) == 0
    assert len(jobs.moves) == 0
    assert _state(jobs, B) == "refused" and _state(jobs, B2) == "refused"


def test_a_new_term_starts_with_an_empty_queue() -> None:
    jobs, _, _ = _jobs()
    jobs.moves.submit([_move(B), _move(B2)], "shedding")
    jobs.move_tick(CONFIG)
    jobs.epoch = lambda: 8  # elected again: another term
    jobs.move_tick(CONFIG)
    assert _state(jobs, B2) == "dropped"


def test_a_move_starts_once_its_destinations_warm_up_is_done_not_when_its_tick_began() -> None:
    # A broker that just joined took 10 s to answer Pulsar's health check on real brokers: the spacing
    # and the served time count from the unload, not from before the warm-up (the next unload from the
    # same source went 5 s after the first, not 15 s).
    class _Warming(_Executor):
        def __init__(self) -> None:
            super().__init__()
            self.prepared_at: list[int] = []

        def prepare(self, bundle: str, destination: str | None) -> None:
            import time

            time.sleep(0.3)
            self.prepared_at.append(now_ms())

    ex, store = _Warming(), _Store(owners={B: S, B2: S})
    jobs = _Jobs(ex, store)
    jobs.moves.submit([_move(B)], "shedding")
    before = now_ms()
    assert jobs.move_tick(CONFIG) == 1
    rec = next(r for r in jobs.decisions.latest(100) if r.bundle == B)
    assert rec.released_ms is not None and rec.released_ms >= ex.prepared_at[0] >= before + 300
    assert jobs.moves.last_started(S) == rec.released_ms
