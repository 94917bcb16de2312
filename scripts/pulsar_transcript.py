"""Records README's "Running next to a Pulsar cluster" transcript from a real run.

``python scripts/pulsar_transcript.py > /tmp/pulsar-transcript.txt`` starts ``loadmgr pulsar-cluster
--brokers 3 --broker-cpus 0.4,0.4,0.4 --skewed-load 150`` (real Pulsar 4.0.7 brokers, every bundle of
``public/skewed`` on the first), then ``loadmgr serve --mode pulsar`` with BalancedShedder, and types
the verbs the README shows: ``brokers`` 20 s in, ``dry-run``, ``decisions`` once the first cycle's
moves are all served (or 6 minutes pass), ``brokers`` again 2 minutes after that, then Ctrl-C to the
launcher. Every command's output is printed as a terminal shows it, with the time since serve started.
"""

from __future__ import annotations

import contextlib
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
        "exec " + CLUSTER.replace("loadmgr ", f"{LOADMGR} ", 1),  # its pid is the launcher, not a shell
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
        # The brokers' first load reports carry no CPU reading yet (Pulsar samples it once a minute):
        # the verbs are typed once one does, as an operator would look again.
        deadline = started + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                rows = httpx.get(f"{url}/brokers", timeout=10).json()
                if any(float((b.get("usagePercent") or {}).get("cpu", 0) or 0) > 0 for b in rows):
                    break
            time.sleep(2)
        say(f"\n# {time.monotonic() - started:.0f} s after serve started: the brokers report CPU")
        typed("loadmgr brokers")
        typed("loadmgr dry-run")
        deadline = started + 420
        ended = ("served", "unserved", "refused", "replaced", "dropped")
        moves: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            rows = httpx.get(f"{url}/decisions", params={"limit": "50"}, timeout=10).json()["decisions"]
            moves = [d for d in rows if d.get("kind") == "shedding" and d.get("state") is not None]
            if moves and all(d.get("state") in ended for d in moves):
                break
            time.sleep(2)
        states = ", ".join(sorted({str(d.get("state")) for d in moves}))
        say(f"\n# {time.monotonic() - started:.0f} s after serve started: {len(moves)} move(s), {states}")
        typed("loadmgr decisions")
        time.sleep(120)
        say(f"\n# {time.monotonic() - started:.0f} s after serve started")
        typed("loadmgr brokers")
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=30)
        say("\n^C (the launcher)")
        # Ctrl-C to the launcher itself: it stops its producers, then the cluster (a signal to its whole
        # group would reach the brokers too, while producers still send)
        os.kill(launcher.pid, signal.SIGINT)
        tail, _ = launcher.communicate(timeout=120)
        for line in tail.splitlines():
            if "acknowledged" in line or "stopped" in line:
                say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
