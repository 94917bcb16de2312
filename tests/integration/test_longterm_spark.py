"""The Spark long-term job on a real local Spark over history written by the real sink, checked against
the pure reference, and its merge into a real ZooKeeper."""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import socket
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from balancer.longterm import (
    BrokerSample,
    BundleLongTerm,
    BundleSample,
    capacity_by_broker,
    is_valid_bundle_sample,
    long_term_by_bundle,
)
from balancer.models import (
    BrokerData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
)
from service.longterm.compute import compute_capacity
from service.longterm.history import BROKER_SCHEMA, BUNDLE_SCHEMA, HistorySink, partition_of
from service.longterm.input import VALUES, CycleManifest
from service.longterm.job import (
    EXIT_BAD_ARGS,
    EXIT_EMPTY,
    EXIT_OK,
    EXIT_ZK,
    JobOptions,
    JobResult,
    add_arguments,
    execute,
    merge_into_zookeeper,
    run,
)

pyspark = pytest.importorskip("pyspark")

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T0 = 1_710_010_800_000  # 2024-03-09T19:00:00Z: the range crosses midnight, so two date partitions
STEP_MS = 60_000
CYCLES = 1300
END_MS = T0 + CYCLES * STEP_MS
DENSE = "t/ns/0x00000000_0x40000000"  # every cycle, past the 1000-sample cap
GAPPY = "t/ns/0x40000000_0x80000000"  # past the cap with missing cycles: ranked by a window
STALE = "t/ns/0x80000000_0xc0000000"  # gone after 600 cycles
SHORT = "t/ns/0xc0000000_0xffffffff"  # joins late: under the cap, so its window is the mean
NOISY = "t/ns2/0x00000000_0xffffffff"  # has NaN and negative samples


def _present(bundle: str, k: int) -> bool:
    if bundle == GAPPY:
        return k % 97 != 5
    if bundle == STALE:
        return k < 600
    if bundle == SHORT:
        return k >= 400
    return True


def _cycle(k: int, rng: random.Random) -> tuple[LoadData, dict[str, str]]:
    hour = (T0 + k * STEP_MS) // 3_600_000 % 24
    daily = 1.0 + 0.8 * math.sin(hour / 24 * 2 * math.pi)
    brokers: dict[str, dict[str, NamespaceBundleStats]] = {"b1": {}, "b2": {}}
    owners = {}
    for i, b in enumerate((DENSE, GAPPY, STALE, SHORT, NOISY)):
        if not _present(b, k):
            continue
        rate = (100.0 * (i + 1)) * daily + rng.uniform(0, 30)
        rate_in = rate
        if b == NOISY and k % 211 == 7:
            rate_in = math.nan
        if b == NOISY and k % 307 == 11:
            rate_in = -5.0
        owner = "b1" if i % 2 == 0 else "b2"
        owners[b] = owner
        brokers[owner][b] = NamespaceBundleStats(
            msg_rate_in=rate_in, msg_rate_out=2 * rate + rng.uniform(0, 5), msg_throughput_in=1000 * rate,
            msg_throughput_out=rng.uniform(0, 1e6), topics=i + 1, producer_count=1, consumer_count=2,
        )  # fmt: skip
    load = LoadData()
    for name, stats in brokers.items():
        traffic = sum(s.msg_rate_in + s.msg_rate_out for s in stats.values() if s.msg_rate_in >= 0)
        local = LocalBrokerData(cpu=ResourceUsage(usage=traffic / 40 + rng.uniform(0, 3), limit=400.0))
        local.update(local.usages(), stats)
        load.broker_data[name] = BrokerData(local_data=local)
    return load, owners


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    sink = HistorySink(str(root), max_queue=CYCLES + 1)
    rng = random.Random(8)
    for k in range(CYCLES):
        load, owners = _cycle(k, rng)
        sink.append_cycle(T0 + k * STEP_MS, load, owners)
    sink.close()
    assert sink.stats.cycles_dropped == 0
    # rows no sink would write but a hand-edited or foreign file could hold
    date, hour = partition_of(T0)
    common = {"owner": "b1", "msg_rate_in": 1.0, "msg_rate_out": 1.0, "msg_throughput_in": 1.0,
              "msg_throughput_out": 1.0, "topics": 1, "producers": 0, "consumers": 0}  # fmt: skip
    bad = pa.Table.from_pylist(
        [
            {**common, "time": T0 + 5 * STEP_MS, "bundle": None},
            {**common, "time": T0 + 6 * STEP_MS, "bundle": DENSE, "msg_rate_out": None},
        ],
        schema=BUNDLE_SCHEMA,
    )
    pq.write_table(bad, root / "bundles" / f"date={date}" / f"hour={hour}" / "part-foreign.parquet")
    return root


