"""The driver side of the replay's extraction: Arrow rows from Spark grouped into recorded cycles.

No Spark here: the tables are what ``fetch`` hands the driver, built by hand in scrambled order (Spark
gives no order without a shuffle), so the grouping itself is what is checked.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from service.longterm.replay_extract import Fetched, assemble


def _brokers(rows: list[tuple[int, str, float]]) -> pa.Table:
    t, name, cpu = zip(*rows, strict=True)
    n = len(rows)
    return pa.table(
        {
            "time": pa.array(t, pa.int64()),
            "broker": pa.array(name, pa.string()),
            "cpu": pa.array(cpu, pa.float64()),
            "bw_in": pa.array([1.0] * n),
            "bw_out": pa.array([2.0] * n),
            "msg_rate_in": pa.array([10.0] * n),
            "msg_rate_out": pa.array([5.0] * n),
            "msg_throughput_in": pa.array([100.0] * n),
            "msg_throughput_out": pa.array([50.0] * n),
        }
    )


def _bundles(rows: list[tuple[int, str, str, float]]) -> pa.Table:
    t, name, owner, rate = zip(*rows, strict=True)
    return pa.table(
        {
            "time": pa.array(t, pa.int64()),
            "bundle": pa.array(name, pa.string()),
            "owner": pa.array(owner, pa.string()),
            "msg_rate_in": pa.array(rate, pa.float64()),
            "msg_rate_out": pa.array([1.0] * len(rows)),
            "msg_throughput_in": pa.array([2.0] * len(rows)),
            "msg_throughput_out": pa.array([3.0] * len(rows)),
        }
    )


FITS = [{"broker": "a", "msg_rate_per_cpu_point": 100.0, "msg_rate_intercept": -50.0}]


def test_rows_in_any_order_become_cycles_in_time_order() -> None:
    brokers = _brokers(
        [(300, "a", 30.0), (100, "b", 11.0), (200, "a", 20.0), (100, "a", 10.0), (300, "b", 31.0)]
    )
    bundles = _bundles(
        [
            (300, "x", "a", 3.0),
            (100, "y", "b", 1.5),
            (400, "x", "a", 9.0),  # no broker rows at 400: the cycle is dropped
            (100, "x", "a", 1.0),
            (200, "x", "a", 2.0),
            (300, "y", "b", 3.5),
        ]
    )
    got = assemble(Fetched(brokers, bundles, FITS, 0))
    assert [c.time_ms for c in got.cycles] == [100, 200, 300]
    assert got.bundle_rows == 5 and got.broker_rows == 5
    first = got.cycles[0]
    assert sorted(first.bundles) == ["x", "y"] and sorted(first.brokers) == ["a", "b"]
    assert first.bundles["y"].owner == "b" and first.bundles["y"].rate_in == 1.5
    assert first.bundles["x"].rate == pytest.approx(2.0)
    assert first.brokers["b"].cpu == 11.0 and first.brokers["a"].msg_rate == 15.0
    assert got.cycles[2].bundles["x"].rate_in == 3.0 and got.cycles[2].brokers["b"].cpu == 31.0
    assert list(got.cycles[1].brokers) == ["a"]
    # names are dictionary-encoded: one string object per distinct name across cycles
    assert got.cycles[0].bundles["x"].owner is got.cycles[2].bundles["x"].owner
    assert got.lines["a"].slope == 100.0 and got.lines["a"].intercept == -50.0


def test_empty_tables_give_no_cycles() -> None:
    empty_brokers = _brokers([(1, "a", 1.0)]).slice(0, 0)
    empty_bundles = _bundles([(1, "x", "a", 1.0)]).slice(0, 0)
    got = assemble(Fetched(empty_brokers, empty_bundles, [], 0))
    assert got.cycles == [] and got.bundle_rows == 0 and got.broker_rows == 0
    got = assemble(Fetched(_brokers([(1, "a", 1.0)]), empty_bundles, [], 0))
    assert got.cycles == [] and got.broker_rows == 1
