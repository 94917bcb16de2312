"""A replicated ZooKeeper ensemble of N members on loopback, from the same jars as the embedded server.

Each member is an :class:`~service.zookeeper.server.launcher.EmbeddedZooKeeper` run as a quorum peer
(``QuorumPeerMain``) with its own data dir and ``myid``, and a config listing every member's peer and
election port. Data dirs live under one base directory that outlives member restarts, so a member
killed and started again rejoins with its own database and transaction log, as in production.

Production Pulsar runs a 3- or 5-node ensemble; the failures that matter there (the member a
client is connected to dies, a minority or the quorum is lost) can only be reproduced with one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

from service.zookeeper.server.java import ZooKeeperLaunchError
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from service.zookeeper.server.process import four_letter_word
from service.zookeeper.server.server_config import MAIN_CLASS

log = logging.getLogger(__name__)

QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ENSEMBLE_SIZES = (1, 3, 5)


class EnsembleMember(EmbeddedZooKeeper):
    """One quorum peer: the embedded launcher's process handling with a quorum config and ``myid``.

    Unlike a standalone server a peer cannot serve before a quorum exists, so ``start()`` returns
    once the member's client listener is up; :class:`ZooKeeperEnsemble` waits for the quorum.
    """

    def __init__(
        self, myid: int, servers: dict[int, tuple[int, int]], port: int, data_dir: Path, **kw: object
    ) -> None:
        super().__init__(port=port, data_dir=data_dir, **kw)  # type: ignore[arg-type]
        self.myid = myid
        self._servers = servers
        self._member_data_dir = data_dir

    @property
    def data_dir(self) -> Path:
        return self._member_data_dir

    def mode(self) -> str | None:
        """``leader``, ``follower`` or ``standalone`` while serving; None when down or without quorum."""
        if not self.running or self.paused:
            return None
        try:
            reply = self.command("srvr", timeout=1.0)
        except OSError:
            return None
        for line in reply.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def kill(self) -> None:
        """SIGKILL the JVM (no clean shutdown, as a crashed host), then release its files."""
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.stop()

    def _write_config(self, tmpdir: Path, port: int) -> Path:
        cfg = super()._write_config(tmpdir, port)
        (self._member_data_dir / "myid").write_text(f"{self.myid}\n", encoding="ascii")
        lines = [
            # In ticks: a follower has 5 s to sync at start and may lag 2.5 s before it is dropped.
            "initLimit=10",
            "syncLimit=5",
            # Even a one-member ensemble runs as a quorum peer, so N=1 behaves like the others.
            "standaloneEnabled=false",
            "reconfigEnabled=false",
            *(
                f"server.{i}=127.0.0.1:{peer}:{election}"
                for i, (peer, election) in sorted(self._servers.items())
            ),
            "",
        ]
        with cfg.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines))
        return cfg

    def _java_command(self, java: str, jars: list[Path], tmpdir: Path, cfg: Path) -> list[str]:
        cmd = super()._java_command(java, jars, tmpdir, cfg)
        return [QUORUM_MAIN_CLASS if part == MAIN_CLASS else part for part in cmd]

    def _wait_until_serving(self, deadline: float) -> None:
        # The client listener opens before leader election; the quorum is the ensemble's to wait for.
        assert self._proc is not None and self._port is not None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise self._launch_failure(f"java exited with code {code} during start-up")
            with contextlib.suppress(OSError):
                if self.command("ruok", timeout=1.0) == "imok":
                    return
            if time.monotonic() >= deadline:
                raise ZooKeeperLaunchError(
                    f"ZooKeeper member {self.myid} on 127.0.0.1:{self._port} never opened its client port."
                    f"\n--- last lines of {self.log_path} ---\n{self.log_tail()}"
                )
            time.sleep(0.05)


def _free_ports(n: int) -> list[int]:
    # All bound at once so that no two are the same; still racy against other processes, which
    # start() covers by choosing fresh ports and retrying when a member cannot bind.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class ZooKeeperEnsemble:
    """N quorum peers on loopback; ``hosts`` is the connect string naming all of them.

    ``kill(i)``/``start_member(i)`` crash and restart member ``i`` (0-based) on its own data dir;
    ``pause(i)``/``resume(i)`` freeze it (its clients see a silent server, its peers a dead one).
    """

    def __init__(
        self,
        size: int = 3,
        *,
        base_dir: Path | str | None = None,
        tick_time_ms: int = 500,
        java: str | None = None,
        jars: Iterable[Path] | None = None,
        heap_mb: int = 128,
        log_level: str = "INFO",
    ) -> None:
        if size not in ENSEMBLE_SIZES:
            raise ValueError(f"ensemble size {size!r}: must be one of {', '.join(map(str, ENSEMBLE_SIZES))}")
        self.size = size
        self._own_base = base_dir is None
        self._base_arg = Path(base_dir) if base_dir is not None else None
        self.base_dir: Path | None = None
        self._member_kw: dict[str, object] = {
            "tick_time_ms": tick_time_ms,
            "java": java,
            "jars": list(jars) if jars is not None else None,
            "heap_mb": heap_mb,
            "log_level": log_level,
        }
        self.members: list[EnsembleMember] = []
        self.startup_seconds: float | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> str:
        """Start every member and wait until all of them serve; returns ``hosts``."""
        if self.members:
            raise ZooKeeperLaunchError("ZooKeeperEnsemble already started")
        started = time.monotonic()
        deadline = started + timeout
        self.base_dir = self._base_arg or Path(tempfile.mkdtemp(prefix="loadmgr-zk-ensemble-"))
        for attempt in range(3):
            self._make_members()
            try:
                for m in self.members:
                    m.start(timeout=max(deadline - time.monotonic(), 1.0))
                self.wait_for_quorum(max(deadline - time.monotonic(), 1.0), all_members=True)
                break
            except ZooKeeperLaunchError as exc:
                bind_failure = "Address already in use" in str(exc) or "BindException" in str(exc)
                for m in self.members:
                    m.kill()
                self.members = []
                if not bind_failure or attempt == 2 or time.monotonic() >= deadline:
                    self._remove_base()
                    raise
                log.warning("ensemble port taken; retrying with fresh ports")
            except BaseException:
                self.stop()  # KeyboardInterrupt included: never leak JVMs from a half-started ensemble
                raise
        self.startup_seconds = time.monotonic() - started
        log.info("ZooKeeper ensemble of %d at %s ready in %.2fs", self.size, self.hosts, self.startup_seconds)
        return self.hosts

    def stop(self) -> None:
        """Stop every member (SIGTERM, then SIGKILL); a base dir this ensemble made is removed."""
        for m in self.members:
            with contextlib.suppress(Exception):
                m.stop()
        self.members = []
        self._remove_base()

    def _remove_base(self) -> None:
        if self._own_base and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def _make_members(self) -> None:
        assert self.base_dir is not None
        ports = _free_ports(3 * self.size)
        servers = {i + 1: (ports[3 * i + 1], ports[3 * i + 2]) for i in range(self.size)}
        self.members = [
            EnsembleMember(
                i + 1,
                servers,
                ports[3 * i],
                self.base_dir / f"member-{i + 1}",
                **self._member_kw,
            )
            for i in range(self.size)
        ]

    # ---- state -----------------------------------------------------------------------------------------
    @property
    def hosts(self) -> str:
        """``127.0.0.1:p1,127.0.0.1:p2,...``: every member, running or not (clients pick among them)."""
        if not self.members:
            raise ZooKeeperLaunchError("ZooKeeperEnsemble is not started")
        return ",".join(f"127.0.0.1:{m._fixed_port}" for m in self.members)

    @property
    def ports(self) -> list[int]:
        return [int(m._fixed_port or 0) for m in self.members]

    def modes(self) -> list[str | None]:
        return [m.mode() for m in self.members]

    def leader_index(self) -> int | None:
        """Index of the member that is ZooKeeper's leader now, or None (no quorum)."""
        for i, mode in enumerate(self.modes()):
            if mode in ("leader", "standalone"):
                return i
        return None

    def index_of_port(self, port: int) -> int:
        return self.ports.index(port)

    def serving(self) -> list[int]:
        return [i for i, mode in enumerate(self.modes()) if mode is not None]

    def wait_for_quorum(self, timeout: float = 30.0, *, all_members: bool = False) -> float:
        """Block until a leader serves (``all_members``: every running member serves); returns seconds."""
        started = time.monotonic()
        deadline = started + timeout
        while True:
            modes = self.modes()
            want = [modes[i] for i, m in enumerate(self.members) if m.running and not m.paused]
            ok = all(want) if all_members else any(x in ("leader", "standalone") for x in modes)
            if ok and any(x in ("leader", "standalone") for x in modes):
                return time.monotonic() - started
            if time.monotonic() >= deadline:
                tails = "\n".join(f"--- member {m.myid} ---\n{m.log_tail(15)}" for m in self.members)
                raise ZooKeeperLaunchError(f"ZooKeeper ensemble has no quorum (modes {modes})\n{tails}")
            time.sleep(0.1)

    # ---- faults -------------------------------------------------------------------------------------------
    def kill(self, index: int) -> None:
        self.members[index].kill()

    def start_member(self, index: int, timeout: float = 30.0) -> None:
        """Start member ``index`` again on its own data dir and ports (it rejoins the quorum by itself)."""
        m = self.members[index]
        if not m.running:
            m.start(timeout=timeout)

    def pause(self, index: int) -> None:
        self.members[index].pause()

    def resume(self, index: int) -> None:
        self.members[index].resume()

    def txn_log_files(self) -> list[Path]:
        """Every member's transaction log files (``version-2/log.<zxid>``), for an audit."""
        if self.base_dir is None:
            return []
        return sorted(self.base_dir.glob("member-*/version-2/log.*"))

    # ---- context manager ----------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        if not self.members:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.hosts if self.members else 'stopped'} modes={self.modes()}>"


def connected_port(client: object) -> int | None:
    """Client port of the member a kazoo client is connected to now (None when disconnected)."""
    conn = getattr(client, "_connection", None)
    sock = getattr(conn, "_socket", None)
    if sock is None:
        return None
    try:
        return int(sock.getpeername()[1])
    except OSError:
        return None


def member_command(port: int, word: str) -> str:
    return four_letter_word("127.0.0.1", port, word, 1.0)