def _reference(root: Path, start_ms: int, end_ms: int) -> tuple[dict[str, Any], int, dict[str, Any]]:
    rows = ds.dataset(str(root / "bundles"), format="parquet", partitioning="hive").to_table().to_pylist()
    samples = [
        BundleSample(r["bundle"], r["time"], r["msg_rate_in"], r["msg_rate_out"], r["msg_throughput_in"],
                     r["msg_throughput_out"])
        for r in rows if start_ms <= r["time"] < end_ms
    ]  # fmt: skip
    results, bad = long_term_by_bundle(samples)
    fits, _ = _reference_capacity(root, start_ms, end_ms)
    return results, bad, fits


def _reference_capacity(root: Path, start_ms: int, end_ms: int) -> tuple[dict[str, Any], int]:
    brows = ds.dataset(str(root / "brokers"), format="parquet", partitioning="hive").to_table().to_pylist()
    return capacity_by_broker(
        BrokerSample(r["broker"], r["time"], r["cpu_usage"], r["cpu_limit"], r["msg_rate_in"],
                     r["msg_rate_out"], r["msg_throughput_in"], r["msg_throughput_out"])
        for r in brows if start_ms <= r["time"] < end_ms
    )  # fmt: skip


def test_job_matches_reference_and_merges_into_zookeeper(
    history: Path, spark: Any, zk_client: KazooClient, zk_chroot_hosts: str, tmp_path: Path, capsys: Any
) -> None:
    expected, expected_bad, expected_fits = _reference(history, T0, END_MS)
    assert expected[DENSE].samples > 1000 and expected[GAPPY].samples > 1000  # both rank paths are exercised
    assert expected_bad >= 2 + 2

    # A node the leader wrote: short-term data and topics must survive the merge untouched.
    existing = {
        "shortTermData": {"maxSamples": 10, "numSamples": 10, "msgThroughputIn": 1.5, "msgThroughputOut": 2.5,
                          "msgRateIn": 3.5, "msgRateOut": 4.5},
        "longTermData": {"maxSamples": 1000, "numSamples": 3, "msgThroughputIn": 0.0, "msgThroughputOut": 0.0,
                         "msgRateIn": 0.0, "msgRateOut": 0.0},
        "topics": 42,
        "futureMember": "kept",
    }  # fmt: skip
    zk_client.create(f"/loadbalance/bundle-data/{DENSE}", json.dumps(existing).encode(), makepath=True)

    # The command path (`loadmgr longterm`), once: results to Parquet, then the merge into the test's chroot.
    out = tmp_path / "out"
    hosts, chroot = zk_chroot_hosts.split("/", 1)
    span = ["--from", "2024-03-09T19:00:00Z", "--to", "2024-03-10T16:40:00Z"]
    zk = ["--zk", hosts, "--chroot", "/" + chroot]
    args = _args("--history", history.as_uri(), *span, "--out", str(out), "--p95", *zk)
    assert execute(args, spark) == EXIT_OK
    err = capsys.readouterr().err
    assert f"{expected_bad} bad (skipped)" in err, err
    assert f"cycle index: {CYCLES} distinct cycle times from the cycles manifest" in err, err
    assert "rescanning" not in err
    # DENSE takes the closed form (rank = cycle number); GAPPY and NOISY miss cycles and need the window
    assert "3 bundles past 1000 samples, 2 of them ranked by a window" in err, err
    assert "zookeeper: 1 updated, 3 created, 1 skipped" in err, err

    got_rows = ds.dataset(str(out / "bundles"), format="parquet").to_table().to_pylist()
    got = {r["bundle"]: r for r in got_rows}
    assert set(got) == set(expected)
    for b, want in expected.items():
        row = got[b]
        assert row["samples"] == want.samples, b
        for v in VALUES:
            assert row[f"pulsar_{v}"] == pytest.approx(getattr(want.pulsar, v), rel=1e-9), (b, v)
            assert row[f"long_term_{v}"] == row[f"pulsar_{v}"]  # default mode
        assert [row[f"mean_{v}"] for v in VALUES] == pytest.approx(want.mean, rel=1e-9)
        assert [row[f"p95_{v}"] for v in VALUES] == pytest.approx(want.p95, rel=1e-12), b
        assert row["long_term_num_samples"] == want.pulsar.num_samples
        assert (row["peak_hour"], row["peak_hour_msg_rate"]) == (
            want.peak_hour,
            pytest.approx(want.peak_hour_msg_rate),
        )
        assert row["live"] == (b != STALE)
    # the long bundles are not just their mean: the 1000-sample window really decayed
    assert got[DENSE]["pulsar_msg_rate_in"] != pytest.approx(got[DENSE]["mean_msg_rate_in"], rel=1e-6)
    fits = {r["broker"]: r for r in ds.dataset(str(out / "brokers"), format="parquet").to_table().to_pylist()}
    assert set(fits) == set(expected_fits)
    for broker, want_fit in expected_fits.items():
        assert fits[broker]["samples"] == want_fit.samples
        assert fits[broker]["msg_rate_per_cpu_point"] == pytest.approx(
            want_fit.msg_rate_per_cpu_point, rel=1e-6
        )
        assert fits[broker]["throughput_per_cpu_point"] == pytest.approx(
            want_fit.throughput_per_cpu_point, rel=1e-6
        )

    stored = json.loads(zk_client.get(f"/loadbalance/bundle-data/{DENSE}")[0])
    assert stored["shortTermData"] == existing["shortTermData"]
    assert (stored["topics"], stored["futureMember"]) == (42, "kept")
    want_dense = expected[DENSE].pulsar
    assert stored["longTermData"]["msgRateIn"] == pytest.approx(want_dense.msg_rate_in, rel=1e-9)
    assert stored["longTermData"]["msgThroughputOut"] == pytest.approx(
        want_dense.msg_throughput_out, rel=1e-9
    )
    assert stored["longTermData"]["numSamples"] == 1000
    created = json.loads(zk_client.get(f"/loadbalance/bundle-data/{SHORT}")[0])
    assert created["longTermData"]["msgRateOut"] == pytest.approx(expected[SHORT].mean[1], rel=1e-9)
    assert created["shortTermData"]["numSamples"] == 0  # Pulsar's default seed, replaced by the first sample
    assert zk_client.exists(f"/loadbalance/bundle-data/{STALE}") is None  # vanished bundles get no new node


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_missing_or_empty_range_is_a_clear_exit(
    history: Path, spark: Any, tmp_path: Path, capsys: Any
) -> None:
    empty = _args("--history", str(history), "--from", "2020-01-01", "--to", "2020-01-02", "--dry-run")
    assert execute(empty, spark) == EXIT_EMPTY
    missing = _args(
        "--history", str(tmp_path / "nothing"), "--from", "2024-03-09", "--to", "2024-03-11", "--dry-run"
    )
    assert execute(missing, spark) == EXIT_EMPTY
    err = capsys.readouterr().err
    assert "no valid bundle rows" in err and "no bundles history at" in err
    assert "Traceback" not in err
    backwards = _args("--history", str(history), "--from", "2024-03-11", "--to", "2024-03-09", "--dry-run")
    assert execute(backwards, spark) == EXIT_BAD_ARGS
    assert "--from" in capsys.readouterr().err


