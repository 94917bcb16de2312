"""How the client verbs word what the REST API answers: broker rows, the leader line, decisions, moves
and splits. Text only (no I/O): what a table shows and what ``-o json`` shows must tell the same story,
and a value that is absent is named, never printed as Python's ``None``, ``True`` or ``False``."""

from __future__ import annotations

import json
from typing import Any

BROKER_HEADERS = ["broker", "cpu%", "mem%", "bwIn%", "bwOut%", "msg/s", "MB/s", "bundles"]


def _state(b: dict[str, Any]) -> str:
    return "draining" if b.get("draining") else ("cordoned" if b.get("cordoned") else "")


def broker_table(brokers: list[dict[str, Any]]) -> tuple[list[list[Any]], list[str]]:
    """Rows and headers; the ``state`` column (cordoned, draining) only when a broker has one."""
    rows = broker_rows(brokers)
    if not any(_state(b) for b in brokers):
        return rows, BROKER_HEADERS
    return [[*r, _state(b)] for r, b in zip(rows, brokers, strict=True)], [*BROKER_HEADERS, "state"]


def broker_rows(brokers: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            b["broker"],
            b["usagePercent"].get("cpu"),
            b["usagePercent"].get("memory"),
            b["usagePercent"].get("bandwidthIn"),
            b["usagePercent"].get("bandwidthOut"),
            b["msgRateIn"] + b["msgRateOut"],
            (b["msgThroughputIn"] + b["msgThroughputOut"]) / 1e6,
            # the bundles it owns now when the answer lists them (its last report may lag a move)
            len(b["bundles"]) if isinstance(b.get("bundles"), list) else b["numBundles"],
        ]
        for b in brokers
    ]


def value_text(value: Any) -> str:
    """A config value as JSON writes it (``true``, ``0.5``, ``"x"``): what pulsar-admin prints."""
    return json.dumps(value)


def leader_line(leader: Any) -> str:
    """``leader: leader-8080 at http://127.0.0.1:8080 (this instance)``; never raw JSON."""
    if not isinstance(leader, dict):
        return "leader: (unknown)"
    who = leader.get("leader") or {}
    if not isinstance(who, dict) or not who:
        return "leader: none elected (no decisions until one is)"
    name = who.get("brokerId") or "?"
    where = f" at {who['serviceUrl']}" if who.get("serviceUrl") else ""
    mine = (
        " (the instance answering)" if leader.get("isLeader") else f" (asked {leader.get('instance', '?')})"
    )
    return f"leader: {name}{where}{mine}"


def move_text(source: str | None, destination: str | None) -> str:
    """`` a -> b`` for a move; a side that is absent is named, never printed as Python's None."""
    if not source and not destination:
        return ""
    return f" {source or '(unowned)'} -> {destination or '(placement decides)'}"


def _why(d: dict[str, Any]) -> str:
    expl = d.get("explanation") or {}
    return str(expl.get("message") or expl.get("reason") or "")


def _is_split(d: dict[str, Any]) -> bool:
    expl = d.get("explanation") or {}
    return d.get("kind") == "split" or expl.get("reason") == "manual_split"


def decision_text(d: dict[str, Any]) -> str:
    """One decision in a line. A split names its children (it moves nothing); a decision about no
    bundle (a config update, an adoption) says only what happened."""
    if _is_split(d):
        return f"{d.get('kind') or 'split'}: {split_text(d)}"
    why = _why(d)
    bundle = d.get("bundle") or ""
    move = move_text(d.get("source"), d.get("destination"))
    head = f"{d.get('kind') or 'decision'}: {bundle}{move}".rstrip()
    if not bundle and not move:
        head = f"{d.get('kind') or 'decision'}:"
    return f"{head}  ({why})" if why else head


def split_text(d: dict[str, Any]) -> str:
    """``split public/default/0x.._0x.. on broker-1:8081 into A and B (range_equally_divide)``."""
    nums = (d.get("explanation") or {}).get("numbers") or {}
    children = [str(c) for c in nums.get("children") or []]
    owner = f" on {d['source']}" if d.get("source") else ""
    into = " into " + ", ".join(children) if children else ""
    alg = f" ({nums['algorithm']})" if nums.get("algorithm") else ""
    after = (
        "; children unloaded, placement decides their brokers"
        if nums.get("unload")
        else (f"; children stay on {d['source']}" if d.get("source") else "")
    )
    return f"split {d.get('bundle') or ''}{owner}{into}{alg}{after}"


def broker_reasons(shedding: Any) -> list[list[str]]:
    """Each broker's verdict in a shedding result (why it sheds or not): what ``-o yaml`` shows."""
    brokers = shedding.get("brokers") if isinstance(shedding, dict) else None
    if not isinstance(brokers, dict):
        return []
    rows = []
    for broker in sorted(brokers):
        e = brokers[broker] if isinstance(brokers[broker], dict) else {}
        rows.append([broker, str(e.get("reason") or ""), str(e.get("message") or "")])
    return rows


def _waiting(sched: Any) -> list[dict[str, Any]]:
    got = sched.get("waiting") if isinstance(sched, dict) else None
    return [w for w in got if isinstance(w, dict)] if isinstance(got, list) else []


def when_text(bundle: Any, sched: Any) -> str:
    """A dry-run move's ``when`` cell: ``now``, or ``waits: <reason code>`` (``source_busy``,
    ``spacing`` ...). The code only: the whole reason names brokers, bundles and a config key (some
    200 characters), which pushed the table past the terminal; :func:`wait_reasons` prints it once."""
    if bundle in ((sched.get("now") if isinstance(sched, dict) else None) or []):
        return "now"
    w = next((w for w in _waiting(sched) if w.get("bundle") == bundle), None)
    return f"waits: {(w or {}).get('reason') or 'unknown'}"


def wait_reasons(sched: Any) -> list[list[Any]]:
    """Each distinct reason moves wait for, in full, with how many moves wait for it (moves from one
    broker all wait for the same bundle): rows of ``waits``, ``moves``, ``why``."""
    counts: dict[tuple[str, str], int] = {}
    for w in _waiting(sched):
        key = (str(w.get("reason") or "unknown"), str(w.get("message") or ""))
        counts[key] = counts.get(key, 0) + 1
    return [[code, n, message] for (code, message), n in counts.items()]
