"""Records README's "Running next to a Pulsar cluster" transcript from a real run.

``python scripts/pulsar_transcript.py > /tmp/pulsar-transcript.txt`` starts ``loadmgr pulsar-cluster
--brokers 3 --broker-cpus 0.4,0.4,0.4 --skewed-load 150`` (real Pulsar 4.0.7 brokers, every bundle of
``public/skewed`` on the first), then ``loadmgr serve --mode pulsar`` with BalancedShedder, and types
the verbs the README shows: ``brokers`` 20 s in, ``dry-run``, ``decisions`` once the first cycle's
moves are all served (or 6 minutes pass), ``brokers`` again 2 minutes after that, then Ctrl-C to the
launcher. Every command's output is printed as a terminal shows it, with the time since serve started.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
LOADMGR = f"{shlex.quote(sys.executable)} -m service"
CLUSTER = "loadmgr pulsar-cluster --brokers 3 --broker-cpus 0.4,0.4,0.4 --skewed-load 150"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "130"}


def say(text: str) -> None:
    print(text, flush=True)


def typed(command: str) -> None:
    say(f"\n$ {command}")
    # as typed, no --url: serve registered itself for this checkout (the verbs find it from ROOT)
    shell = command.replace("loadmgr ", f"{LOADMGR} ", 1)
    out = subprocess.run(shell, shell=True, cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)
    say((out.stdout + out.stderr).rstrip())


def main() -> int:
    say(f"$ {CLUSTER}")
    launcher = subprocess.Popen(
        CLUSTER.replace("loadmgr ", f"{LOADMGR} ", 1),
        shell=True,
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert launcher.stdout is not None
    lines: list[str] = []
    while not any(line.lstrip().startswith("producing") for line in lines):
        line = launcher.stdout.readline()
        if not line:
            raise SystemExit("the launcher exited before its load started:\n" + "".join(lines))
        lines.append(line)
        say(line.rstrip())
    text = "".join(lines)
    zk = re.search(r"configuration store\): (\S+)", text)
    admin = re.search(r"admin:\s+(\S+)", text)
    if zk is None or admin is None:
        raise SystemExit("no ZooKeeper or admin URL in the launcher's output")
    port = 18081
    env = {
        **ENV,
        "LOADMGR_loadBalancerLoadSheddingStrategy": "BalancedShedder",
        "LOADMGR_loadBalancerLoadPlacementStrategy": "BalancedShedder",
    }
    serve_cmd = (
        f"loadmgr serve --mode pulsar --zk {zk.group(1)} --pulsar-admin-url {admin.group(1)} --port {port}"
    )
    say(
        "\n$ LOADMGR_loadBalancerLoadSheddingStrategy=BalancedShedder "
        "LOADMGR_loadBalancerLoadPlacementStrategy=BalancedShedder \\\n    " + serve_cmd
    )
    serve = subprocess.Popen(
        serve_cmd.replace("loadmgr ", f"{LOADMGR} ", 1) + " 2>/tmp/pulsar-transcript-serve.log",
        shell=True,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert serve.stdout is not None
    say(serve.stdout.readline().rstrip())
    started = time.monotonic()
    url = f"http://127.0.0.1:{port}"
    try:
        time.sleep(max(0.0, 20 - (time.monotonic() - started)))
        typed("loadmgr brokers")
        typed("loadmgr dry-run")
        deadline = started + 360
        served: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            rows = httpx.get(f"{url}/decisions", params={"limit": "50"}, timeout=10).json()["decisions"]
            moves = [d for d in rows if d.get("kind") == "shedding" and d.get("applied")]
            served = [d for d in moves if d.get("state") == "served"]
            if moves and len(served) == len(moves):
                break
            time.sleep(2)
        say(f"\n# {time.monotonic() - started:.0f} s after serve started: {len(served)} move(s) served")
        typed("loadmgr decisions")
        time.sleep(120)
        say(f"\n# {time.monotonic() - started:.0f} s after serve started")
        typed("loadmgr brokers")
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=30)
        say("\n^C (the launcher)")
        os.killpg(launcher.pid, signal.SIGINT)
        tail, _ = launcher.communicate(timeout=120)
        for line in tail.splitlines():
            if "acknowledged" in line or "stopped" in line:
                say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
