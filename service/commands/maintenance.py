"""``loadmgr brokers cordon|uncordon|drain|drain-stop|drain-status BROKER`` over the REST API.

``drain --wait`` follows the drain until it is done, printing a progress bar on a terminal (a line
per change otherwise), and with ``--then-shutdown`` until Pulsar's shutdown was asked for; it exits 0
when done (and the shutdown requested), 1 when it failed, was stopped, the shutdown was refused or
``--timeout`` passed (the drain itself goes on: only the waiting ends).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from balancer.errors import InvalidInput
from service.commands import argtypes
from service.commands.output import emit

VERBS = ("cordon", "uncordon", "drain", "drain-stop", "drain-status")
POLL_S = 0.5
BAR = 30


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="drain: follow it until done, with a progress bar")
    p.add_argument(
        "--timeout",
        type=argtypes.positive_float,
        default=None,
        help="drain --wait: stop waiting after this many seconds (exit 1; the drain goes on)",
    )
    p.add_argument(
        "--then-shutdown",
        action="store_true",
        help="drain, Pulsar mode: Pulsar's graceful shutdown of the broker once only heartbeat "
        "namespaces are left",
    )


def fetch(a: argparse.Namespace) -> dict[str, Any] | None:
    """``GET /maintenance``; None from a server that predates it (404)."""
    from service.commands.client import ApiError, call

    try:
        out: dict[str, Any] = call(a, "GET", "/maintenance")
        return out
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def lines(maint: dict[str, Any] | None) -> list[str]:
    """What ``status`` adds: the cordoned brokers and the drain."""
    if not maint:
        return []
    cordoned = sorted(maint.get("cordoned") or {})
    out = [f"cordoned: {', '.join(cordoned) if cordoned else 'none'}"]
    drain = maint.get("drain")
    if drain:
        out.append(drain_line(drain))
    return out


def drain_line(d: dict[str, Any]) -> str:
    prog = d.get("progress") or {}
    moved, total = prog.get("moved", d.get("moved", 0)), prog.get("total", d.get("total", 0))
    flight = d.get("inFlight")
    now = f"; moving {flight['bundle']} -> {flight['destination']}" if flight else ""
    left = f"; {len(d['givenUp'])} left in place" if d.get("givenUp") else ""
    shut = f"; shutdown {d['shutdown']}" if d.get("shutdown") else ""
    msg = f" ({d['message']})" if d.get("message") and not flight else ""
    return f"drain of {d.get('broker')}: {d.get('state')}, {moved}/{total} moved{now}{left}{shut}{msg}"


def _bar(d: dict[str, Any]) -> str:
    prog = d.get("progress") or {}
    try:
        frac = float(prog.get("fraction", 0.0))
    except (TypeError, ValueError):
        frac = 0.0
    filled = round(min(max(frac, 0.0), 1.0) * BAR) if frac == frac else 0  # NaN: nothing filled
    return f"[{'#' * filled}{'.' * (BAR - filled)}] {prog.get('moved', 0)}/{prog.get('total', 0)}"


def run(a: argparse.Namespace, verb: str) -> int:
    from service.commands.client import call

    broker = (a.target or "").strip()
    if not broker:
        raise InvalidInput("BROKER", a.target, f"`brokers {verb}` needs the broker id (host:port)")
    if a.then_shutdown and verb != "drain":
        raise InvalidInput("--then-shutdown", True, "only with `brokers drain`")
    if (a.wait or a.timeout is not None) and verb != "drain":
        raise InvalidInput("--wait", True, "only with `brokers drain`")
    if verb == "cordon":
        r = call(a, "POST", f"/brokers/{broker}/cordon")
        return emit(a, r, lambda: f"{broker} cordoned: no new bundle goes to it; it keeps what it has")
    if verb == "uncordon":
        r = call(a, "POST", f"/brokers/{broker}/uncordon")
        return emit(a, r, lambda: f"{broker} uncordoned: placement may choose it again")
    if verb == "drain-stop":
        r = call(a, "POST", f"/brokers/{broker}/drain/stop")
        return emit(a, r, lambda: drain_line(r) + " (the broker stays cordoned)")
    if verb == "drain-status":
        r = call(a, "GET", f"/brokers/{broker}/drain")
        return emit(a, r, lambda: drain_line(r))
    body = {"thenShutdown": True} if a.then_shutdown else None
    r = call(a, "POST", f"/brokers/{broker}/drain", json=body)
    if not a.wait:
        return emit(a, r, lambda: drain_line(r))
    return _wait(a, broker, r)


def _wait(a: argparse.Namespace, broker: str, first: dict[str, Any]) -> int:
    from service.commands.client import call

    tty = sys.stderr.isatty()
    deadline = None if a.timeout is None else time.monotonic() + float(a.timeout)
    d, last = first, ""
    while True:
        shown = f"{_bar(d)} {drain_line(d)}"
        if shown != last:
            if tty:
                sys.stderr.write("\r\033[K" + shown[:200])
            else:
                sys.stderr.write(shown + "\n")
            sys.stderr.flush()
            last = shown
        if d.get("state") != "running" and not _shutdown_pending(d):
            break
        if deadline is not None and time.monotonic() >= deadline:
            if tty:
                sys.stderr.write("\n")
            print(f"loadmgr: still draining {broker} after {a.timeout} s; the drain goes on", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
        d = call(a, "GET", f"/brokers/{broker}/drain")
    if tty:
        sys.stderr.write("\n")
    emit(a, d, lambda: drain_line(d))
    if d.get("thenShutdown") and not str(d.get("shutdown") or "").startswith("requested"):
        return 1  # drained, but Pulsar's shutdown was refused or never asked
    return 0 if d.get("state") == "done" else 1


def _shutdown_pending(d: dict[str, Any]) -> bool:
    """``--then-shutdown``: the drain is done and Pulsar's shutdown is being asked for (its answer
    comes once the broker has closed): ``--wait`` waits for that outcome too."""
    return d.get("state") == "done" and bool(d.get("thenShutdown")) and not d.get("shutdown")
