"""The demo starts skewed (every bundle on one broker) and the leader balances it within two minutes.
The `loadmgr demo` command itself (URL, table, moves, Ctrl-C) is tested in test_ctrl_c.py."""

from __future__ import annotations

import pytest

from service.demo.cluster import Demo

pytestmark = pytest.mark.e2e


def test_skewed_cluster_becomes_balanced_within_two_minutes(demo: Demo) -> None:
    first = demo.broker_ids[0]
    assert demo.skewed_at_start[first] == demo.opts.bundles, demo.skewed_at_start
    assert demo.balanced_within, demo.out.getvalue()[-3000:]  # type: ignore[attr-defined]
    assert demo.balanced_after_s is not None and demo.balanced_after_s <= 120
    counts = demo.ownership_counts()
    assert all(n > 0 for n in counts.values()), counts
    moves = [d for d in demo.service.decisions(limit=500, kind="shedding") if d.source == first]
    assert moves and all(d.explanation.get("reason") for d in moves)
