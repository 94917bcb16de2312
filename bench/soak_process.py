"""A loadmgr process of the soak (``bench/soak.py``) that can be killed, frozen and started again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Proc:
    """One loadmgr process we can kill, freeze and start again with the same arguments."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name, self.cmd, self.env, self.log_dir = name, cmd, env, log_dir
        self.p: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.log_dir / f"{self.name.replace(':', '_')}.{self.starts}.log").open("wb")
        self.p = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.paused = False

    @property
    def alive(self) -> bool:
        return self.p is not None and self.p.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive:
            assert self.p is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.p.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        if self.p is not None:
            with contextlib.suppress(Exception):
                self.p.wait(timeout=10)
        self.paused = False

    def terminate(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if self.p is not None:
            try:
                self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
