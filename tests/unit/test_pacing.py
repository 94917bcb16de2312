"""The disruption budget (``balancer/pacing.py``): which of a plan's moves go now, and why the others wait."""

from __future__ import annotations

import pytest

from balancer.config import LoadBalancerConfig
from balancer.pacing import BrokerHistory, MoveInFlight, PacingLimits, QueuedMove, pace

A, B, C, D, N = "a:8080", "b:8080", "c:8080", "d:8080", "new:8080"
NO_CAPS = PacingLimits(per_broker=0, cluster=0, brokers_per_cycle=0, cooldown_ms=0, served_timeout_ms=0)


def q(
    i: int, source: str | None = A, dest: str | None = N, kind: str = "shedding", plan: int = 1
) -> QueuedMove:
    return QueuedMove(f"ns/b{i}", source, dest, kind, plan)


def fly(
    i: int, source: str | None = A, since: int = 0, kind: str = "shedding", plan: int = 1
) -> MoveInFlight:
    return MoveInFlight(f"ns/b{i}", source, N, kind, plan, since)


def limits(**kw: int) -> PacingLimits:
    base = {
        "per_broker": 1,
        "cluster": 3,
        "brokers_per_cycle": 3,
        "cooldown_ms": 0,
        "served_timeout_ms": 30_000,
    }
    return PacingLimits(**{**base, **kw})


def reasons(sched: object) -> dict[str, str]:
    return {m.bundle: why.reason for m, why in sched.waiting}  # type: ignore[attr-defined]


def test_one_unload_in_flight_per_source_the_next_only_once_the_previous_is_served() -> None:
    plan = [q(1), q(2), q(3), q(4)]  # four from one broker: today they went in the same second
    first = pace(plan, [], {}, 1_000, limits())
    assert [m.bundle for m in first.release] == ["ns/b1"]
    assert set(reasons(first).values()) == {"source_busy"}
    why = dict((m.bundle, w) for m, w in first.waiting)["ns/b2"]
    assert "ns/b1" in why.message and why.numbers["waitingFor"] == "ns/b1"
    # b1 written, not yet served: still nothing more from a
    assert pace(plan[1:], [fly(1, since=1_000)], {}, 2_000, limits()).release == []
    # b1 served (no longer in flight): b2 goes, alone
    assert [m.bundle for m in pace(plan[1:], [], {}, 3_000, limits()).release] == ["ns/b2"]


def test_k_per_source_and_the_cluster_cap() -> None:
    plan = [q(1, A), q(2, A), q(3, A), q(4, B), q(5, C), q(6, D)]
    got = pace(plan, [], {}, 0, limits(per_broker=2, cluster=4, brokers_per_cycle=0))
    assert [m.bundle for m in got.release] == ["ns/b1", "ns/b2", "ns/b4", "ns/b5"]
    assert reasons(got) == {"ns/b3": "source_busy", "ns/b6": "cluster_busy"}
    # what is in flight counts against the cluster cap too
    got = pace(
        plan[3:],
        [fly(1, A), fly(2, A), fly(7, D)],
        {},
        0,
        limits(per_broker=2, cluster=4, brokers_per_cycle=0),
    )
    assert [m.bundle for m in got.release] == ["ns/b4"] and reasons(got)["ns/b5"] == "cluster_busy"


def test_a_move_unserved_past_the_timeout_no_longer_holds_its_slot() -> None:
    plan = [q(2)]
    held = pace(plan, [fly(1, since=0)], {}, 29_999, limits(served_timeout_ms=30_000))
    assert held.release == [] and len(held.holding) == 1
    freed = pace(plan, [fly(1, since=0)], {}, 30_000, limits(served_timeout_ms=30_000))
    assert [m.bundle for m in freed.release] == ["ns/b2"] and freed.holding == []


def test_a_cycle_sheds_at_most_n_brokers_the_others_wait_for_the_next_cycle() -> None:
    plan = [q(1, A), q(2, B), q(3, C), q(4, D), q(5, A)]
    got = pace(plan, [], {}, 0, limits(per_broker=0, cluster=0, brokers_per_cycle=3))
    assert [m.bundle for m in got.release] == ["ns/b1", "ns/b2", "ns/b3", "ns/b5"]
    assert reasons(got) == {"ns/b4": "broker_cap"}
    # brokers already shedding from this plan (in flight) are counted first
    got = pace(
        [q(3, C), q(4, D)],
        [fly(1, A), fly(2, B)],
        {},
        0,
        limits(per_broker=0, cluster=0, brokers_per_cycle=2),
    )
    assert got.release == [] and reasons(got) == {"ns/b3": "broker_cap", "ns/b4": "broker_cap"}
    # a later plan is another cycle: its own count
    got = pace(
        [q(3, C, plan=2)], [fly(1, A), fly(2, B)], {}, 0, limits(per_broker=0, cluster=0, brokers_per_cycle=2)
    )
    assert [m.bundle for m in got.release] == ["ns/b3"]