def _samples(root: Path) -> list[BundleSample]:
    rows = ds.dataset(str(root / "bundles"), format="parquet", partitioning="hive").to_table().to_pylist()
    return [
        BundleSample(r["bundle"], r["time"], r["msg_rate_in"], r["msg_rate_out"], r["msg_throughput_in"],
                     r["msg_throughput_out"])
        for r in rows
    ]  # fmt: skip


def _rewrite_manifest(root: Path, keep: Any, extra: list[dict[str, Any]] | None = None) -> None:
    """Edit the sink's manifest in place: drop rows ``keep`` rejects, add ``extra`` rows to the first hour."""
    files = sorted((root / "cycles").rglob("part-*.parquet"))
    for i, f in enumerate(files):
        table = pq.read_table(f, partitioning=None)
        rows = [r for r in table.to_pylist() if keep(r)]
        if i == 0 and extra:
            rows += extra
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), f)


def _run_job(root: Path, spark: Any) -> tuple[Any, list[str]]:
    lines: list[str] = []
    options = JobOptions(history=str(root), start_ms=T0, end_ms=END_MS, dry_run=True)
    return run(options, spark, progress=lines.append), lines


def _assert_exact(got: dict[str, BundleLongTerm], want: dict[str, BundleLongTerm]) -> None:
    assert set(got) == set(want)
    for b, w in want.items():
        g = got[b]
        assert (g.samples, g.first_ms, g.last_ms, g.peak_hour) == (
            w.samples,
            w.first_ms,
            w.last_ms,
            w.peak_hour,
        )
        for v in VALUES:
            assert getattr(g.pulsar, v) == pytest.approx(getattr(w.pulsar, v), rel=1e-9), (b, v)
        assert list(g.mean) == pytest.approx(list(w.mean), rel=1e-9), b
        assert g.peak_hour_msg_rate == pytest.approx(w.peak_hour_msg_rate, rel=1e-9), b


