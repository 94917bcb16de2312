"""The dry run on a cluster that has moves to make: every bundle sits on one broker and the leader's
shedding interval is an hour, so the moves stay pending while the operator asks "what would you do?"
over REST and through the CLI. Nothing may change."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from service.commands.cli import main
from service.demo.cluster import Demo, DemoOptions
from tests.e2e.conftest import _wait_for, running_demo

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def skewed() -> Iterator[Demo]:
    # ThresholdShedder decides on one cycle's data (BalancedShedder waits for consecutive hits across
    # cycles, which a dry run on copies never accumulates); the traffic is raised so that the share
    # it offloads clears Pulsar's minimum throughput to unload.
    opts = DemoOptions(
        brokers=3,
        bundles=6,
        port=0,
        shed_interval_s=3600.0,
        strategy="ThresholdShedder",
        msg_rate_per_bundle=12000.0,
        publish_state=False,  # the session's `demo` owns the state file in this process
    )
    yield from running_demo(opts)


def _owners(demo: Demo) -> dict[str, str]:
    """bundle -> owner, read from the ownership nodes themselves."""
    return {b: o.broker for b, o in demo.service.store.read_owners().items()}


def _moves(api: httpx.Client) -> list[dict[str, object]]:
    r = api.post("/shedding/dry-run")
    assert r.status_code == 200, r.text
    moves: list[dict[str, object]] = r.json()["moves"]
    return moves


def test_dry_run_lists_the_pending_moves_over_rest_and_changes_nothing(skewed: Demo) -> None:
    first = skewed.broker_ids[0]
    with httpx.Client(base_url=skewed.url, timeout=20.0) as api:
        # Moves appear once every broker has reported its (idle) load next to the loaded one.
        moves = _wait_for(lambda: _moves(api), timeout_s=60)
        assert moves, skewed.out.getvalue()[-2000:]  # type: ignore[attr-defined]
        owners_before = _owners(skewed)
        decisions_before = len(skewed.service.decisions(limit=1000))
        for m in moves:
            assert m["source"] == first and m["destination"] in skewed.broker_ids[1:], m
            assert isinstance(m["explanation"], dict) and m["explanation"]["reason"], m
        assert _moves(api), "a second dry run must see the same pending moves"
    assert _owners(skewed) == owners_before and set(owners_before.values()) == {first}
    assert len(owners_before) == skewed.opts.bundles
    assert len(skewed.service.decisions(limit=1000)) == decisions_before


def test_cli_dry_run_prints_the_moves_as_a_table_and_json(
    skewed: Demo, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--url", skewed.url]
    with httpx.Client(base_url=skewed.url, timeout=20.0) as api:
        assert _wait_for(lambda: _moves(api), timeout_s=60)
    assert main(["dry-run", *url]) == 0
    out = capsys.readouterr().out
    assert "bundle" in out and "reason" in out and "nothing to move" not in out
    assert skewed.broker_ids[0] in out and "None" not in out, out
    assert main(["dry-run", "--json", *url]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["changed"] is False and body["moves"]
    assert all(m["bundle"] in out for m in body["moves"]), out
