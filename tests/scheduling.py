"""How ``make test`` spreads the modules over its xdist workers (``--dist loadfile``, scripts/run-tests.sh).

pytest-xdist alone hands modules out by number of tests, most first, so a long module of one test (the
Spark standalone cluster's, 4 minutes) started last and the other worker sat idle for its tail. Here the
modules known to be long go first, longest first (the longest-processing-time rule), and the rest
follow most tests first as before, the pure tier's last. Modules that share a costly per-process
set-up are one unit of work, so one worker pays for it once: the local SparkSession, the e2e tier's
session-wide demos, and the real Pulsar clusters (which also never start on both workers at once:
tests/pulsar/conftest.py's lock made one worker wait for the other's cluster).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

# Modules that share a session-scoped fixture (tests/integration/conftest.py's ``spark``, one JVM per
# process; tests/e2e/conftest.py's ``demo`` and ``scratch_demo``, each a ZooKeeper, a leader and
# simulated brokers, ``demo`` waited on until balanced) or a machine-wide lock (tests/pulsar).
SPARK_SESSION = "spark-session"
E2E_DEMO = "e2e-demo"
_GROUPS = {
    "tests/integration/test_spark_standalone.py": SPARK_SESSION,
    "tests/integration/test_longterm_spark.py": SPARK_SESSION,
    "tests/integration/test_replay_spark.py": SPARK_SESSION,
    "tests/e2e/test_api.py": E2E_DEMO,
    "tests/e2e/test_api_camel_case.py": E2E_DEMO,
    "tests/e2e/test_api_schemathesis.py": E2E_DEMO,
    "tests/e2e/test_api_stateful.py": E2E_DEMO,
    "tests/e2e/test_cli_client.py": E2E_DEMO,
    "tests/e2e/test_cli_operator_pass.py": E2E_DEMO,
    "tests/e2e/test_cli_pulsar_admin.py": E2E_DEMO,
    "tests/e2e/test_demo_balances.py": E2E_DEMO,
    "tests/e2e/test_follower.py": E2E_DEMO,
    "tests/e2e/test_serve.py": E2E_DEMO,
}
PULSAR = "tests/pulsar"

# Longest first, by a fresh clone's `make test` on the shared 2-core machine (2026-11-29, 26.7 min,
# load 7-12; --durations=25): seconds of the slowest tests' calls and set-ups in each, a lower bound.
LONGEST_FIRST = (
    SPARK_SESSION,  # >= 373: standalone cluster 268, longterm 105
    PULSAR,  # >= 301: Modular 143, Extensible 102, rolling drain 56
    "tests/integration/test_spark_quiet.py",  # 197: two `loadmgr` runs with their own JVM
    "tests/integration/test_ensemble.py",  # 135
    E2E_DEMO,  # >= 79: the stateful API fuzzer, then a dozen modules on the same two demos
    "tests/integration/test_watch_view.py",  # 90
    "tests/unit/test_planner_guard.py",  # 83
    "tests/unit/test_sim_claims.py",  # 78
    "tests/unit/test_cli.py",  # 56
    "tests/unit/test_balanced_decisions.py",  # 45
    "tests/e2e/test_first_ten_minutes.py",  # 40
    "tests/e2e/test_planner_live.py",  # 34
    "tests/e2e/test_dry_run_moves.py",  # 34
    "tests/e2e/test_ctrl_c.py",
    "tests/deploy/test_prometheus.py",
)


def scope_of(path: str) -> str:
    """The unit of work a test module (path relative to the checkout, with /) belongs to."""
    if path.startswith(PULSAR + "/"):
        return PULSAR
    return _GROUPS.get(path, path)


def xdist_order(paths: Sequence[str]) -> list[int]:
    """Indices of the tests (given by module path, in collection order) in the order to hand them out:
    the long units first, longest first, then the other modules that start processes or servers, then
    the pure tier's, each most tests first; each unit's tests together and in their collected order."""
    scopes = [scope_of(p) for p in paths]
    counts = Counter(scopes)
    first = {s: i for i, s in reversed(list(enumerate(scopes)))}

    def key(i: int) -> tuple[int, bool, int, int]:
        s = scopes[i]
        rank = LONGEST_FIRST.index(s) if s in LONGEST_FIRST else len(LONGEST_FIRST)
        # Of the others, the pure tier's modules (milliseconds a test) last: they fill the workers' tail,
        # where a one-test integration module (a ZooKeeper session or a process, seconds) would stretch it.
        return rank, s.startswith("tests/unit/"), -counts[s], first[s]

    return sorted(range(len(paths)), key=key)  # stable: a unit's tests keep their order


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's loadfile scheduling over :func:`scope_of`'s units, in the workers' collection order
    (which :func:`xdist_order` set) rather than re-sorted by number of tests."""
    from xdist.scheduler import LoadFileScheduling

    class GroupedLoadFile(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no types
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid.split("::", 1)[0])

    # Read only by the scheduler's first schedule(): keep the order the workers collected in.
    config.option.loadscopereorder = False
    return GroupedLoadFile(config, log)
