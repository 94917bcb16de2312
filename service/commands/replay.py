"""``loadmgr replay``: how would other strategies have handled the recorded history?

Spark extracts the range's per-cycle bundle traffic, the brokers present and their capacity lines
(:mod:`service.longterm.replay_extract`, any ``--master``); the simulator replays that traffic under each
strategy pair (:mod:`balancer.sim.replay`); the output (:mod:`service.commands.replay_output`) puts the
same quality metrics as ``bench/quality.py`` side by side with what the live leader did, the model's
assumptions and its error against the recorded utilisation.

Exit codes: 0 done, 2 bad arguments, 3 the history range is missing or holds fewer than two cycles.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

EXIT_OK, EXIT_BAD_ARGS, EXIT_EMPTY = 0, 2, 3
EPOCH = "1970-01-01T00:00:00Z"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="Replay recorded history under other strategies and compare with what the leader did (Spark)",
        description="Extracts per-cycle bundle traffic, brokers and capacity lines from the history with "
        "Spark, replays them through the simulator under each strategy pair and prints the quality "
        "metrics side by side with the recorded run.",
        epilog="Exit codes: 0 done, 2 bad arguments, 3 history range missing or under two cycles.",
    )
    p.add_argument(
        "--history",
        default=None,
        help="History URI (a directory, file://, hdfs://, s3a://); default: the running demo's, else "
        "./var/history",
    )
    when = p.add_mutually_exclusive_group()
    when.add_argument("--from", dest="start", default=None, help="Start, ISO-8601, inclusive (default: all)")
    when.add_argument(
        "--last",
        type=duration_ms,
        default=None,
        metavar="DURATION",
        help="Only the last DURATION before --to: 30m, 2h, 1d, 90s",
    )
    p.add_argument("--to", dest="end", default=None, help="End, ISO-8601, exclusive (default: now)")
    p.add_argument(
        "--strategy",
        action="append",
        dest="strategies",
        metavar="PAIR",
        help="Pair label (Threshold+LRUW, AvgShedder, BalancedShedder, ...) or SHEDDER+PLACEMENT; repeat for"
        " several (default: the recorded pair, every Pulsar pair and BalancedShedder)",
    )
    p.add_argument(
        "--recorded",
        metavar="SHEDDER+PLACEMENT",
        help="The pair the live leader ran (default: from the history's _loadmgr.json)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Override a recorded config key (Pulsar's name) for every replay; repeatable",
    )
    p.add_argument("--master", help="Spark master (default local[*]; under spark-submit its own)")
    p.add_argument("--seed", type=int, default=1, help="Seed of the placement's randomness (default 1)")
    p.add_argument("--json", dest="json_out", metavar="FILE", help="Write the whole comparison as JSON")
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json", "yaml"),
        default="table",
        help="Print the tables (default) or the whole comparison as JSON or YAML on stdout",
    )
    p.add_argument("--plots", metavar="DIR", help="Write one PNG per strategy: utilisation spread over time")
    p.set_defaults(func=_run)


def duration_ms(text: str) -> int:
    """``30m``, ``2h``, ``1d``, ``90s`` or ``1h30m`` in milliseconds (argparse type: a bad one is exit 2)."""
    import re

    units = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
    spec = text.strip().lower()
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration such as 30m, 2h, 1d or 1h30m")
    ms = int(sum(float(n) * units[u] for n, u in parts))
    if ms <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be longer than zero")
    return ms


def default_history() -> str:
    """The running system's history (the demo's, or a Pulsar-mode serve's), else ``./var/history``
    (where ``make run`` records)."""
    from service.demo.state import target

    demo = target()
    return demo.history if demo is not None and demo.history else "./var/history"


@dataclass
class ReplayOptions:
    history: str
    start_ms: int
    end_ms: int
    strategies: list[str] | None
    recorded: str | None
    overrides: dict[str, str]
    master: str | None
    seed: int
    json_out: str | None
    plots: str | None
    output: str = "table"


def options_from_args(args: argparse.Namespace) -> ReplayOptions:
    from balancer.errors import InvalidInput
    from service.longterm.job import parse_time

    overrides: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput("--set", item, "expected KEY=VALUE with a Pulsar config key")
        overrides[key.strip()] = value.strip()
    end = parse_time(args.end, "--to") if args.end else int(time.time() * 1000) + 1
    last = getattr(args, "last", None)
    start = end - last if last else parse_time(args.start or EPOCH, "--from")
    if start >= end:
        raise InvalidInput("--from", args.start, f"must be before --to ({args.end})")
    return ReplayOptions(
        history=args.history or default_history(),
        start_ms=start,
        end_ms=end,
        strategies=args.strategies,
        recorded=args.recorded,
        overrides=overrides,
        master=args.master,
        seed=args.seed,
        json_out=args.json_out,
        plots=args.plots,
        output=getattr(args, "output", "table") or "table",
    )


def _run(args: argparse.Namespace) -> int:
    import logging

    from balancer.errors import InvalidInput
    from service.leader.solver_output import install as quiet_solver_output
    from service.longterm.input import EmptyHistory

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    quiet_solver_output()  # the replayed planner's HiGHS line stays off the report (issue 49)
    try:
        options = options_from_args(args)
        return run(options)
    except InvalidInput as e:
        print(f"loadmgr replay: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except EmptyHistory as e:
        print(f"loadmgr replay: {e}; nothing to replay", file=sys.stderr)
        return EXIT_EMPTY


def check_range(options: ReplayOptions) -> str:
    """Says what the history holds (from its cycle manifest, without Spark) and fails at once when the
    range holds none of it, naming both, instead of a Spark run ending in "0 usable cycles"."""
    from service.longterm.history_meta import history_missing, recorded_span, span_text
    from service.longterm.input import EmptyHistory

    if history_missing(options.history):
        raise EmptyHistory(f"no history at {options.history}")
    span = recorded_span(options.history)
    held = f"the history at {options.history} {span_text(span)}"
    if span is not None and (span[1] < options.start_ms or span[0] >= options.end_ms):
        raise EmptyHistory(f"no recorded cycle in {_range_text(options)}; {held}")
    return held


def _range_text(options: ReplayOptions) -> str:
    from datetime import UTC, datetime

    def at(ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")

    start = "the beginning" if options.start_ms <= 0 else at(options.start_ms)
    return f"[{start}, {at(options.end_ms)}) UTC"


def run(options: ReplayOptions, spark: Any = None) -> int:
    from balancer.errors import InvalidInput
    from service.commands.replay_output import print_table, write_json, write_plots
    from service.longterm.input import build_spark, spark_error_line, spark_errors
    from service.longterm.replay_extract import extract, tune_session

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    from service.longterm.input import EmptyHistory

    config, recorded, config_source = recorded_setup(options)
    pairs = chosen_pairs(options.strategies, recorded)  # bad labels fail before Spark starts
    held = check_range(options)  # an empty range fails before Spark starts too
    say(f"[replay] {held}; replaying {_range_text(options)}")
    own_spark = spark is None
    spark = spark or build_spark(options.master)
    try:
        if own_spark:
            tune_session(spark)
        # A damaged file is skipped (Spark logs it), as the long-term job does; a file Spark cannot
        # read as history at all (another schema) is one line naming it.
        spark.conf.set("spark.sql.files.ignoreCorruptFiles", "true")
        t = time.monotonic()
        try:
            data = extract(spark, options.history, options.start_ms, options.end_ms, say)
        except EmptyHistory as e:
            raise EmptyHistory(f"{e} ({_range_text(options)}; {held})") from None
        except spark_errors() as e:
            raise InvalidInput(
                "--history", options.history, f"could not be read: {spark_error_line(e)}"
            ) from None
        extract_s = time.monotonic() - t
    finally:
        if own_spark:
            spark.stop()
    comparison = compare(
        data.cycles, data.lines, config, recorded, pairs, options.seed, say, decisions=data.decisions
    )
    comparison.update(
        {
            "history": options.history,
            "from_ms": options.start_ms,
            "to_ms": options.end_ms,
            "config_source": config_source,
            "extract_seconds": round(extract_s, 3),
            "extract_steps": data.steps,
        }
    )
    if options.output == "table":
        print_table(comparison)
    else:
        from service.commands.output import dump
        from service.commands.replay_output import finite

        print(dump(finite(comparison), options.output))
    try:
        if options.json_out:
            write_json(comparison, options.json_out)
            say(f"wrote {options.json_out}")
        if options.plots:
            for path in write_plots(comparison, options.plots):
                say(f"wrote {path}")
    except OSError as e:  # the table is printed already: only the files are lost
        from balancer.errors import InvalidInput

        raise InvalidInput("--json/--plots", e.filename, f"cannot write: {e.strerror}") from None
    return EXIT_OK


def recorded_setup(options: ReplayOptions) -> tuple[dict[str, Any], Any, str]:
    """(config keys for every replay, the recorded pair, where the config came from)."""
    from balancer.config import LoadBalancerConfig
    from balancer.sim.engine import StrategyPair
    from service.longterm.history_meta import read_meta

    doc, source = read_meta(options.history)
    config: dict[str, Any] = dict(doc["config"]) if doc else {}
    config.update(options.overrides)
    # Validate once here, so a bad recorded key or --set value is one clear error, not a replay crash.
    checked = LoadBalancerConfig.from_dict(config, ignore_unknown=True)
    known = LoadBalancerConfig.model_fields
    config = {k: v for k, v in config.items() if k in known}
    if options.recorded:
        shedder, sep, placement = options.recorded.partition("+")
        if not sep:
            from balancer.errors import InvalidInput

            raise InvalidInput("--recorded", options.recorded, "expected SHEDDER+PLACEMENT")
    else:
        shedder = checked.loadBalancerLoadSheddingStrategy.rsplit(".", 1)[-1]
        placement = checked.loadBalancerLoadPlacementStrategy.rsplit(".", 1)[-1]
    label = f"{shedder}+{placement} (recorded)"
    return config, StrategyPair(label, shedder, placement), source


def chosen_pairs(labels: list[str] | None, recorded: Any) -> list[Any]:
    from balancer.placement.registry import create_placement
    from balancer.shedding.registry import create_shedder
    from balancer.sim.engine import PAIRS, pair_named

    pairs = [pair_named(label) for label in labels] if labels else list(PAIRS.values())
    # The recorded pair always runs: its replay error is how far to trust the others.
    if not any((p.shedder, p.placement) == (recorded.shedder, recorded.placement) for p in pairs):
        pairs.insert(0, recorded)
    for p in pairs:  # an unknown class name is a bad argument, reported before any work
        create_placement(p.placement, create_shedder(p.shedder))
    return pairs


def compare(
    cycles: list[Any],
    lines: dict[str, Any],
    config: dict[str, Any],
    recorded: Any,
    pairs: list[Any],
    seed: int,
    say: Any,
    decisions: list[Any] | None = None,
) -> dict[str, Any]:
    """Replays every pair and scores them beside the recorded run; a JSON-able dict.

    ``decisions`` (the history's recorded decisions) tell the leader's moves from an operator's: only the
    leader's shedding moves count as the live leader's, and every replay makes the operator's moves
    itself when the operator did. Without them (older histories) the kinds are inferred and said so.
    """
    from balancer.sim.metrics import quality
    from balancer.sim.replay import (
        ASSUMPTIONS,
        LEADER_KINDS,
        OPERATOR_KINDS,
        build_model,
        model_error,
        observed_moves,
        recorded_result,
        replay,
        replay_error,
        util_spread,
    )

    steps = [b.time_ms - a.time_ms for a, b in itertools.pairwise(cycles)]
    interval_min = statistics.median(steps) / 60_000
    observed = observed_moves(cycles, decisions)
    operator = [m for m in observed if m.kind in OPERATOR_KINDS]
    # The replay's clock is the recorded one: the grace period and the averaging windows count cycles
    # of the interval the leader really ran at, which may differ from the recorded config's key.
    config = {**config, "loadBalancerSheddingIntervalMinutes": interval_min}
    model = build_model(cycles, lines)
    live = recorded_result(cycles, model, recorded, interval_min, observed)
    runs: list[dict[str, Any]] = [
        {"strategy": "live leader (recorded)", "recorded": True, **_summary(quality(live), live, util_spread)}
    ]
    errors: dict[str, Any] = {}
    for pair in pairs:
        t = time.monotonic()
        result = replay(cycles, model, pair, config, seed, operator)
        took = time.monotonic() - t
        say(f"[replay] {pair.label}: {len(result.cycles)} cycles, {len(result.moves)} moves in {took:.1f} s")
        same = (pair.shedder, pair.placement) == (recorded.shedder, recorded.placement)
        label = pair.label if not same or "(recorded" in pair.label else f"{pair.label} (recorded pair)"
        entry = {"strategy": label, "recorded": False, "recorded_pair": same, "seconds": round(took, 3)}
        runs.append(entry | _summary(quality(result), result, util_spread))
        if same:
            errors = {b: e.to_dict() for b, e in replay_error(result, cycles).items()}
    by_kind: dict[str, int] = {}
    for m in observed:
        by_kind[m.kind] = by_kind.get(m.kind, 0) + 1
    return {
        "assumptions": list(ASSUMPTIONS),
        "cycles": len(cycles),
        "interval_minutes": interval_min,
        "start_ms": cycles[0].time_ms,
        "end_ms": cycles[-1].time_ms,
        "span_minutes": (cycles[-1].time_ms - cycles[0].time_ms) / 60_000,
        "gaps": time_gaps([c.time_ms for c in cycles], statistics.median(steps)),
        # the time of each replayed state (state k is what recorded cycle k + 1 reported)
        "state_times_ms": [c.time_ms for c in cycles[1:]],
        "decisions_recorded": decisions is not None,
        "moves_by_kind": dict(sorted(by_kind.items())),
        "leader_moves": [_move_dict(m) for m in observed if m.kind in LEADER_KINDS],
        "operator_moves": [_move_dict(m) for m in operator],
        "other_moves": [
            _move_dict(m) for m in observed if m.kind not in LEADER_KINDS and m.kind not in OPERATOR_KINDS
        ],
        "brokers": sorted(model.slope),
        "bundles": len({b for c in cycles for b in c.bundles}),
        "model": {
            b: {
                "msg_rate_per_cpu_point": model.slope[b],
                "background_cpu": model.background[b],
                "relative_capacity": model.strength[b],
                "fleet_median_line": b in model.fallback,
            }
            for b in sorted(model.slope)
        },
        "recorded_strategy": recorded.label,
        "recorded_replay_error": errors,
        "model_error": {b: e.to_dict() for b, e in model_error(cycles, model).items()},
        "runs": runs,
    }


def time_gaps(times: list[int], step_ms: float, factor: float = 3.0) -> list[dict[str, Any]]:
    """Stretches with no recorded cycle: consecutive cycles more than ``factor`` usual steps apart (the
    leader stopped, lost leadership or its history writer fell behind)."""
    return [
        {"from_ms": a, "to_ms": b, "minutes": (b - a) / 60_000}
        for a, b in itertools.pairwise(times)
        if b - a > factor * step_ms
    ]


def _move_dict(m: Any) -> dict[str, Any]:
    return {
        "cycle": m.cycle,
        "time_ms": m.time_ms,
        "bundle": m.bundle,
        "source": m.source,
        "destination": m.destination,
        "kind": m.kind,
        "inferred": m.inferred,
    }


def _summary(q: Any, result: Any, spread: Any) -> dict[str, Any]:
    series = spread(result)
    return {
        "quality": q.to_dict(),
        "mean_util_spread": sum(series) / len(series) if series else 0.0,
        "util_spread": series,
        "move_cycles": sorted({m.cycle for m in result.moves}),
    }