def test_cooldown_counts_from_the_last_unload_by_the_clock() -> None:
    lim = limits(cooldown_ms=180_000)
    history = {A: BrokerHistory(last_unload_ms=100_000, plan=1)}
    move = QueuedMove("ns/b9", A, N, "shedding", plan=2)
    got = pace([move], [], history, 200_000, lim)  # 100 s after the unload
    assert got.release == [] and reasons(got) == {"ns/b9": "cooldown"}
    why = got.waiting[0][1]
    assert why.numbers["elapsedMs"] == 100_000 and why.numbers["delayMs"] == 180_000
    assert pace([move], [], history, 279_999, lim).release == []
    assert pace([move], [], history, 280_000, lim).release == [move]  # 180 s after: shed again
    # the plan that unloaded it (or carries its shedding on) goes on without a pause
    same = QueuedMove("ns/b9", A, N, "shedding", plan=1)
    assert pace([same], [], history, 150_000, lim).release == [same]
    # another broker is not cooling down
    other = QueuedMove("ns/b8", B, N, "shedding", plan=2)
    assert pace([other], [], history, 150_000, lim).release == [other]


def test_a_move_planned_inside_the_cooldown_goes_once_it_has_run_out() -> None:
    """The join's last move on real Extensible brokers (fifth session): planned 178 s after its
    source's last unload, it waited for a newer plan that never came, judged on the plan's time."""
    lim = limits(cooldown_ms=180_000)
    history = {A: BrokerHistory(last_unload_ms=0, plan=1)}
    planned_at = 178_000
    move = QueuedMove("ns/b9", A, N, "shedding", plan=2)
    assert reasons(pace([move], [], history, planned_at, lim)) == {"ns/b9": "cooldown"}
    later = [pace([move], [], history, planned_at + k * 60_000, lim).release for k in (1, 2, 3)]
    assert later == [[move], [move], [move]]


def test_operator_and_drain_moves_go_first_and_skip_the_cycle_rules() -> None:
    history = {A: BrokerHistory(last_unload_ms=0, plan=1)}
    plan = [q(1, A, plan=2), q(2, A, kind="drain", plan=3), q(3, A, kind="manual", plan=4)]
    got = pace(plan, [], history, 1_000, limits(cooldown_ms=180_000))
    assert [m.bundle for m in got.release] == ["ns/b3"]  # manual first; still one in flight per source
    assert reasons(got) == {"ns/b1": "cooldown", "ns/b2": "source_busy"}


def test_a_bundle_in_flight_is_not_released_twice_and_no_caps_releases_everything() -> None:
    got = pace([q(1)], [fly(1, B)], {}, 0, NO_CAPS)
    assert got.release == [] and reasons(got) == {"ns/b1": "bundle_in_flight"}
    plan = [q(i, A) for i in range(10)]
    assert pace(plan, [fly(20 + i, A) for i in range(5)], {}, 0, NO_CAPS).release == plan


def test_limits_come_from_the_pulsar_style_keys_with_their_defaults() -> None:
    config = LoadBalancerConfig()
    assert PacingLimits.of(config) == PacingLimits(
        1, 3, 3, 180_000, 30_000, per_destination=1, spacing_ms=15_000
    )
    got = PacingLimits.of(
        config.with_updates(
            {
                "loadBalancerMaxNumberOfBrokerSheddingPerCycle": 5,
                "loadBalanceSheddingDelayInSeconds": 0,
                "loadBalancerMaxUnloadsInFlightPerBroker": 2,
                "loadBalancerMaxUnloadsInFlight": 0,
                "loadBalancerUnloadServedTimeoutSeconds": 2.5,
                "loadBalancerMaxUnloadsInFlightPerDestination": 0,
                "loadBalancerUnloadSpacingSeconds": 0.5,
            }
        )
    )
    assert got == PacingLimits(2, 0, 5, 0, 2_500, per_destination=0, spacing_ms=500)
    assert "loadBalancerMaxUnloadsInFlightPerBroker" in LoadBalancerConfig.dynamic_keys()


