"""make test's order over its xdist workers (tests/scheduling.py): long units first, modules that share
a costly set-up together, and no name in its tables that is not a test module any more."""

from __future__ import annotations

from pathlib import Path

from tests import scheduling as S

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_the_tables_name_exists() -> None:
    # A renamed module would silently leave its group (a second Spark JVM or demo) or the long-first list.
    named = set(S._GROUPS) | {s for s in S.LONGEST_FIRST if s.endswith(".py")}
    assert [p for p in sorted(named) if not (ROOT / p).is_file()] == []
    assert (ROOT / S.PULSAR).is_dir()
    assert set(S._GROUPS.values()) <= set(S.LONGEST_FIRST)


def test_long_units_go_first_and_a_group_stays_together() -> None:
    paths = [
        "tests/unit/test_a.py",
        "tests/e2e/test_api.py",
        "tests/unit/test_b.py",
        "tests/unit/test_b.py",
        "tests/pulsar/test_pulsar_mode.py",
        "tests/integration/test_longterm_spark.py",
        "tests/e2e/test_serve.py",
        "tests/integration/test_spark_standalone.py",
        "tests/pulsar/test_rolling_drain.py",
        "tests/integration/test_zk_outage.py",
    ]
    order = [paths[i] for i in S.xdist_order(paths)]
    assert order == [
        # the Spark session's modules, in their collected order
        "tests/integration/test_longterm_spark.py",
        "tests/integration/test_spark_standalone.py",
        "tests/pulsar/test_pulsar_mode.py",
        "tests/pulsar/test_rolling_drain.py",
        "tests/e2e/test_api.py",
        "tests/e2e/test_serve.py",
        # the rest most tests first, as xdist itself would, the pure tier's last
        "tests/integration/test_zk_outage.py",
        "tests/unit/test_b.py",
        "tests/unit/test_b.py",
        "tests/unit/test_a.py",
    ]
    assert S.scope_of("tests/pulsar/test_rolling_drain.py") == S.scope_of("tests/pulsar/test_pulsar_mode.py")
    assert S.scope_of("tests/unit/test_a.py") == "tests/unit/test_a.py"
