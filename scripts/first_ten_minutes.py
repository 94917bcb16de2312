"""Regenerates the "Terminal 2" part of docs/first-ten-minutes.md from a real run.

Start ``loadmgr demo`` in one terminal (from the directory this script is then run in: verbs find the
demo started there), then run ``python scripts/first_ten_minutes.py > /tmp/terminal2.txt``: every
command of :data:`COMMANDS` runs as typed, through a real ``loadmgr`` process, and its output and exit
code are printed as the transcript shows them. ``tests/e2e/test_first_ten_minutes.py`` replays the
same commands against a living demo and fails when their exit codes or output shapes drift from the
document.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# As typed in the second terminal; `&` / `;` lines run through the shell.
COMMANDS = [
    "loadmgr status",
    "loadmgr brokers",
    "loadmgr brokers broker-1:8081",
    "loadmgr bundles --namespace acme/orders",
    "loadmgr namespaces list",
    "loadmgr namespaces create acme/payments --bundles 4",
    "loadmgr namespaces policies acme/payments --anti-affinity-group payments",
    "loadmgr namespaces list -o yaml",
    "loadmgr namespaces bundles public/default",
    "loadmgr namespaces unload public/default --bundle 0x00000000_0x10000000 -d broker-3:8083",
    "loadmgr namespaces split-bundle public/default --bundle 0x10000000_0x20000000",
    "loadmgr unload public/default/0x20000000_0x30000000",
    "loadmgr split public/default/0x30000000_0x40000000 -u",
    "loadmgr unload public/default/0x00000000_0x00000001",
    "loadmgr unload public/default",
    "loadmgr dry-run",
    "loadmgr decisions --limit 3",
    "loadmgr brokers get-dynamic-config",
    "loadmgr brokers update-dynamic-config --config loadBalancerBrokerOverloadedThresholdPercentage"
    " --value 80",
    "loadmgr brokers leader-broker",
    "loadmgr topics lookup persistent://public/default/my-topic",
    "loadmgr config show | head -6",
    "loadmgr namespaces delete acme/payments",
    "timeout -s INT 25 loadmgr agent --broker-id broker-5:8085 & sleep 12; loadmgr status; wait",
]


def loadmgr() -> str:
    """The command a shell runs for ``loadmgr``: this checkout's, whatever is on PATH."""
    return f"{shlex.quote(sys.executable)} -m service"


def run(command: str) -> tuple[str, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    shell = command.replace("loadmgr ", loadmgr() + " ")
    # one stream, as a terminal shows them: a background agent's log lines where they happen
    proc = subprocess.run(
        ["bash", "-c", shell],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    return proc.stdout.rstrip("\n"), proc.returncode


def main(argv: list[str]) -> int:
    """Every command, or only those containing one of ``argv``'s words."""
    for command in COMMANDS:
        if argv and not any(word in command for word in argv):
            continue
        out, rc = run(command)
        print(f"$ {command}")
        if out:
            print(out)
        print(f"(exit {rc})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
