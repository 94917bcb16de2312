"""Client sub-commands over the REST API: ``status``, ``brokers``, ``bundles``, ``unload``, ``split``,
``dry-run``, ``decisions``, and the pulsar-admin-shaped ``brokers update-dynamic-config``. The lists
(``bundles``, ``decisions``) are read page by page (``--page-size``, ``--limit``, ``--cursor``). Each
prints a table, or the answer as JSON or YAML with ``-o json|yaml`` (``--json`` too).

Every verb finds its server by ``--url``, ``LOADMGR_URL``, a running ``loadmgr demo``, else
``http://127.0.0.1:8080`` (:mod:`service.commands.endpoints`). A failure is one line on stderr; the exit
code is 2 for the caller's mistake (an HTTP 4xx: unknown bundle, bad argument, missing token) and 1 when
the server cannot be reached or fails (5xx), as for every other verb (:mod:`service.commands.cli`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from balancer.errors import ConfigError
from service.commands import argtypes, endpoints, maintenance
from service.commands.output import add_output_args, emit, table
from service.settings import is_http_url, secret

DEFAULT_URL = endpoints.DEFAULT_URL
EXIT_CALLER, EXIT_SERVER = 2, 1

BUNDLE_HELP = (
    "The bundle: tenant/namespace/0xLOWER_0xUPPER (as `loadmgr bundles` lists it), or tenant/namespace "
    "with --bundle 0xLOWER_0xUPPER (pulsar-admin's form)"
)


def common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=None,
        help=f"REST base URL (env LOADMGR_URL; default: the running demo's, else {DEFAULT_URL})",
    )
    common.add_argument(
        "--token",
        default=None,
        help="Bearer token (prefer env LOADMGR_API_TOKEN or --token-file: argv shows in ps)",
    )
    common.add_argument(
        "--token-file", default=None, help="File holding the token (env LOADMGR_API_TOKEN_FILE)"
    )
    common.add_argument("--cacert", default=None, help="CA bundle to verify an HTTPS server (env LOADMGR_CA)")
    add_output_args(common)
    return common


def add_bundle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", metavar="BUNDLE|NAMESPACE", help=BUNDLE_HELP)
    p.add_argument(
        "-b", "--bundle", dest="bundle_range", metavar="RANGE", help="0xLOWER_0xUPPER of NAMESPACE"
    )


def add_split_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--algorithm",
        "--split-algorithm",
        dest="algorithm",
        help="range_equally_divide or specified_positions_divide (with --positions); "
        "topic_count_equally_divide and flow_or_qps_equally_divide need topic names, which only a "
        "leader splitting through Pulsar's admin API has (default: the leader's configured one)",
    )
    p.add_argument(
        "--positions",
        "--split-boundaries",
        dest="positions",
        type=argtypes.hash_positions,
        help="Comma-separated hash positions (specified_positions_divide)",
    )
    p.add_argument(
        "-u", "--unload", action="store_true", help="Also unload the children (pulsar-admin split-bundle -u)"
    )


def register(sub: Any) -> None:
    common = common_parser()
    p = sub.add_parser("status", parents=[common], help="Leader, readiness and a broker summary")
    p.set_defaults(func=_status)
    p = sub.add_parser(
        "brokers",
        parents=[common],
        help="Brokers with their load and scores; `brokers update-dynamic-config --config K --value V`",
        description="`loadmgr brokers` lists the brokers, `loadmgr brokers BROKER` shows one, "
        "`loadmgr brokers list` is the same as no argument, and `loadmgr brokers update-dynamic-config "
        "--config KEY --value VALUE` changes a dynamic load-balancer key (pulsar-admin's verb; PUT /config).",
    )
    p.add_argument(
        "broker",
        nargs="?",
        metavar="BROKER|list|cordon|uncordon|drain|drain-stop|drain-status|update-dynamic-config|...",
        help="A broker id (host:port) to show in detail, a maintenance verb followed by the broker "
        "(cordon, uncordon, drain, drain-stop, drain-status), or one of pulsar-admin's brokers verbs",
    )
    p.add_argument("target", nargs="?", metavar="BROKER", help="The broker a maintenance verb acts on")
    p.add_argument("--config", dest="config_key", help="update-dynamic-config: the Pulsar key")
    p.add_argument("--value", dest="config_value", help="update-dynamic-config: its new value")
    maintenance.add_args(p)
    p.set_defaults(func=_brokers)
    p = sub.add_parser("bundles", parents=[common], help="Bundles with their owners and traffic")
    p.add_argument("--namespace", help="Only this tenant/namespace")
    p.add_argument("--broker", help="Only bundles owned by this broker")
    _paging_args(p, "bundles")
    p.set_defaults(func=_bundles)
    p = sub.add_parser("decisions", parents=[common], help="The leader's recent decisions, newest first")
    p.add_argument("--kind", help="shedding, placement, split, manual, adoption or drain")
    p.add_argument("--namespace", help="Only decisions about bundles of this tenant/namespace")
    p.add_argument("--broker", help="Only moves from or to this broker")
    _paging_args(p, "decisions")
    p.set_defaults(func=_decisions)
    p = sub.add_parser(
        "unload",
        parents=[common],
        help="Unload a bundle (optionally to a broker); also `namespaces unload NS --bundle R -d B`",
    )
    add_bundle_args(p)
    p.add_argument(
        "-d", "--destination", "--destinationBroker", dest="destination", help="Destination broker"
    )
    p.set_defaults(func=_unload)
    p = sub.add_parser(
        "split", parents=[common], help="Split a bundle; also `namespaces split-bundle NS --bundle R`"
    )
    add_bundle_args(p)
    add_split_args(p)
    p.set_defaults(func=_split)
    p = sub.add_parser("dry-run", parents=[common], help="What shedding would move now, changing nothing")
    p.set_defaults(func=_dry_run)


class ApiError(Exception):
    """A failed call, said in one line: ``HTTP 404 UnknownBundle: no bundle public/default/0x..``."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        super().__init__(error_line(status, body))

    @property
    def exit_code(self) -> int:
        return EXIT_CALLER if 400 <= self.status < 500 else EXIT_SERVER


