"""A whole-plan cycle records tens of thousands of moves (issue 49, item 13): a planned move's
explanation is built only when its record is read, its reason code without building it, its written
assignment is noted in the cache without parsing the document back, and the writes' records and
history rows go in one batch. Each must show the operator exactly what the eager path showed."""

from __future__ import annotations

import json
import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from balancer.cycle import Move
from balancer.explain import explain
from service.leader.cluster_view import DecisionLog, DecisionRecord
from service.leader.move_tick import _planned_explanation
from service.zookeeper.metadata.records import parse_assignment, parsed_as_is
from service.zookeeper.metadata.store import Assignment, ZkStore
from service.zookeeper.session.validate import JAVA_LONG_MAX, BadNode
from service.zookeeper.session.wire import json_bytes
from tests.unit.test_cycle import cluster, plan


def _moves() -> list[Move]:
    moves = plan(cluster()).moves
    assert moves
    return moves


def test_reason_without_building_the_explanation() -> None:
    for m in _moves():
        reason = m.reason
        assert m._explanation is None, "reading the reason built the explanation"
        assert reason == m.explanation.reason
        assert m.reason == reason  # and the same once built


def test_lazy_record_shows_what_the_eager_one_did() -> None:
    """Field for field the record ``add`` made from the built explanation (leader epoch included)."""
    eager_moves, lazy_moves = _moves(), _moves()
    log = DecisionLog(100)
    for eager, lazy in zip(eager_moves, lazy_moves, strict=True):
        why = eager.explanation
        why.numbers.setdefault("leaderEpoch", 3)
        kw: dict[str, Any] = dict(
            bundle=eager.bundle, source=eager.source, destination=eager.destination, applied=False
        )
        want = DecisionRecord.of(1, 5, "shedding", why, **kw, state="planned", planned_ms=5)
        got = log.add_lazy(
            5, "shedding", lambda m=lazy: _planned_explanation(m, 3), **kw, state="planned", planned_ms=5
        )
        assert got.explanation == {} and lazy._explanation is None  # nothing built yet
        (shown,) = [r for r in log.latest(100) if r.id == got.id]
        assert shown is got
        assert got.model_dump(exclude={"id"}) == want.model_dump(exclude={"id"})
        assert got.model_fields_set == want.model_fields_set
        assert got.explanation["numbers"]["leaderEpoch"] == 3


def test_principal_filled_from_the_explanation_when_read() -> None:
    log = DecisionLog(10)
    rec = log.add_lazy(1, "drain", lambda: explain("drain", principal="admin:ab12"), bundle="b")
    assert rec.principal is None
    assert log.latest(1)[0].principal == "admin:ab12"
    given_one = log.add_lazy(2, "drain", lambda: explain("drain", principal="x"), bundle="c", principal="me")
    assert log.latest(1)[0] is given_one and given_one.principal == "me"


def test_a_record_that_leaves_the_ring_unread_is_never_built() -> None:
    built: list[int] = []

    def maker(i: int) -> Any:
        return lambda: built.append(i) or explain("overloaded", subject=str(i))

    log = DecisionLog(3)
    for i in range(10):
        log.add_lazy(i, "shedding", maker(i), bundle=f"b{i}", state="planned")
    assert len(log._unbuilt) == 3  # the makers of records gone from the ring are let go
    shown = log.latest(10)
    assert [r.bundle for r in shown] == ["b9", "b8", "b7"]
    assert sorted(built) == [7, 8, 9]
    assert all(r.explanation["subject"] == r.bundle[1:] for r in shown)
    log.latest(10)
    assert sorted(built) == [7, 8, 9]  # built once


def test_reads_from_two_threads_build_one_explanation_each() -> None:
    moves = _moves()
    log = DecisionLog(100)
    recs = [
        log.add_lazy(1, "shedding", lambda m=m: _planned_explanation(m, 1), bundle=m.bundle) for m in moves
    ]
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(20):
                log.latest(100)
                for m in moves:
                    assert m.explanation.reason
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r.explanation["reason"] == m.reason for r, m in zip(recs, moves, strict=True))


def test_update_many_is_update_of_each() -> None:
    why = explain("overloaded", "m", ratio=1.5)
    log = DecisionLog(10)
    one = [log.add(1, "shedding", why, bundle=f"b{i}", state="planned", planned_ms=1) for i in range(3)]
    many = [log.add(1, "shedding", why, bundle=f"b{i}", state="planned", planned_ms=1) for i in range(3)]
    fields = dict(applied=True, state="in_flight", released_ms=9, note=None)
    for r in one:
        log.update(r, **fields)
    log.update_many(many, **fields)
    for a, b in zip(one, many, strict=True):
        assert a.model_dump(exclude={"id"}) == b.model_dump(exclude={"id"})
        assert a.model_fields_set == b.model_fields_set


def test_update_many_refuses_a_field_it_does_not_have() -> None:
    log = DecisionLog(10)
    rec = log.add(1, "shedding", explain("x"), bundle="b")
    try:
        log.update_many([rec], stat="in_flight")
    except ValueError as e:
        assert "stat" in str(e)
    else:
        raise AssertionError("an unknown field was taken")


_text = st.text(max_size=30)


@given(
    broker=_text,
    source=st.none() | _text,
    reason=_text,
    time_ms=st.integers(min_value=-5, max_value=JAVA_LONG_MAX + 5),
)
def test_written_value_is_what_a_read_would_decode(
    broker: str, source: str | None, reason: str, time_ms: int
) -> None:
    """The cache takes the value an assignment document was made from only when the record parser
    would return an equal one for that document; otherwise it parses the bytes as before."""
    value = Assignment(broker, source, reason, time_ms)
    doc = json_bytes(ZkStore.assignment_doc(value))
    try:
        parsed: Assignment | None = parse_assignment(json.loads(doc))
    except BadNode:
        parsed = None
    if parsed_as_is(value):
        assert parsed == value
    else:
        assert parsed is None


def test_history_rows_take_the_reason_given() -> None:
    """A planned move's record has no explanation until read: its history row takes the reason
    passed with it, and a record with an explanation still gives its own."""
    from service.longterm.history import HistorySink

    sink = HistorySink.__new__(HistorySink)  # the caller side only: no writer thread, no files
    sink._decisions, sink._max_decisions = [], 10
    sink._lock, sink._closed = threading.Lock(), False

    class _Q:
        woken = 0

        def put_nowait(self, _: object) -> None:
            self.woken += 1

    q = _Q()
    sink._queue = q  # type: ignore[assignment]
    log = DecisionLog(10)
    lazy = log.add_lazy(
        1, "shedding", lambda: explain("overloaded"), bundle="b1", source="s", destination="d"
    )
    eager = log.add(2, "manual", explain("manual_unload"), bundle="b2", source="s", destination="d")
    sink.append_decisions([(lazy, "overloaded"), (eager, None)])
    assert [r[5] for r in sink._decisions] == ["overloaded", "manual_unload"]
    assert q.woken == 1  # woken once for the batch
    sink.append_decisions([(lazy, "overloaded")] * 3)
    assert q.woken == 1 and len(sink._decisions) == 5
