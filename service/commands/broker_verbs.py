"""``loadmgr status``, ``brokers`` (with pulsar-admin's brokers verbs), ``broker-stats load-report`` and
``topics lookup``: what the cluster's brokers are doing and who owns what, over the REST API.

pulsar-admin's habits are taken as they are typed: ``brokers list [CLUSTER]``, ``brokers leader-broker``,
``brokers list-dynamic-config``, ``brokers get-dynamic-config``, ``brokers get-runtime-config``,
``brokers update-dynamic-config --config K --value V``; a broker id (``host:port``) in the same place
shows that broker. A word that is neither is refused before anything is sent.
"""

from __future__ import annotations

import argparse
from typing import Any

from balancer.errors import InvalidInput
from service.commands import maintenance
from service.commands.client import call, common_parser, run_api
from service.commands.output import emit, table
from service.commands.render import broker_table, leader_line, value_text

# pulsar-admin's `brokers` verbs, each with what it does here
BROKER_VERBS = {
    "list": "the brokers (pulsar-admin brokers list [CLUSTER])",
    "leader-broker": "the leader (GET /leader)",
    "list-dynamic-config": "the names of the dynamic keys",
    "get-dynamic-config": "the dynamic keys with their values",
    "get-runtime-config": "every key with its value in force",
    "update-dynamic-config": "--config KEY --value VALUE: change a dynamic key (PUT /config)",
}


def register(sub: Any) -> None:
    common = common_parser()
    p = sub.add_parser("status", parents=[common], help="Leader, readiness and a broker summary")
    p.set_defaults(func=_status)
    verbs = "; ".join(f"`brokers {k}`: {v}" for k, v in BROKER_VERBS.items())
    p = sub.add_parser(
        "brokers",
        parents=[common],
        help="Brokers with their load and scores; pulsar-admin's brokers verbs (list, leader-broker, "
        "get-dynamic-config, update-dynamic-config ...)",
        description=f"`loadmgr brokers` lists the brokers, `loadmgr brokers BROKER` shows one; {verbs}.",
    )
    p.add_argument(
        "broker",
        nargs="?",
        metavar="BROKER|VERB",
        help="A broker id (host:port), a maintenance verb followed by the broker (cordon, uncordon, "
        "drain, drain-stop, drain-status), or one of pulsar-admin's brokers verbs",
    )
    # One second word: the cluster for `brokers list`, the broker for a maintenance verb.
    p.add_argument(
        "cluster",
        nargs="?",
        metavar="CLUSTER|BROKER",
        help="brokers list: the cluster; cordon ...: the broker",
    )
    p.add_argument("--config", dest="config_key", help="update-dynamic-config: the Pulsar key")
    p.add_argument("--value", dest="config_value", help="update-dynamic-config: its new value")
    maintenance.add_args(p)
    p.set_defaults(func=_brokers)
    p = sub.add_parser("broker-stats", parents=[common], help="pulsar-admin broker-stats load-report")
    p.add_argument("action", choices=["load-report"], help="load-report: the brokers' load reports")
    p.add_argument("broker", nargs="?", help="Only this broker (default: every broker)")
    p.set_defaults(func=_load_report)
    p = sub.add_parser(
        "topics", parents=[common], help="pulsar-admin topics lookup: a topic's bundle and broker"
    )
    p.add_argument("action", choices=["lookup"], help="lookup: the bundle a topic hashes to, and its owner")
    p.add_argument("topic", help="persistent://tenant/namespace/topic (or tenant/namespace/topic)")
    p.set_defaults(func=_lookup)


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
                table(*broker_table(brokers)),
                *maintenance.lines(maint),
            ],
        )

    return run_api(args, go)


def _check_words(a: argparse.Namespace) -> None:
    verb = a.broker
    if verb in maintenance.VERBS:
        a.target = a.cluster
        return
    if a.cluster is not None and verb != "list":
        raise InvalidInput("CLUSTER", a.cluster, "only `brokers list` takes a cluster")
    if (a.config_key or a.config_value) and verb != "update-dynamic-config":
        raise InvalidInput("--config/--value", a.config_key, "only with `brokers update-dynamic-config`")
    if verb and verb not in BROKER_VERBS and ":" not in verb:
        verbs = ", ".join([*BROKER_VERBS, *maintenance.VERBS])
        raise InvalidInput("BROKER", verb, f"neither a broker id (host:port) nor a brokers verb ({verbs})")


