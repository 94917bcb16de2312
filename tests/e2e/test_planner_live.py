"""BalancedShedder's least-move planner (issue 31), on by default, on a live leader: the demo's agents
as brokers on a real ZooKeeper, the operator's `loadmgr config` verbs over REST (PUT /config,
persisted in ZooKeeper, applied by the watch). Each move says which plan it came from; a value the
leader cannot take is refused naming the key, and nothing is written; turning it off is one command."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.commands.cli import main
from service.demo.cluster import Demo, DemoOptions
from tests.e2e.conftest import _wait_for, running_demo

pytestmark = pytest.mark.e2e

KEY = "loadBalancerBalancedShedderPlanner"


@pytest.fixture(scope="module")
def idle_leader() -> Iterator[Demo]:
    # Shedding every hour: nothing moves until the operator's change below shortens the interval,
    # so every plan this leader makes is made with the planner on.
    yield from running_demo(
        DemoOptions(brokers=3, bundles=12, port=0, shed_interval_s=3600.0, publish_state=False)
    )


def test_the_planner_plans_live_by_default_each_move_says_so_and_config_set_turns_it_off(
    idle_leader: Demo, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = idle_leader
    url = ["--url", demo.url]
    first = demo.broker_ids[0]
    assert demo.service.config.loadBalancerBalancedShedderPlanner == "leastMove"  # the default
    assert not demo.service.decisions(limit=100, kind="shedding")
    # A value that is not one of the two is refused by name, and the key stays as it was.
    assert main(["config", "set", f"{KEY}=exact", *url]) != 0
    err = capsys.readouterr()
    assert KEY in err.err + err.out and "exact" in err.err + err.out
    assert demo.service.config.loadBalancerBalancedShedderPlanner == "leastMove"

    assert main(["config", "set", "loadBalancerSheddingIntervalMinutes=0.05", *url]) == 0

    def moves() -> list[object]:
        got = [d for d in demo.service.decisions(limit=500, kind="shedding") if d.source == first]
        return got if len(got) >= 2 else []

    made = _wait_for(moves, timeout_s=120, interval_s=0.5)
    assert made, demo.out.getvalue()[-3000:]  # type: ignore[attr-defined]
    # Each move's explanation names the plan it came from: the least-move program's, or the fill's
    # where the program found nothing cheaper.
    planners = {d.explanation["numbers"].get("planner") for d in made}  # type: ignore[attr-defined]
    assert planners and planners <= {"least_move", "fill"}, planners
    # And the leader goes on to balance the skewed start with it on.
    balanced = _wait_for(lambda: all(n > 0 for n in demo.ownership_counts().values()), timeout_s=120)
    assert balanced, demo.ownership_counts()

    # Off, live: one command, persisted in ZooKeeper and shown by the leader.
    capsys.readouterr()
    assert main(["config", "set", f"{KEY}=fill", *url]) == 0
    assert main(["config", "show", "--json", *url]) == 0
    assert '"fill"' in capsys.readouterr().out
    assert demo.service.config.loadBalancerBalancedShedderPlanner == "fill"
