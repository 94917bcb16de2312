"""``loadmgr bundles``, ``decisions``, ``unload``, ``split`` and ``dry-run``: the bundles, what the
leader decided about them, and an operator's own moves, over the REST API. ``namespaces unload`` and
``namespaces split-bundle`` (pulsar-admin's forms) end in :func:`do_unload` and :func:`do_split` too."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from balancer.errors import InvalidInput
from service.commands import bundle_args
from service.commands.client import (
    ApiError,
    add_bundle_args,
    add_split_args,
    call,
    common_parser,
    paged,
    paging_args,
    run_api,
)
from service.commands.output import emit, table
from service.commands.render import broker_reasons, decision_text, split_text, wait_reasons, when_text


def register(sub: Any) -> None:
    common = common_parser()
    p = sub.add_parser("bundles", parents=[common], help="Bundles with their owners and traffic")
    p.add_argument("--namespace", help="Only this tenant/namespace")
    p.add_argument("--broker", help="Only bundles owned by this broker")
    paging_args(p, "bundles")
    p.set_defaults(func=_bundles)
    p = sub.add_parser("decisions", parents=[common], help="The leader's recent decisions, newest first")
    p.add_argument("--kind", help="shedding, placement, split, manual, adoption, drain or leadership")
    p.add_argument("--namespace", help="Only decisions about bundles of this tenant/namespace")
    p.add_argument("--broker", help="Only moves from or to this broker")
    paging_args(p, "decisions")
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


def _decisions(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        params = {k: v for k, v in (("kind", a.kind), ("namespace", a.namespace), ("broker", a.broker)) if v}
        rows = paged(a, "/decisions", params, key="decisions")
        return emit(a, rows, lambda: "\n".join(f"{r.get('id')}  {decision_text(r)}" for r in rows))

    return run_api(args, go)


def _bundles(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        params = {k: v for k, v in (("namespace", a.namespace), ("broker", a.broker)) if v}
        rows = paged(a, "/bundles", params)
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


def live_brokers(a: argparse.Namespace) -> list[str]:
    """The live brokers' ids, to name in an error (empty when they cannot be read)."""
    try:
        return sorted(str(b.get("broker")) for b in call(a, "GET", "/brokers"))
    except (ApiError, AttributeError, TypeError):
        return []


def _not_a_broker(a: argparse.Namespace, destination: str, why: str) -> InvalidInput:
    live = live_brokers(a)
    named = f"; live brokers: {', '.join(live)}" if live else ""
    return InvalidInput("--destination", destination, f"{why}{named}")


def do_unload(a: argparse.Namespace, bundle: str, destination: str | None) -> int:
    if destination is not None:
        destination = destination.strip()
        host, sep, port = destination.rpartition(":")
        if "://" in destination or "/" in destination or not sep or not host or not port.isdigit():
            raise _not_a_broker(a, destination, "a broker is named host:port, as `loadmgr brokers` lists it")
    body = {"destinationBroker": destination} if destination else None
    try:
        r = call(a, "POST", f"/bundles/{bundle}/unload", json=body)
    except ApiError as e:
        if destination and isinstance(e.body, dict) and e.body.get("error") == "UnknownBroker":
            raise _not_a_broker(a, destination, "not among the live brokers") from None
        raise
    decision = r.get("decision") or {}
    if (getattr(a, "output", "table") or "table") == "table" and not decision.get("destination"):
        # The leader placed it (or will): say where it landed, as observed, once the owner changed.
        landed = landed_on(a, bundle, decision.get("source"))
        if landed is not None:
            return emit(
                a, r, lambda: decision_text({**decision, "destination": landed}) + "  [placed by the leader]"
            )
    return emit(a, r, lambda: decision_text(decision))


# How long an unload without -d waits to see where placement put the bundle before saying it decides.
LANDING_WAIT_S = 10.0


def landed_on(a: argparse.Namespace, bundle: str, source: str | None) -> str | None:
    """The bundle's new owner once it differs from ``source`` (within :data:`LANDING_WAIT_S`), else None."""
    import time

    deadline = time.monotonic() + LANDING_WAIT_S
    while True:
        try:
            owner = call(a, "GET", f"/bundles/{bundle}").get("owner")
        except (ApiError, AttributeError):
            return None
        if owner and owner != source:
            return str(owner)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.25)


def do_split(a: argparse.Namespace, bundle: str) -> int:
    bundle_args.check_split_args(a)
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
    return run_api(args, lambda a: do_unload(a, bundle_args.bundle_of(a), a.destination))


def _split(args: argparse.Namespace) -> int:
    return run_api(args, lambda a: do_split(a, bundle_args.bundle_of(a)))


def _dry_run(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        r = call(a, "POST", "/shedding/dry-run")
        rows: Sequence[Sequence[Any]] = [
            [
                m.get("bundle"),
                m.get("source"),
                m.get("destination") or "(placement decides)",
                (m.get("explanation") or {}).get("reason"),
            ]
            for m in r["moves"]
        ]
        shedding = r.get("shedding") or {}
        summary = shedding.get("summary") or {}
        tail = f"{summary.get('reason', '')}: {summary.get('message', '')}" if summary else ""
        reasons = broker_reasons(shedding)
        # The disruption budget's schedule: each move now, or waiting and why (issue 46).
        sched = r.get("schedule") or {}
        if sched:
            rows = [[*row, when_text(row[0], sched)] for row in rows]
        head = ["bundle", "from", "to", "reason"] + (["when"] if sched else [])
        waits = wait_reasons(sched)

        def render() -> list[Any]:
            out: list[Any] = [table(rows, head, left=len(head)) if rows else "nothing to move"]
            if waits:  # each wait's whole reason once, wrapped within the terminal
                out.append(table(waits, ["waits", "moves", "why"], left=3))
            flying = sched.get("inFlight") or []
            if flying:
                out.append(f"{len(flying)} move(s) in flight, not yet served at their destination")
            if reasons:  # why each broker sheds or not: the same story -o yaml tells
                out.append(table(reasons, ["broker", "verdict", "why"], left=3))
            return [*out, tail] if tail else out

        return emit(a, r, render)

    return run_api(args, go)
