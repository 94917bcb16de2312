"""The move queue's bookkeeping (``service/leader/move_queue.py``): one ``submit(moves, kind)`` for
every kind, re-plans replacing what is still queued, the dry run's preview, the cooldown carried on."""

from __future__ import annotations

import pytest

from balancer.errors import InvalidInput
from balancer.explain import explain
from balancer.pacing import PacingLimits
from service.leader.move_queue import MoveQueue, MoveRequest

A, B, N = "a:8080", "b:8080", "new:8080"
LIMITS = PacingLimits(
    per_broker=1, cluster=3, brokers_per_cycle=3, cooldown_ms=180_000, served_timeout_ms=30_000
)


def mv(i: int, source: str = A, dest: str = N) -> MoveRequest:
    return MoveRequest(f"ns/b{i}", source, dest, explain("overloaded", "", subject=f"ns/b{i}"))


def test_one_entry_point_for_every_kind_and_what_a_submission_replaces() -> None:
    clock = iter(range(1_000, 10_000, 10))
    ended: list[tuple[str, str]] = []
    q = MoveQueue(on_ended=lambda e, state, _why: ended.append((e.bundle, state)), clock=lambda: next(clock))
    q.submit([mv(1), mv(2)], "shedding")
    q.submit([mv(3)], "drain")
    q.submit([mv(4)], "shedding")  # the next cycle's plan replaces the last one's queued moves
    assert [(e.bundle, e.kind) for e in q.queued()] == [("ns/b3", "drain"), ("ns/b4", "shedding")]
    assert ended == [("ns/b1", "replaced"), ("ns/b2", "replaced")]
    q.submit([mv(3, dest=B)], "manual")  # the same bundle again: the newer move replaces the queued one
    assert [(e.bundle, e.kind, e.destination) for e in q.queued()][-1] == ("ns/b3", "manual", B)
    assert ("ns/b3", "replaced") in ended
    with pytest.raises(InvalidInput, match="kind"):
        q.submit([mv(5)], "rebalance")
    assert q.drop("leadership lost") == 2 and len(q) == 0


def test_the_dry_run_preview_changes_nothing_and_a_replan_carries_a_shedding_on() -> None:
    q = MoveQueue(clock=lambda: 1_000)
    plan = q.submit([mv(1), mv(2), mv(3)], "shedding")
    [e] = q.take_many(["ns/b1"], 1_000)
    q.released(e, 1_000)  # a's first move in flight; a's history names this plan
    sched = q.preview([mv(2), mv(3)], 1_500, LIMITS)
    # a re-plan while a's shedding is still queued carries it on: no cooldown, only the busy source
    assert sched.release == [] and {w.reason for _, w in sched.waiting} == {"source_busy"}
    assert [x.bundle for x in q.queued()] == ["ns/b2", "ns/b3"]  # nothing changed
    q.served("ns/b1", 2_000)
    q.submit([], "shedding")  # a cycle that plans nothing leaves the plan to finish
    assert [x.bundle for x in q.queued()] == ["ns/b2", "ns/b3"]
    for e in q.take_many(["ns/b2", "ns/b3"], 2_000):
        q.released(e, 2_000)
        q.served(e.bundle, 2_000)  # a's shedding is over: nothing queued or in flight for it
    later = q.preview([mv(4)], 3_000, LIMITS)  # a plan 1 s after its last unload
    assert [w.reason for _, w in later.waiting] == ["cooldown"]
    assert q.history[A].last_unload_ms == 2_000 and q.history[A].plan == plan
    again = q.preview([mv(4)], 182_000, LIMITS)
    assert [m.bundle for m in again.release] == ["ns/b4"]


def test_nothing_queued_is_not_paced_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan written whole (no disruption budget) leaves tens of thousands of moves in flight and
    none queued: the tick's schedule releases nothing without pacing them all again (issue 49, item 13:
    0.1-0.15 s a second at 21,000 in flight). With a move queued, it is paced as before."""
    import service.leader.move_queue as mq

    q = MoveQueue(clock=lambda: 1_000)
    q.submit([mv(i, source=f"s{i}:8080") for i in range(50)], "shedding")
    for e in q.take_many([f"ns/b{i}" for i in range(50)], 1_000):
        q.released(e, 1_000)
    calls: list[int] = []
    real = mq.pace
    monkeypatch.setattr(mq, "pace", lambda queue, *a: calls.append(len(queue)) or real(queue, *a))
    sched = q.schedule(2_000, LIMITS)
    assert sched.release == [] and sched.waiting == [] and calls == []
    assert q.waiting() == {} and len(q.in_flight()) == 50
    q.submit([mv(99)], "shedding")
    sched = q.schedule(2_000, LIMITS)
    assert calls == [1] and {w.reason for _, w in sched.waiting} == {"cluster_busy"}
    assert set(q.waiting()) == {"ns/b99"}


def test_a_move_planned_inside_its_sources_cooldown_goes_once_the_cooldown_has_run_out() -> None:
    """On real Extensible brokers (fifth session) the join's plan came 178 s after the busiest
    broker's last unload; its move from that broker was judged on the plan's time, which never
    moves, and waited 3-4 cycles until a later plan replaced it (the join ended at max/min 2.16)."""
    now = [0]
    q = MoveQueue(clock=lambda: now[0])
    q.submit([mv(1)], "shedding")
    [e] = q.take_many(["ns/b1"], 0)
    q.released(e, 0)
    q.served("ns/b1", 2_000)  # a's last unload
    now[0] = 180_000  # 178 s later a new plan sheds a again
    q.submit([mv(2)], "shedding")
    assert [w.reason for _, w in q.schedule(now[0], LIMITS).waiting] == ["cooldown"]
    q.submit([], "shedding")  # the next cycles plan nothing: the plan stands
    assert [m.bundle for m in q.schedule(182_000, LIMITS).release] == ["ns/b2"]


def test_a_replan_over_a_large_queue_looks_at_each_move_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-plan's work grows with the plans' sizes, not their product: a scan of the new plan per
    queued move held a 21,149-move re-plan at 1,000 x 100,000 for 21 s under the queue's lock (an
    operator's unload waited 17.5 s). Counted in reads of a move's source, not in seconds."""
    import service.leader.move_queue as mq

    reads = [0]

    class Counted(mq.Entry):
        def __getattribute__(self, name: str) -> object:
            if name == "source":
                reads[0] += 1
            return object.__getattribute__(self, name)

    monkeypatch.setattr(mq, "Entry", Counted)
    n, sources = 400, 8
    q = MoveQueue(clock=lambda: 1_000)
    # Source by source, as a plan lists them: the last source's moves are at the end of the plan.
    q.submit([mv(i, source=f"s{i * sources // n}:8080") for i in range(n)], "shedding")
    reads[0] = 0
    q.submit([mv(n + i, source=f"s{i * sources // n}:8080") for i in range(n)], "shedding")
    assert len(q.queued()) == n
    assert reads[0] <= 10 * n, f"{reads[0]} reads of a move's source to replace {n} moves with {n}"
