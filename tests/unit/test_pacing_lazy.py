"""A waiting move's explanation is built only when asked for (``balancer.pacing.Schedule``): after a
whole plan tens of thousands of moves wait, and a tick paces them all every second. What is asked
for must be what an eager build gave; the reasons come without building anything."""

from __future__ import annotations

import pytest

import balancer.pacing as pacing
from balancer.pacing import BrokerHistory, MoveInFlight, PacingLimits, QueuedMove, Schedule, pace

NOW = 1_000_000
LIMITS = PacingLimits(
    per_broker=1,
    cluster=3,
    brokers_per_cycle=2,
    cooldown_ms=180_000,
    served_timeout_ms=30_000,
    per_destination=1,
    spacing_ms=15_000,
)


def _schedule() -> Schedule:
    # Drains go before shedding (balancer.pacing.KINDS), so q5 and q2 are released, in that order.
    queue = [
        QueuedMove("ns/busy", "a", "x", "shedding", 1),  # its bundle is in flight
        QueuedMove("ns/q1", "b", "y", "shedding", 1),  # y receives q5 already
        QueuedMove("ns/q2", "b", "z", "shedding", 1),  # released
        QueuedMove("ns/q3", "c", "w", "shedding", 1),  # a third source: the plan's cap is 2 (a, b)
        QueuedMove("ns/q4", "d", "v", "shedding", 2),  # d unloaded 10 s ago, for another plan
        QueuedMove("ns/q5", "e", "y", "drain", 3),  # released
        QueuedMove("ns/q6", "f", "u", "drain", 3),  # f took part in an unload 5 s ago
        QueuedMove("ns/q7", "b", "t", "shedding", 1),  # b has q2 in flight now
        QueuedMove("ns/q8", None, None, "shedding", 1),  # 3 in flight: the cluster's cap
    ]
    flights = [MoveInFlight("ns/busy", "a", "x", "shedding", 1, NOW - 2_000)]
    history = {"d": BrokerHistory(NOW - 10_000, 1)}
    return pace(queue, flights, history, NOW, LIMITS, {"f": NOW - 5_000})


def test_nothing_is_explained_until_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = pacing.explain
    monkeypatch.setattr(
        pacing, "explain", lambda reason, *a, **k: built.append(reason) or real(reason, *a, **k)
    )
    sched = _schedule()
    reasons = [r for _, r in sched.reasons()]
    assert built == []
    assert sched.explain_waiting(2).reason == reasons[2] and built == [reasons[2]]
    assert [w.reason for _, w in sched.waiting] == reasons
    assert len(built) == 1 + len(reasons)
    sched.waiting  # noqa: B018 - built once, kept
    assert len(built) == 1 + len(reasons)


def test_every_rule_explained_as_decided() -> None:
    sched = _schedule()
    assert [m.bundle for m in sched.release] == ["ns/q5", "ns/q2"]
    waits = {m.bundle: w for m, w in sched.waiting}
    assert {b: w.reason for b, w in waits.items()} == {
        "ns/busy": "bundle_in_flight",
        "ns/q1": "destination_busy",
        "ns/q3": "broker_cap",
        "ns/q4": "cooldown",
        "ns/q6": "spacing",
        "ns/q7": "source_busy",
        "ns/q8": "cluster_busy",
    }
    assert waits["ns/q7"].numbers == {"source": "b", "inFlight": 1, "maxPerBroker": 1, "waitingFor": "ns/q2"}
    assert "(released just now)" in waits["ns/q7"].message
    assert waits["ns/q3"].message.startswith("this cycle already sheds 2 broker(s) (a, b)")
    assert (
        waits["ns/q4"].numbers["elapsedMs"] == 10_000
        and "unloaded a bundle 10 s ago" in waits["ns/q4"].message
    )
    assert waits["ns/q1"].numbers["waitingFor"] == "ns/q5"
    assert waits["ns/q6"].numbers["sinceMs"] == 5_000
    assert waits["ns/q8"].numbers == {"inFlight": 3, "maxInFlight": 3}
    for i, (m, _reason) in enumerate(sched.reasons()):
        assert sched.explain_waiting(i) == waits[m.bundle] and waits[m.bundle].subject == m.bundle


def test_a_schedule_given_its_waiting_list_keeps_it() -> None:
    why = pacing.explain("cluster_busy", "x", subject="ns/q")
    sched = Schedule(waiting=[(QueuedMove("ns/q", "a", "b"), why)])
    assert sched.reasons() == [(QueuedMove("ns/q", "a", "b"), "cluster_busy")]
    assert sched.explain_waiting(0) is why
    assert Schedule().waiting == [] and Schedule().reasons() == []
