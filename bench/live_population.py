"""The cluster ``bench/live_scale.py`` runs the leader against, written by someone else.

``--population raw`` (:class:`RawPopulation`): ``bench/raw_populate.py`` in a child process, raw kazoo
clients writing Pulsar-shaped nodes by hand (nothing of loadmgr's own write path); the child holds
the brokers' sessions and rewrites reports on request. ``--population synthetic``: the project's own
:class:`service.demo.synthetic.SyntheticCluster`, in this process (the earlier figures).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from service.zookeeper import paths as P
from service.zookeeper.metadata.store import ZkStore

HERE = Path(__file__).resolve().parent


class RawPopulation:
    """The raw populator as a child process; ``group_of`` and ``write_reports`` as the synthetic one's."""

    def __init__(
        self,
        hosts: str,
        brokers: int,
        bundles: int,
        namespaces: int,
        seed: int = 11,
        loaded_fraction: float = 0.45,
    ) -> None:
        cmd = [
            sys.executable,
            str(HERE / "raw_populate.py"),
            f"--hosts={hosts}",
            f"--brokers={brokers}",
            f"--bundles={bundles}",
            f"--namespaces={namespaces}",
            f"--seed={seed}",
            f"--loaded-fraction={loaded_fraction}",
        ]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.summary: dict[str, Any] = json.loads(self._expect("READY "))
        self.admin = ZkStore(hosts, session_timeout_s=30)
        self.admin.start()
        self.group_of = dict.fromkeys(self.admin.broker_ids())

    def _expect(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith(prefix):
            self.proc.kill()
            raise RuntimeError(f"raw populator said {line!r} (exit {self.proc.poll()}), expected {prefix!r}")
        return line[len(prefix) :]

    def write_reports(self, brokers: list[str]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("touch " + " ".join(brokers) + "\n")
        self.proc.stdin.flush()
        self._expect("DONE")

    def report_bytes(self, n: int = 5) -> int:
        sizes = [len(got[0]) for b in sorted(self.group_of)[:n] if (got := self.admin._get(P.broker_path(b)))]
        return max(sizes, default=0)

    def close(self, purge: bool = False) -> None:
        del purge  # the ZooKeeper is the bench's own and goes with it
        self.admin.stop()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
