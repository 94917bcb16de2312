"""The least-move planner (issue 31) on cases whose cheapest plan is known by hand."""

from __future__ import annotations

from balancer.shedding.least_move import Plan, least_move_plan


def _movable(ws: list[float], owner: str) -> tuple[list[float], list[str]]:
    return sorted(ws), [f"{owner}/ns/{i}" for i in range(len(ws))]


def _a_over_b(used_b: float = 40.0, **kw: object) -> Plan | None:
    """a at 60 with bundles 2, 9, 10 and 30 beside b at 40 (one capacity each), aiming at 1.15."""
    return least_move_plan(
        levels={"a": 60.0, "b": 40.0},
        used={"a": 60.0, "b": used_b},
        capacity={"a": 1.0, "b": 1.0},
        movable={"a": _movable([2.0, 9.0, 10.0, 30.0], "a"), "b": _movable([5.0], "b")},
        participants=["a", "b"],
        others=[],
        aim=1.15,
        **kw,  # type: ignore[arg-type]
    )


def test_the_cheapest_subset_that_reaches_the_aim_moves() -> None:
    # a at 60 and b at 40 (one capacity): max/min <= 1.15 needs 6.74 <= x <= 13.26 moved a -> b.
    # The fill would move the largest bundle that fits (10); the least is the 9 alone.
    plan = _a_over_b()
    assert plan is not None
    assert [(s, d, w) for s, _, d, w in plan.moves] == [("a", "b", 9.0)]
    assert plan.levels == {"a": 51.0, "b": 49.0}
    assert max(plan.levels.values()) / min(plan.levels.values()) <= 1.15


def test_a_bundle_placement_would_not_send_there_is_not_chosen() -> None:
    # As above, but placement's filters keep the 9 off b (another bundle of its namespace is there):
    # the next cheapest that reaches the aim is the 10.
    plan = _a_over_b(allowed=lambda bundle, broker: not (bundle == "a/ns/1" and broker == "b"))
    assert plan is not None
    assert [(s, b, d, w) for s, b, d, w in plan.moves] == [("a", "a/ns/2", "b", 10.0)]


def test_no_move_goes_uphill_by_what_the_brokers_report() -> None:
    # By traffic a is far above b, but b reports more utilisation (another process's CPU): the
    # uphill guard leaves no pair to move along, so there is no plan and the fill's stands.
    plan = _a_over_b(used_b=70.0)
    assert plan is None


def test_the_fills_own_move_stays_an_edge_whatever_the_margin() -> None:
    # A gradient margin of 5 leaves only the 2 movable (20 - 5 >= 2 * 2): alone it cannot reach
    # the aim, so there is no plan. The fill chose the 10 to b; its move stays an edge, and it is
    # then the least that reaches the aim (2 + 10 reaches it too, for more).
    assert _a_over_b(min_gradient=5.0) is None
    plan = _a_over_b(min_gradient=5.0, must_consider={"a/ns/2": "b"})
    assert plan is not None
    assert [(s, b, d, w) for s, b, d, w in plan.moves] == [("a", "a/ns/2", "b", 10.0)]
