"""``loadmgr vectors run FILE_OR_DIR...``: run behaviour vectors and report pass/fail per round.

Exit codes: 0 all passed, 1 any round failed, 2 a file could not be read or is not a JSON object
(the readable files are still run and reported).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from balancer.vectors.runner import run_vector
from service.commands.output import add_output_args, dump


def register(sub: Any) -> None:
    p = sub.add_parser("vectors", help="Run Pulsar-derived behaviour vectors")
    vsub = p.add_subparsers(dest="vectors_command", metavar="ACTION")
    vsub.required = True
    run = vsub.add_parser("run", help="Run vector files (directories are searched for *.json)")
    run.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    run.add_argument("-q", "--quiet", action="store_true", help="Print only failing rounds and the total")
    add_output_args(run)
    run.set_defaults(func=_run)


def vector_files(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The files to run, in a stable order, and errors for paths that do not exist."""
    files: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files += sorted(
                f for f in p.rglob("*.json") if f.is_file() and not f.name.upper().startswith("README")
            )
        elif p.is_file():
            files.append(p)
        else:
            errors.append(f"{raw}: no such file or directory")
    return files, errors


def _run(args: argparse.Namespace) -> int:
    files, errors = vector_files(args.paths)
    passed = failed = 0
    fmt = getattr(args, "output", "table") or "table"
    rounds: list[dict[str, Any]] = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            errors.append(f"{f}: cannot read vector: {e}")
            continue
        if not isinstance(data, dict):
            errors.append(f"{f}: not a vector (top level is {type(data).__name__}, expected an object)")
            continue
        for report in run_vector(str(f), data):
            if report.passed:
                passed += 1
            else:
                failed += 1
            if fmt != "table":
                if not (args.quiet and report.passed):
                    rounds.append(
                        {"vector": report.vector, "round": report.round, "passed": report.passed}
                        | ({} if report.passed else {"diff": report.diff})
                    )
            elif not (args.quiet and report.passed):
                print(report.line())
    for err in errors:
        print(f"ERROR {err}", file=sys.stderr)
    if fmt != "table":
        print(dump({"passed": passed, "failed": failed, "errors": errors, "rounds": rounds}, fmt))
    else:
        print(f"{passed} passed, {failed} failed")
    if errors:
        return 2
    return 1 if failed else 0
