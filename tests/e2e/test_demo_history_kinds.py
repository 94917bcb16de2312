"""Issue 34, end to end: a demo's history records each move with its decision kind, so a replay tells the
leader's shedding from an operator's unload (before, the history held owners only and the replay
counted an operator's unload as the leader's move)."""

from __future__ import annotations

import io
import shutil
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from service.commands.cli import main
from service.demo.cluster import NAMESPACE, Demo, DemoOptions

pytestmark = pytest.mark.e2e


def test_history_records_leader_and_operator_moves_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("java") is None:
        pytest.skip("the demo needs Java 17+ for its embedded ZooKeeper")
    history = tmp_path / "history"
    opts = DemoOptions(
        brokers=2, bundles=4, port=0, shed_interval_s=2.0, history=str(history), publish_state=False
    )
    demo = Demo(opts, out=io.StringIO())
    try:
        demo.start()
        assert demo.wait_balanced(120), demo.table()
        owners = demo.service.view().owners
        bundle = sorted(b for b in owners if b.startswith(NAMESPACE))[0]
        dest = next(b for b in demo.broker_ids if b != owners[bundle])
        rng = bundle.rsplit("/", 1)[1]
        assert main(["namespaces", "unload", NAMESPACE, "--bundle", rng, "-d", dest, "--url", demo.url]) == 0
        assert f"-> {dest}" in capsys.readouterr().out
        # a few more cycles, so the move shows in the recorded owners too
        deadline = time.monotonic() + 60
        while demo.service.view().owners.get(bundle) != dest and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        demo.stop()  # closes the history sink: everything queued is written
    rows = ds.dataset(str(history / "moves"), format="parquet", partitioning="hive").to_table().to_pylist()
    kinds = {(r["kind"], r["reason"]) for r in rows if r["applied"]}
    assert ("placement", "new_bundle_assigned") in kinds
    assert any(k == "shedding" for k, _ in kinds), kinds  # the leader balanced the skewed start
    manual = [r for r in rows if r["kind"] == "manual"]
    assert [(r["bundle"], r["destination"], r["reason"]) for r in manual] == [(bundle, dest, "manual_unload")]