def _flat(detail: Any) -> str:
    if isinstance(detail, dict):
        msg = detail.get("message") or detail.get("msg")
        rest = {k: v for k, v in detail.items() if k not in ("message", "msg")}
        parts = [_flat(msg)] if msg else []
        parts += [f"{k}={_flat(v)}" for k, v in rest.items()]
        return "; ".join(parts)
    if isinstance(detail, list):
        return "; ".join(_flat(x) for x in detail)
    return " ".join(str(detail).split())


def error_line(status: int, body: Any) -> str:
    if not status:
        return str(body)
    if isinstance(body, dict) and "error" in body:
        detail = _flat(body.get("detail"))
        text = f"{body['error']}: {detail}" if detail else str(body["error"])
    else:
        text = _flat(body) or "(no body)"
    return f"HTTP {status} {text}"[:500]


def _client(args: argparse.Namespace) -> httpx.Client:
    url = endpoints.rest_url(args.url)
    if not is_http_url(url):
        raise ConfigError("--url" if args.url else "LOADMGR_URL", url, "expected an http(s) URL")
    token_file = args.token_file or os.environ.get("LOADMGR_API_TOKEN_FILE")
    token = secret(
        args.token or os.environ.get("LOADMGR_API_TOKEN"),
        Path(token_file) if token_file else None,
        "--token-file",
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    cacert = args.cacert or os.environ.get("LOADMGR_CA")
    return httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=15.0, verify=cacert or True)


def call(args: argparse.Namespace, method: str, path: str, with_headers: bool = False, **kw: Any) -> Any:
    """The answer's JSON (with ``with_headers``: and its headers); ApiError on an HTTP error."""
    try:
        with _client(args) as c:
            r = c.request(method, path, **kw)
    except httpx.HTTPError as e:
        url = endpoints.rest_url(args.url)
        hint = ""
        if url == DEFAULT_URL and not args.url and not os.environ.get("LOADMGR_URL"):
            hint = " (no running demo found: start one with `make run`, or give --url or LOADMGR_URL)"
        raise ApiError(0, f"cannot reach {url}: {e}{hint}") from e
    try:
        body = r.json()
    except ValueError:
        body = r.text
    if r.status_code >= 400:
        raise ApiError(r.status_code, body)
    return (body, r.headers) if with_headers else body


_call = call  # the name other modules used


def run_api(args: argparse.Namespace, fn: Any) -> int:
    try:
        return int(fn(args))
    except ApiError as e:
        print(f"loadmgr: {e}", file=sys.stderr)
        return e.exit_code


_run = run_api


def bundle_of(args: argparse.Namespace) -> str:
    """``tenant/ns/0x.._0x..`` from either form; a malformed one is the caller's error, named."""
    from balancer.bundles import split_bundle_name

    name = str(args.bundle).strip()
    if args.bundle_range:
        rng = str(args.bundle_range).strip()
        name = f"{name.rstrip('/')}/{rng}"
        split_bundle_name(name)  # InvalidInput names the field and value
        return name
    split_bundle_name(name)
    return name


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
            "draining" if b.get("draining") else ("cordoned" if b.get("cordoned") else ""),
        ]
        for b in brokers
    ]


BROKER_HEADERS = ["broker", "cpu%", "mem%", "bwIn%", "bwOut%", "msg/s", "MB/s", "bundles", "state"]


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


