"""Pulsar mode looks where each move landed (``service/leader/pulsar_moves.py``): Pulsar 4.0.7 may spend
a ``destinationBroker`` affinity and place the bundle itself; the leader then unloads it again to the
destination it decided, a bounded number of times, each recorded as a decision."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from service.errors import ServiceError
from service.leader.pulsar_moves import REFUSALS, REISSUES, UNOWNED_FOR_MS, PulsarMoveCheck
from service.leader.write_window import WriteWindow
from service.zookeeper.metadata.records import Owner

B = "public/skewed/0x00000000_0x20000000"
S, D, X = "127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"


@dataclass
class _Snap:
    owners: dict[str, Owner]
    brokers: dict[str, object] = field(default_factory=lambda: dict.fromkeys((S, D, X), object()))
    bundles: set[str] = field(default_factory=lambda: {B})

    def live_bundles(self) -> set[str]:
        return set(self.bundles)


class _Executor:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str | None, str | None, str]] = []
        self.fail = fail

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        if self.fail:
            raise ServiceError("HTTP 503")
        self.calls.append((bundle, source, destination, reason))


class _Jobs(PulsarMoveCheck, WriteWindow):
    def __init__(self, executor: _Executor, zk_native: bool = False) -> None:
        self.executor = executor  # type: ignore[assignment]
        self.in_flight = frozenset()
        self.unlocked_s = 0.0
        self.unlocked = contextlib.nullcontext
        self._native = zk_native
        self._pending_moves = {}
        self.reissued_moves = 0
        self.metrics = self  # type: ignore[assignment]
        self.unloads: list[str] = []
        self.records: list[tuple[str, Any, dict[str, Any]]] = []

    @property
    def zk_native(self) -> bool:
        return self._native

    def is_leader(self) -> bool:
        return True

    def unloaded(self, reason: str) -> None:
        self.unloads.append(reason)

    def _record(self, kind: Any, explanation: Any, **kw: Any) -> Any:
        self.records.append((kind, explanation, kw))


def _owned_by(broker: str | None) -> _Snap:
    return _Snap({} if broker is None else {B: Owner(broker, 1, 0)})


def test_a_move_pulsar_placed_elsewhere_is_unloaded_again_to_its_destination_then_given_up() -> None:
    ex = _Executor()
    jobs = _Jobs(ex)
    jobs._expect_move(B, D, "overloaded", 1_000)
    assert jobs._check_moves(_owned_by(None), 2_000) == 0  # not looked up yet: wait
    assert jobs._check_moves(_owned_by(X), 3_000) == 1  # Pulsar put it on X
    assert ex.calls == [(B, X, D, "destination_not_honoured")]
    kind, why, kw = jobs.records[0]
    assert kind == "shedding" and kw == {"bundle": B, "source": X, "destination": D}
    assert why.numbers["placedOn"] == X and why.numbers["decidedReason"] == "overloaded"
    for _ in range(REISSUES + 2):
        jobs._check_moves(_owned_by(X), 4_000)
    assert len(ex.calls) == REISSUES and jobs.reissued_moves == REISSUES  # bounded, then left there
    assert jobs.unloads == ["destination_not_honoured"] * REISSUES
    assert jobs._pending_moves == {}


def test_a_move_that_landed_or_cannot_land_is_forgotten_without_an_unload() -> None:
    for snap, now in (
        (_owned_by(D), 2_000),  # where decided
        (_Snap({B: Owner(X, 1, 0)}, bundles=set()), 2_000),  # split or deleted since
        (_Snap({B: Owner(X, 1, 0)}, brokers={S: object(), X: object()}), 2_000),  # destination gone
        (_owned_by(None), 1_000 + UNOWNED_FOR_MS + 1),  # nobody looked it up for that long
    ):
        ex = _Executor()
        jobs = _Jobs(ex)
        jobs._expect_move(B, D, "overloaded", 1_000)
        assert jobs._check_moves(snap, now) == 0  # type: ignore[arg-type]
        assert ex.calls == [] and jobs._pending_moves == {}


def test_zookeeper_native_mode_and_moves_without_destination_are_not_watched() -> None:
    native = _Jobs(_Executor(), zk_native=True)
    native._expect_move(B, D, "overloaded", 1_000)
    assert native._pending_moves == {}
    jobs = _Jobs(_Executor())
    jobs._expect_move(B, None, "overloaded", 1_000)
    assert jobs._pending_moves == {}


def test_an_unload_again_pulsar_refuses_is_tried_at_the_next_refresh_a_bounded_number_of_times() -> None:
    ex = _Executor(fail=True)
    jobs = _Jobs(ex)
    jobs._expect_move(B, D, "overloaded", 1_000)
    for i in range(REFUSALS - 1):
        assert jobs._check_moves(_owned_by(X), 2_000 + i) == 0  # type: ignore[arg-type]
        assert B in jobs._pending_moves and jobs.records == []  # still followed
    ex.fail = False  # the bundle's move in Pulsar is over: the next try goes through
    assert jobs._check_moves(_owned_by(X), 3_000) == 1  # type: ignore[arg-type]
    assert ex.calls == [(B, X, D, "destination_not_honoured")]
    jobs2 = _Jobs(_Executor(fail=True))
    jobs2._expect_move(B, D, "overloaded", 1_000)
    for i in range(REFUSALS):
        jobs2._check_moves(_owned_by(X), 2_000 + i)  # type: ignore[arg-type]
    assert jobs2._pending_moves == {} and jobs2.records == []  # refused every time: left there


def test_an_operators_move_is_followed_up_as_an_operators_decision() -> None:
    ex = _Executor()
    jobs = _Jobs(ex)
    jobs._expect_move(B, D, "manual_unload", 1_000, kind="manual")
    assert jobs._check_moves(_owned_by(S), 2_000) == 1  # Pulsar put it back where it was
    assert ex.calls == [(B, S, D, "destination_not_honoured")]
    kind, why, _ = jobs.records[0]
    assert kind == "manual" and why.numbers["decidedReason"] == "manual_unload"


def test_a_bundle_in_flight_is_left_to_the_unload_under_way() -> None:
    ex = _Executor()
    jobs = _Jobs(ex)
    jobs._expect_move(B, D, "overloaded", 1_000)
    jobs.in_flight = frozenset({B})  # an operator's unload of it runs with the lock let go
    assert jobs._check_moves(_owned_by(X), 2_000) == 0  # type: ignore[arg-type]
    assert ex.calls == [] and B in jobs._pending_moves
    jobs.in_flight = frozenset()
    assert jobs._check_moves(_owned_by(X), 3_000) == 1  # type: ignore[arg-type]