def test_the_dry_run_command_prints_when_each_move_would_go(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.commands import bundle_verbs
    from service.commands.cli import main

    answer = {
        "moves": [
            {"bundle": "ns/b1", "source": A, "destination": N, "explanation": {"reason": "overloaded"}},
            {"bundle": "ns/b2", "source": A, "destination": N, "explanation": {"reason": "overloaded"}},
        ],
        "skipped": [],
        "shedding": None,
        "changed": False,
        "schedule": {
            "now": ["ns/b1"],
            "waiting": [
                {"bundle": "ns/b2", "reason": "source_busy", "message": "waiting until ns/b1 is served"}
            ],
            "inFlight": [],
            "queuedOtherKinds": 0,
        },
    }
    monkeypatch.setattr(bundle_verbs, "call", lambda *a, **kw: answer)
    assert main(["dry-run", "--url", "http://127.0.0.1:1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("ns/b1" in line and line.rstrip().endswith("now") for line in lines), lines
    # the code in the table; the whole reason once beneath it (tests/unit/test_cli_dry_run_width.py)
    assert any("ns/b2" in line and line.rstrip().endswith("waits: source_busy") for line in lines), lines
    assert any("source_busy" in line and "waiting until ns/b1 is served" in line for line in lines), lines


def test_a_joining_broker_receives_one_bundle_at_a_time_from_several_sources() -> None:
    # Three sources, one destination (a broker that just joined): on real brokers the three at once
    # cost a 6.2 s publish gap. With the destination cap each goes once the previous is served there.
    plan = [q(1, A), q(2, B), q(3, C)]
    capped = limits(per_destination=1)
    first = pace(plan, [], {}, 0, capped)
    assert [m.bundle for m in first.release] == ["ns/b1"]
    assert reasons(first) == {"ns/b2": "destination_busy", "ns/b3": "destination_busy"}
    why = dict((m.bundle, w) for m, w in first.waiting)["ns/b2"]
    assert why.numbers["waitingFor"] == "ns/b1" and N in why.message
    assert pace(plan[1:], [fly(1, A, since=0)], {}, 1_000, capped).release == []
    assert [m.bundle for m in pace(plan[1:], [], {}, 2_000, capped).release] == ["ns/b2"]
    # Other destinations are not held up, a move without a destination counts for none, and the
    # cap off releases all three as before.
    mixed = [q(1, A), q(2, B, dest=None), q(3, C, dest=D)]
    to_d = MoveInFlight("ns/b9", "e:8080", D, "shedding", 1, 0)
    assert [m.bundle for m in pace(mixed, [to_d], {}, 0, capped).release] == ["ns/b1", "ns/b2"]
    assert len(pace(plan, [], {}, 0, limits()).release) == 3


def test_spacing_between_two_unloads_at_one_broker_operators_go_at_once() -> None:
    spaced = limits(per_broker=0, cluster=0, spacing_ms=15_000)
    # Two moves from one source: the first goes, the second waits; a move between two other
    # brokers goes too (spacing is per broker, so a large cluster still moves in parallel).
    plan = [q(1, A, C), q(2, A, D), q(3, B, N)]
    got = pace(plan, [], {}, 100_000, spaced)
    assert got.release == [plan[0], plan[2]] and reasons(got) == {"ns/b2": "spacing"}
    why = got.waiting[0][1]
    assert "loadBalancerUnloadSpacingSeconds" in why.message and why.numbers["broker"] == A
    # 14.9 s after A's last unload started it still waits; at 15 s it goes.
    assert reasons(pace(plan[1:2], [], {}, 114_900, spaced, {A: 100_000})) == {"ns/b2": "spacing"}
    assert pace(plan[1:2], [], {}, 115_000, spaced, {A: 100_000}).release == plan[1:2]
    # The destination's end counts too: D received a bundle 1 s ago.
    got = pace([q(4, B, D)], [], {}, 101_000, spaced, {D: 100_000})
    assert reasons(got) == {"ns/b4": "spacing"} and got.waiting[0][1].numbers["broker"] == D
    # Drain moves are spaced; an operator's unload is not, but the next one at its broker waits for it.
    assert reasons(pace([q(5, A, C, kind="drain")], [], {}, 101_000, spaced, {A: 100_000})) == {
        "ns/b5": "spacing"
    }
    manual, after = q(6, A, C, kind="manual"), q(7, A, D)
    got = pace([after, manual], [], {}, 101_000, spaced, {A: 100_000})
    assert got.release == [manual] and reasons(got) == {"ns/b7": "spacing"}
    # 0 turns it off.
    assert pace(plan, [], {}, 100_000, limits(per_broker=0, cluster=0), {A: 99_999}).release == plan