def _status(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        leader = call(a, "GET", "/leader")
        brokers = call(a, "GET", "/brokers")
        maint = maintenance.fetch(a)
        body = {"leader": leader, "brokers": brokers, "maintenance": maint}
        return emit(
            a,
            body,
            lambda: [
                leader_line(leader),
                table(broker_rows(brokers), BROKER_HEADERS),
                *maintenance.lines(maint),
            ],
        )

    return run_api(args, go)


def _brokers(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        verb = a.broker
        if verb == "update-dynamic-config":
            return _update_dynamic_config(a)
        if verb == "get-dynamic-config":
            cfg = call(a, "GET", "/config")
            dynamic = {k: cfg["values"][k] for k in cfg.get("dynamicKeys", []) if k in cfg["values"]}
            return emit(a, dynamic, lambda: table(sorted(dynamic.items()), ["key", "value"], left=2))
        if verb in maintenance.VERBS:
            return maintenance.run(a, verb)
        if a.target:
            from balancer.errors import InvalidInput

            raise InvalidInput("BROKER", a.target, f"`brokers {verb}` takes no second argument")
        if a.config_key or a.config_value:
            from balancer.errors import InvalidInput

            raise InvalidInput("--config/--value", a.config_key, "only with `brokers update-dynamic-config`")
        if verb and verb != "list":
            b = call(a, "GET", f"/brokers/{verb}")
            scores = sorted((k, v) for k, v in b["scores"].items())
            return emit(
                a,
                b,
                lambda: [
                    table(broker_rows([b]), BROKER_HEADERS),
                    table(scores, ["score", "value"]),
                    table([[x] for x in b["bundles"]], [f"bundles ({len(b['bundles'])})"]),
                ],
            )
        brokers = call(a, "GET", "/brokers")
        return emit(a, brokers, lambda: table(broker_rows(brokers), BROKER_HEADERS))

    return run_api(args, go)


def _update_dynamic_config(a: argparse.Namespace) -> int:
    from balancer.errors import InvalidInput

    if not a.config_key or a.config_value is None:
        raise InvalidInput(
            "--config/--value", a.config_key, "update-dynamic-config needs --config K --value V"
        )
    key, value = a.config_key.strip(), a.config_value
    body = call(a, "PUT", "/config", json={key: value})
    now = (body.get("values") or {}).get(key)
    return emit(a, body, lambda: f"{key} = {now!r} (dynamic; the leader applies it from its next cycle)")


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
        return emit(a, rows, lambda: "\n".join(f"{r.get('id')}  {decision_text(r)}" for r in rows))

    return run_api(args, go)


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
        return emit(a, rows, lambda: table(data, ["bundle", "owner", "msg/s", "MB/s", "topics"]))

    return run_api(args, go)


def move_text(source: str | None, destination: str | None) -> str:
    """`` a -> b`` for a move; a side that is absent is named, never printed as Python's None."""
    if not source and not destination:
        return ""
    return f" {source or '(unowned)'} -> {destination or '(placement decides)'}"


def _why(d: dict[str, Any]) -> str:
    expl = d.get("explanation") or {}
    return str(expl.get("message") or expl.get("reason") or "")


def decision_text(d: dict[str, Any]) -> str:
    why = _why(d)
    move = move_text(d.get("source"), d.get("destination"))
    return f"{d.get('kind', 'decision')}: {d.get('bundle', '')}{move}" + (f"  ({why})" if why else "")


_decision_text = decision_text


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
    return f"split {d.get('bundle', '')}{owner}{into}{alg}{after}"


def do_unload(a: argparse.Namespace, bundle: str, destination: str | None) -> int:
    body = {"destinationBroker": destination} if destination else None
    r = call(a, "POST", f"/bundles/{bundle}/unload", json=body)
    return emit(a, r, lambda: decision_text(r.get("decision") or {}))


def do_split(a: argparse.Namespace, bundle: str) -> int:
    body: dict[str, Any] = {}
    if a.algorithm:
        body["algorithm"] = a.algorithm
    if a.positions:
        body["positions"] = a.positions  # parsed and range-checked by argparse
    if a.unload:
        body["unload"] = True
    r = call(a, "POST", f"/bundles/{bundle}/split", json=body)
    return emit(a, r, lambda: split_text(r.get("decision") or {}))


def _unload(args: argparse.Namespace) -> int:
    return run_api(args, lambda a: do_unload(a, bundle_of(a), a.destination))


def _split(args: argparse.Namespace) -> int:
    return run_api(args, lambda a: do_split(a, bundle_of(a)))


def _dry_run(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        r = call(a, "POST", "/shedding/dry-run")
        rows: Sequence[Sequence[Any]] = [
            [
                m.get("bundle"),
                m.get("source"),
                m.get("destination"),
                (m.get("explanation") or {}).get("reason"),
            ]
            for m in r["moves"]
        ]
        summary = (r.get("shedding") or {}).get("summary") or {}
        tail = f"{summary.get('reason', '')}: {summary.get('message', '')}" if summary else ""

        def render() -> list[Any]:
            out: list[Any] = [table(rows, ["bundle", "from", "to", "reason"]) if rows else "nothing to move"]
            return [*out, tail] if tail else out

        return emit(a, r, render)

    return run_api(args, go)
