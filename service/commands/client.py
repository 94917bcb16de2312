"""Client sub-commands over the REST API: ``status``, ``brokers``, ``bundles``, ``decisions``,
``unload``, ``split``, ``dry-run``. Each prints a table, or the raw JSON with ``--json``; the lists
(``bundles``, ``decisions``) are read page by page (``--page-size``, ``--limit``, ``--cursor``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from service.commands import argtypes
from service.settings import secret

DEFAULT_URL = "http://127.0.0.1:8080"


def register(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=None, help=f"REST base URL (env LOADMGR_URL, default {DEFAULT_URL})")
    common.add_argument(
        "--token",
        default=None,
        help="Bearer token (prefer env LOADMGR_API_TOKEN or --token-file: argv shows in ps)",
    )
    common.add_argument(
        "--token-file", default=None, help="File holding the token (env LOADMGR_API_TOKEN_FILE)"
    )
    common.add_argument("--cacert", default=None, help="CA bundle to verify an HTTPS server (env LOADMGR_CA)")
    common.add_argument("--json", action="store_true", help="Print the JSON answer")

    p = sub.add_parser("status", parents=[common], help="Leader, readiness and a broker summary")
    p.set_defaults(func=_status)
    p = sub.add_parser("brokers", parents=[common], help="Brokers with their load and scores")
    p.add_argument("broker", nargs="?", help="Show one broker in detail")
    p.set_defaults(func=_brokers)
    p = sub.add_parser("bundles", parents=[common], help="Bundles with their owners and traffic")
    p.add_argument("--namespace", help="Only this tenant/namespace")
    p.add_argument("--broker", help="Only bundles owned by this broker")
    _paging_args(p, "bundles")
    p.set_defaults(func=_bundles)
    p = sub.add_parser("decisions", parents=[common], help="The leader's recent decisions, newest first")
    p.add_argument("--kind", help="shedding, placement, split, manual or adoption")
    p.add_argument("--namespace", help="Only decisions about bundles of this tenant/namespace")
    p.add_argument("--broker", help="Only moves from or to this broker")
    _paging_args(p, "decisions")
    p.set_defaults(func=_decisions)
    p = sub.add_parser("unload", parents=[common], help="Unload a bundle (optionally to a broker)")
    p.add_argument("bundle")
    p.add_argument("--destination", help="Destination broker")
    p.set_defaults(func=_unload)
    p = sub.add_parser("split", parents=[common], help="Split a bundle")
    p.add_argument("bundle")
    p.add_argument(
        "--algorithm",
        help="range_equally_divide or specified_positions_divide (with --positions); "
        "topic_count_equally_divide and flow_or_qps_equally_divide need topic names, which only a "
        "leader splitting through Pulsar's admin API has (default: the leader's configured one)",
    )
    p.add_argument(
        "--positions",
        type=argtypes.hash_positions,
        help="Comma-separated hash positions (specified_positions_divide)",
    )
    p.add_argument(
        "-u", "--unload", action="store_true", help="Also unload the children (pulsar-admin split-bundle -u)"
    )
    p.set_defaults(func=_split)
    p = sub.add_parser("dry-run", parents=[common], help="What shedding would move now, changing nothing")
    p.set_defaults(func=_dry_run)


class ApiError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        text = body if isinstance(body, str) else json.dumps(body)
        super().__init__(f"HTTP {status}: {text}" if status else text)


def _client(args: argparse.Namespace) -> httpx.Client:
    url = args.url or os.environ.get("LOADMGR_URL") or DEFAULT_URL
    token_file = args.token_file or os.environ.get("LOADMGR_API_TOKEN_FILE")
    token = secret(
        args.token or os.environ.get("LOADMGR_API_TOKEN"),
        Path(token_file) if token_file else None,
        "--token-file",
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    cacert = args.cacert or os.environ.get("LOADMGR_CA")
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=15.0, verify=cacert or True)


def _call(args: argparse.Namespace, method: str, path: str, with_headers: bool = False, **kw: Any) -> Any:
    """The answer's JSON (with ``with_headers``: and its headers); ApiError on an HTTP error."""
    try:
        with _client(args) as c:
            r = c.request(method, path, **kw)
    except httpx.HTTPError as e:
        raise ApiError(
            0, f"cannot reach {args.url or os.environ.get('LOADMGR_URL') or DEFAULT_URL}: {e}"
        ) from e
    try:
        body = r.json()
    except ValueError:
        body = r.text
    if r.status_code >= 400:
        raise ApiError(r.status_code, body)
    return (body, r.headers) if with_headers else body


def _run(args: argparse.Namespace, fn: Any) -> int:
    try:
        return int(fn(args))
    except ApiError as e:
        print(f"loadmgr: {e}", file=sys.stderr)
        return 1


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3g}"
    return str(v)


def _emit(args: argparse.Namespace, body: Any, text: str) -> int:
    print(json.dumps(body, indent=2) if args.json else text)
    return 0


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
            b["numBundles"],
        ]
        for b in brokers
    ]


BROKER_HEADERS = ["broker", "cpu%", "mem%", "bwIn%", "bwOut%", "msg/s", "MB/s", "bundles"]