def test_manifest_missing_a_cycle_falls_back_to_the_scan_exactly(
    history: Path, spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "h"
    shutil.copytree(history, root)
    lost = T0 + 700 * STEP_MS  # every live bundle has a row then
    _rewrite_manifest(root, lambda r: r["time"] != lost)
    samples = _samples(root)
    expected, expected_bad = long_term_by_bundle(samples)
    lost_rows = sum(1 for s in samples if s.time_ms == lost and is_valid_bundle_sample(s))
    assert lost_rows >= 3

    result, lines = _run_job(root, spark)
    text = "\n".join(lines)
    assert f"cycle index: {CYCLES - 1} distinct cycle times from the cycles manifest" in text, text
    assert f"{lost_rows} valid rows have a time missing from the cycles manifest: rescanning" in text, text
    assert f"cycle index: {CYCLES} distinct cycle times scanned from the bundle rows" in text, text
    assert "3 bundles past 1000 samples, 2 of them ranked by a window" in text, text
    assert (result.rows, result.bad_rows) == (sum(r.samples for r in expected.values()), expected_bad)
    _assert_exact(result.bundles, expected)


def test_manifest_time_without_rows_only_sends_bundles_to_the_window(
    history: Path, spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "h"
    shutil.copytree(history, root)
    # a cycle whose bundle file was lost, between the first two: every bundle's cycle numbers have a gap
    _rewrite_manifest(root, lambda r: True, [{"time": T0 + STEP_MS // 2, "bundles": 5, "brokers": 2}])
    expected, expected_bad = long_term_by_bundle(_samples(root))

    result, lines = _run_job(root, spark)
    text = "\n".join(lines)
    assert f"cycle index: {CYCLES + 1} distinct cycle times from the cycles manifest" in text, text
    assert "rescanning" not in text
    assert "3 bundles past 1000 samples, 3 of them ranked by a window" in text, text
    assert result.bad_rows == expected_bad
    _assert_exact(result.bundles, expected)


def test_history_without_manifest_scans_the_cycle_times(history: Path, spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "h"
    shutil.copytree(history, root)
    shutil.rmtree(root / "cycles")
    expected, expected_bad = long_term_by_bundle(_samples(root))
    assert expected_bad >= 4

    result, lines = _run_job(root, spark)
    text = "\n".join(lines)
    assert f"cycle index: {CYCLES} distinct cycle times scanned from the bundle rows" in text, text
    assert f"{expected_bad} bad (skipped)" in text, text
    assert "3 bundles past 1000 samples, 2 of them ranked by a window" in text, text
    assert (result.rows, result.bad_rows) == (sum(r.samples for r in expected.values()), expected_bad)
    _assert_exact(result.bundles, expected)


def test_manifest_reads_the_same_times_with_pyarrow_and_spark(history: Path, spark: Any) -> None:
    # a range inside the history: both readers must cut the same cycles at the same edges
    start, end = T0 + 100 * STEP_MS, T0 + 1000 * STEP_MS
    manifest = CycleManifest(history.as_uri(), start, end)
    local = manifest.times(spark)
    assert local == [T0 + k * STEP_MS for k in range(100, 1000)]
    assert manifest._spark_times(spark) == local  # the path other stores (hdfs://, s3a://) take
    assert CycleManifest(str(history), start, end).times(spark) == local
    assert CycleManifest(str(history / "nothing"), start, end).times(spark) == []


# ---- poison-proof inputs ----------------------------------------------------------------------------
def _broker_row(**over: Any) -> dict[str, Any]:
    row: dict[str, Any] = {name: 1.0 for name in BROKER_SCHEMA.names}
    row.update(time=T0 + 7 * STEP_MS, broker="b9", cpu_usage=10.0, cpu_limit=100.0)
    row.update(over)
    return row


def test_degenerate_broker_rows_are_skipped_field_by_field(history: Path, spark: Any, tmp_path: Path) -> None:
    """cpu_limit 0 (Pulsar's {0,0} default) used to fail the job with DIVIDE_BY_ZERO; msg_rate_in -5
    with a large msg_rate_out passed the check on sums and bent the regression."""
    root = tmp_path / "history"
    shutil.copytree(history, root)
    date, hour = partition_of(T0)
    rows = [
        _broker_row(cpu_usage=0.0, cpu_limit=0.0),
        _broker_row(msg_rate_in=-5.0, msg_rate_out=1e4),
        _broker_row(msg_throughput_out=math.inf),
        _broker_row(msg_rate_in=1e308, msg_rate_out=1e308),  # each field good, the sum overflows
        _broker_row(cpu_usage=1.0, cpu_limit=5e-324),  # a subnormal limit: infinite percentage
    ]
    part = root / "brokers" / f"date={date}" / f"hour={hour}" / "part-degenerate.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=BROKER_SCHEMA), part)
    fits0, bad0 = compute_capacity(spark, str(history), T0, END_MS)
    fits, bad = compute_capacity(spark, str(root), T0, END_MS)
    assert bad == bad0 + len(rows)
    assert "b9" not in {f["broker"] for f in fits} and len(fits) == len(fits0)
    # the pure reference applies the same per-field rule: same rows rejected, same fits
    ref_fits, ref_bad = _reference_capacity(root, T0, END_MS)
    assert ref_bad == bad and set(ref_fits) == {f["broker"] for f in fits}
    for f in fits:
        want = ref_fits[f["broker"]]
        assert f["samples"] == want.samples
        assert f["msg_rate_per_cpu_point"] == pytest.approx(want.msg_rate_per_cpu_point, rel=1e-6)


def test_a_corrupt_parquet_file_in_range_is_skipped(
    history: Path, spark: Any, tmp_path: Path, capsys: Any
) -> None:
    root = tmp_path / "history"
    shutil.copytree(history, root)
    date, hour = partition_of(T0)
    (root / "bundles" / f"date={date}" / f"hour={hour}" / "part-corrupt.parquet").write_bytes(
        b"PAR1 not parquet"
    )
    args = _args("--history", str(root), "--from", "2024-03-09", "--to", "2024-03-11", "--dry-run")
    assert execute(args, spark) == EXIT_OK
    assert "Traceback" not in capsys.readouterr().err


def test_bad_out_and_zk_are_refused_before_any_computation(
    history: Path, spark: Any, tmp_path: Path, capsys: Any
) -> None:
    existing = tmp_path / "results.parquet"
    existing.write_text("not a directory")
    common = ("--history", str(history), "--from", "2024-03-09", "--to", "2024-03-11")
    assert execute(_args(*common, "--out", str(existing), "--dry-run"), spark) == EXIT_BAD_ARGS
    assert "--out" in capsys.readouterr().err
    assert execute(_args(*common, "--zk", "host:notaport"), spark) == EXIT_BAD_ARGS
    assert "--zk" in capsys.readouterr().err
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert execute(_args(*common, "--zk", f"127.0.0.1:{port}"), spark) == EXIT_ZK
    err = capsys.readouterr().err
    assert "nothing computed" in err and "[longterm" not in err and len(err.strip().splitlines()) == 1


def test_noauth_nodes_are_named_and_every_other_node_is_merged(
    zk_client: KazooClient, zk_chroot_hosts: str, capsys: Any
) -> None:
    """Issue 33 item 9: the merge used to stop at the first node it may not write (1 of 44 merged)
    and promise that a rerun completes it, which an ACL never lets it."""
    bundles = [f"t/acl/0x{i:08x}_0x{i + 1:08x}" for i in range(6)]
    zk_client.add_auth("digest", "owner:secret")
    locked = [f"/loadbalance/bundle-data/{bundles[i]}" for i in (1, 3)]
    zk_client.ensure_path("/loadbalance/bundle-data/t/acl")  # open parents: only the two nodes are locked
    for path in locked:
        zk_client.create(path, b"{}", acl=[make_digest_acl("owner", "secret", all=True)])
    data = TimeAverageMessageData(max_samples=1000, num_samples=1000, msg_rate_in=7.0)
    result = JobResult(0, 0, {}, [], {b: data for b in bundles}, set(bundles))
    options = JobOptions(history="-", start_ms=0, end_ms=1, zk=zk_chroot_hosts)
    assert merge_into_zookeeper(options, result) == EXIT_BAD_ARGS
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "merged 4 of 6" in err and bundles[1] in err and bundles[3] in err and "rerun" not in err, err
    for i, b in enumerate(bundles):
        doc = json.loads(zk_client.get(f"/loadbalance/bundle-data/{b}")[0])
        assert (doc == {}) if i in (1, 3) else doc["longTermData"]["msgRateIn"] == 7.0
    # once the ACL grants it, the same job completes
    for path in locked:
        zk_client.set_acls(path, [make_digest_acl("owner", "secret", all=True), *OPEN_ACL_UNSAFE])
    assert merge_into_zookeeper(options, result) == EXIT_OK
    for b in bundles:
        assert (
            json.loads(zk_client.get(f"/loadbalance/bundle-data/{b}")[0])["longTermData"]["msgRateIn"] == 7.0
        )