def _brokers(args: argparse.Namespace) -> int:
    _check_words(args)

    def go(a: argparse.Namespace) -> int:
        verb = a.broker
        if verb in maintenance.VERBS:
            return maintenance.run(a, verb)
        if verb == "update-dynamic-config":
            return _update_dynamic_config(a)
        if verb == "leader-broker":
            leader = call(a, "GET", "/leader")
            return emit(a, leader.get("leader") or {}, lambda: leader_line(leader))
        if verb in ("get-dynamic-config", "list-dynamic-config", "get-runtime-config"):
            return _config_verb(a, verb)
        if verb and verb != "list":
            return _one_broker(a, verb)
        brokers = call(a, "GET", "/brokers")
        return emit(a, brokers, lambda: table(*broker_table(brokers)))

    return run_api(args, go)


def _config_verb(a: argparse.Namespace, verb: str) -> int:
    cfg = call(a, "GET", "/config")
    values = cfg.get("values") or {}
    dynamic = [k for k in cfg.get("dynamicKeys", []) if k in values]
    if verb == "list-dynamic-config":
        return emit(a, dynamic, lambda: "\n".join(dynamic))
    shown = {k: values[k] for k in (dynamic if verb == "get-dynamic-config" else sorted(values))}
    rows = [[k, value_text(v)] for k, v in sorted(shown.items())]
    return emit(a, shown, lambda: table(rows, ["key", "value"], left=2))


def _one_broker(a: argparse.Namespace, broker: str) -> int:
    b = call(a, "GET", f"/brokers/{broker}")
    scores = sorted((k, v) for k, v in b["scores"].items())
    return emit(
        a,
        b,
        lambda: [
            table(*broker_table([b])),
            table(scores, ["score", "value"]),
            table([[x] for x in b["bundles"]], [f"bundles ({len(b['bundles'])})"]),
        ],
    )


def _update_dynamic_config(a: argparse.Namespace) -> int:
    if not a.config_key or a.config_value is None:
        raise InvalidInput(
            "--config/--value", a.config_key, "update-dynamic-config needs --config K --value V"
        )
    key, value = a.config_key.strip(), a.config_value
    body = call(a, "PUT", "/config", json={key: value})
    now = (body.get("values") or {}).get(key)
    return emit(
        a, body, lambda: f"{key} = {value_text(now)} (dynamic; the leader applies it from its next cycle)"
    )


def _flat_rows(prefix: str, doc: Any) -> list[list[str]]:
    if isinstance(doc, dict):
        return [r for k, v in doc.items() for r in _flat_rows(f"{prefix}.{k}" if prefix else str(k), v)]
    if isinstance(doc, list):
        return (
            [[prefix, f"({len(doc)} entries)"]]
            if doc and isinstance(doc[0], dict)
            else [[prefix, value_text(doc)]]
        )
    return [[prefix, value_text(doc)]]


def _load_report(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        names = [a.broker] if a.broker else [b["broker"] for b in call(a, "GET", "/brokers")]
        reports = {n: call(a, "GET", f"/brokers/{n}").get("loadReport") or {} for n in names}

        def render() -> list[Any]:
            rows = {
                n: [r for r in _flat_rows("", rep) if not r[0].startswith("lastStats.")]
                for n, rep in reports.items()
            }
            return [table(rows[n], ["field", "value"], title=n, left=2) for n in names]

        return emit(a, reports[names[0]] if a.broker else reports, render)

    return run_api(args, go)


def _lookup(args: argparse.Namespace) -> int:
    def go(a: argparse.Namespace) -> int:
        # Pulsar's REST form (persistent/tenant/ns/topic): a "://" inside a URL path is not safe
        topic = a.topic.strip().replace("://", "/", 1)
        r = call(a, "GET", f"/lookup/{topic}")
        return emit(
            a,
            r,
            lambda: table([[r["topic"], r["bundle"], r["broker"]]], ["topic", "bundle", "broker"], left=3),
        )

    return run_api(args, go)