def _status(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        leader = _call(a, "GET", "/leader")
        brokers = _call(a, "GET", "/brokers")
        body = {"leader": leader, "brokers": brokers}
        who = (leader.get("leader") or {}) if isinstance(leader, dict) else {}
        head = (
            f"leader: {json.dumps(who) if who else '(none)'}   this instance leads: {leader.get('isLeader')}"
        )
        return _emit(a, body, head + "\n" + table(broker_rows(brokers), BROKER_HEADERS))

    return _run(args, go)


def _brokers(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        if a.broker:
            b = _call(a, "GET", f"/brokers/{a.broker}")
            scores = "\n".join(f"  {k}: {v:.4g}" for k, v in sorted(b["scores"].items()))
            text = (
                table(broker_rows([b]), BROKER_HEADERS)
                + "\nscores:\n"
                + scores
                + "\nbundles:\n"
                + "\n".join("  " + x for x in b["bundles"])
            )
            return _emit(a, b, text)
        brokers = _call(a, "GET", "/brokers")
        return _emit(a, brokers, table(broker_rows(brokers), BROKER_HEADERS))

    return _run(args, go)


def _paging_args(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--limit", type=argtypes.positive_int, help=f"At most this many {what} (default: all)")
    p.add_argument(
        "--page-size",
        type=argtypes.positive_int,
        default=PAGE_SIZE,
        help=f"{what.capitalize()} per request (default {PAGE_SIZE}); the pages are followed by cursor",
    )
    p.add_argument("--cursor", help="Start where a previous listing stopped (its next cursor)")


PAGE_SIZE = 1000
NEXT_CURSOR = "X-Next-Cursor"


def _paged(a: argparse.Namespace, path: str, params: dict[str, Any], key: str | None = None) -> list[Any]:
    """Every row of a paged list (``limit`` + ``cursor``), up to ``--limit``; when rows are left
    over, the cursor to go on from is printed on stderr."""
    rows: list[Any] = []
    cursor = a.cursor
    while True:
        want = a.page_size if a.limit is None else min(a.page_size, a.limit - len(rows))
        page_params = {**params, "limit": want} | ({"cursor": cursor} if cursor else {})
        body, headers = _call(a, "GET", path, params=page_params, with_headers=True)
        rows += body[key] if key is not None else body
        cursor = headers.get(NEXT_CURSOR)
        if cursor is None:
            return rows
        if a.limit is not None and len(rows) >= a.limit:
            print(f"more: --cursor {cursor}", file=sys.stderr)
            return rows


def _decisions(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        params = {k: v for k, v in (("kind", a.kind), ("namespace", a.namespace), ("broker", a.broker)) if v}
        rows = _paged(a, "/decisions", params, key="decisions")
        text = "\n".join(f"{r.get('id')}  {_decision_text(r)}" for r in rows)
        return _emit(a, rows, text)

    return _run(args, go)


def _bundles(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        params = {k: v for k, v in (("namespace", a.namespace), ("broker", a.broker)) if v}
        rows = _paged(a, "/bundles", params)
        data = [
            [
                r["bundle"],
                r["owner"],
                (r.get("msgRateIn") or 0) + (r.get("msgRateOut") or 0),
                ((r.get("msgThroughputIn") or 0) + (r.get("msgThroughputOut") or 0)) / 1e6,
                r.get("topics"),
            ]
            for r in rows
        ]
        return _emit(a, rows, table(data, ["bundle", "owner", "msg/s", "MB/s", "topics"]))

    return _run(args, go)


def move_text(source: str | None, destination: str | None) -> str:
    """`` a -> b`` for a move; a side that is absent is named, never printed as Python's None."""
    if not source and not destination:
        return ""
    return f" {source or '(unowned)'} -> {destination or '(placement decides)'}"


def _decision_text(d: dict[str, Any]) -> str:
    expl = d.get("explanation") or {}
    why = expl.get("message") or expl.get("reason") or ""
    move = move_text(d.get("source"), d.get("destination"))
    return f"{d.get('kind', 'decision')}: {d.get('bundle', '')}{move}" + (f"  ({why})" if why else "")


def _unload(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        body = {"destinationBroker": a.destination} if a.destination else None
        r = _call(a, "POST", f"/bundles/{a.bundle}/unload", json=body)
        return _emit(a, r, _decision_text(r.get("decision") or {}))

    return _run(args, go)


def _split(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        body: dict[str, Any] = {}
        if a.algorithm:
            body["algorithm"] = a.algorithm
        if a.positions:
            body["positions"] = a.positions  # parsed and range-checked by argparse
        if a.unload:
            body["unload"] = True
        r = _call(a, "POST", f"/bundles/{a.bundle}/split", json=body)
        return _emit(a, r, _decision_text(r.get("decision") or {}))

    return _run(args, go)


def _dry_run(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        r = _call(a, "POST", "/shedding/dry-run")
        rows = [
            [
                m.get("bundle"),
                m.get("source"),
                m.get("destination"),
                (m.get("explanation") or {}).get("reason"),
            ]
            for m in r["moves"]
        ]
        text = table(rows, ["bundle", "from", "to", "reason"]) if rows else "nothing to move"
        summary = (r.get("shedding") or {}).get("summary") or {}
        if summary:
            text += f"\n{summary.get('reason', '')}: {summary.get('message', '')}"
        return _emit(a, r, text)

    return _run(args, go)
