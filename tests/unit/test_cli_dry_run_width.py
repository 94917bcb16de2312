"""``loadmgr dry-run``'s table fits the terminal: the ``when`` column says ``now`` or ``waits: <code>``,
each wait's whole reason is printed once beneath, wrapped within the terminal, and ``-o yaml/json``
keep every move's whole reason."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import httpx
import pytest

from service.commands import client
from service.commands.cli import main

A, B = "127.0.0.1:36513", "127.0.0.1:60675"
BUNDLES = [f"public/skewed/0x{i:08x}_0x{i + 1:08x}" for i in range(4)]
# As balancer/pacing.py words it: some 190 characters, naming brokers, a bundle and a config key.
WHY = (
    f"{A} has 1 unload(s) in flight, the most loadBalancerMaxUnloadsInFlightPerBroker allows: waiting "
    f"until {BUNDLES[0]} is served at {B} (in flight for 3.2 s)"
)
SPACING = f"{B} took part in an unload 4 s ago, under loadBalancerUnloadSpacingSeconds (15 s)"
ANSWER: dict[str, Any] = {
    "moves": [
        {
            "bundle": b,
            "source": A,
            "destination": B if i % 2 else None,
            "explanation": {"reason": "overloaded", "message": "cpu over the threshold"},
        }
        for i, b in enumerate(BUNDLES)
    ],
    "skipped": [],
    "changed": False,
    "shedding": {
        "summary": {"reason": "overloaded", "message": "one broker over"},
        "brokers": {A: {"reason": "overloaded", "message": "cpu 95 % over 85"}},
    },
    "schedule": {
        "now": [BUNDLES[0]],
        "waiting": [
            {"bundle": BUNDLES[1], "reason": "source_busy", "message": WHY},
            {"bundle": BUNDLES[2], "reason": "source_busy", "message": WHY},
            {"bundle": BUNDLES[3], "reason": "spacing", "message": SPACING},
        ],
        "inFlight": [],
        "queuedOtherKinds": 0,
    },
}


@pytest.fixture(autouse=True)
def _server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        client,
        "_client",
        lambda _a: httpx.Client(
            base_url="http://t", transport=httpx.MockTransport(lambda _r: httpx.Response(200, json=ANSWER))
        ),
    )


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("columns", [80, 120])
def test_the_dry_run_table_fits_the_terminal_and_says_each_wait_once_in_full(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["dry-run"]) == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # a terminal's bold headers
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), "\n".join(lines)
    # The moves' table: one line per move at 120 columns (at 80 a cell may wrap once, never more).
    first = next(i for i, line in enumerate(lines) if line.startswith(BUNDLES[0]))
    end = next(
        (i for i, line in enumerate(lines) if i > first and line.startswith(("waits ", "broker "))),
        len(lines),
    )
    moves = lines[first:end]
    assert len(moves) <= len(BUNDLES) * (1 if columns >= 120 else 2), "\n".join(moves)
    row = {b: next(line for line in moves if line.startswith(b)) for b in BUNDLES}
    assert row[BUNDLES[0]].rstrip().endswith("now")
    if columns >= 120:  # nothing in the moves' table is cut
        assert "…" not in "\n".join(moves), "\n".join(moves)
        assert row[BUNDLES[1]].rstrip().endswith("waits: source_busy")
        assert row[BUNDLES[3]].rstrip().endswith("waits: spacing")
        assert A in row[BUNDLES[1]] and B in row[BUNDLES[1]]
    # Each reason in full, once (two moves wait for the same one), wrapped, never cut.
    text = _words(out)
    assert _words(WHY) in text and text.count(_words(WHY)) == 1, out
    assert _words(SPACING) in text, out


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_the_machine_formats_keep_every_moves_whole_reason(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    assert main(["dry-run", "-o", fmt]) == 0
    out = capsys.readouterr().out
    body = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert [w["message"] for w in body["schedule"]["waiting"]] == [WHY, WHY, SPACING]
