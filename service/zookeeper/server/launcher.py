"""A real, throw-away ZooKeeper server for tests and the demo, without Docker.

The pyspark wheel (the `spark` extra, which `make` installs) already ships the ZooKeeper
server jars, so all that is needed on top is a Java runtime. The server runs as a
plain ``java`` child process in standalone mode, on a free loopback port, with its
data, config and log in a private temporary directory. What goes into its config files and
command line is :mod:`service.zookeeper.server.server_config`'s; this module runs and stops the process.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, Self

from service.zookeeper.server.java import (
    JAVA_INSTALL_HINT,
    MIN_JAVA_VERSION,
    ZooKeeperLaunchError,
    cached_java_version,
    find_java,
    find_netty_jars,
    find_zookeeper_jars,
    java_version,
)
from service.zookeeper.server.process import four_letter_word, free_port, port_in_use
from service.zookeeper.server.server_config import ServerTls, java_command, write_server_config

__all__ = [
    "MIN_JAVA_VERSION",
    "EmbeddedZooKeeper",
    "ZooKeeperLaunchError",
    "find_java",
    "find_zookeeper_jars",
    "four_letter_word",
    "java_version",
]

log = logging.getLogger(__name__)

# Log lines that mean the server will never come up, so we stop polling early
# instead of burning the whole start timeout.
_FATAL_LOG_PATTERNS = re.compile(
    r"NoClassDefFoundError|ClassNotFoundException|Address already in use|BindException"
)

Classpath = Literal["minimal", "all"]


class EmbeddedZooKeeper:
    """A standalone ZooKeeper server in a child ``java`` process.

    Usage::

        with EmbeddedZooKeeper() as zk:
            client = new_client(zk.hosts, ZkSecurity(), 10.0)  # service.zookeeper.session.client

    ``pause()``/``resume()`` SIGSTOP/SIGCONT the JVM, which is the closest local
    stand-in for a ZooKeeper stall or network partition: TCP connections stay up
    but nothing answers, so clients go SUSPENDED and sessions can expire.
    """

    def __init__(
        self,
        *,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        java: str | None = None,
        jars: Iterable[Path] | None = None,
        classpath: Classpath = "minimal",
        log_level: str = "INFO",
        heap_mb: int = 256,
        stop_grace: float = 5.0,
        port: int | None = None,
        data_dir: Path | str | None = None,
        tls: ServerTls | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        # ``host``: the one address the client port binds; loopback unless the clients live in network
        # namespaces of their own (service/pulsar/netns.py: the host's bridge address).
        self._host = host
        # A fixed port or data dir is for operators running `loadmgr zookeeper`; tests use free
        # ports and throw-away data so that parallel runs never collide.
        self._fixed_port = port
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._tick_time_ms = tick_time_ms
        self._min_session_timeout_ms = min_session_timeout_ms
        self._max_session_timeout_ms = max_session_timeout_ms
        self._java = java
        self._jars = list(jars) if jars is not None else None
        self._classpath: Classpath = classpath
        self._log_level = log_level
        self._heap_mb = heap_mb
        self._stop_grace = stop_grace
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._tmpdir: Path | None = None
        self._port: int | None = None
        self._tls = tls
        self._secure_port: int | None = None
        self._paused = False
        self.startup_seconds: float | None = None

    # -- public API ---------------------------------------------------------------

    @property
    def hosts(self) -> str:
        """Connection string ``<host>:<port>`` (``127.0.0.1`` unless told); only valid while started."""
        if self._port is None or self._proc is None:
            raise ZooKeeperLaunchError("EmbeddedZooKeeper is not started")
        return f"{self._host}:{self._port}"

    @property
    def secure_hosts(self) -> str:
        """``127.0.0.1:<secureClientPort>`` of a server started with ``tls``; the plain port stays
        open beside it (readiness checks and four-letter words use it)."""
        if self._secure_port is None or self._proc is None:
            raise ZooKeeperLaunchError("EmbeddedZooKeeper has no TLS port (start it with tls=ServerTls(...))")
        return f"127.0.0.1:{self._secure_port}"

    @property
    def port(self) -> int:
        if self._port is None or self._proc is None:
            raise ZooKeeperLaunchError("EmbeddedZooKeeper is not started")
        return self._port

    @property
    def pid(self) -> int:
        """PID of the java process itself (no shell in between), for signalling."""
        if self._proc is None:
            raise ZooKeeperLaunchError("EmbeddedZooKeeper is not started")
        return self._proc.pid

    @property
    def log_path(self) -> Path | None:
        return self._tmpdir / "zookeeper.log" if self._tmpdir is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused

    def start(self, timeout: float = 30.0) -> str:
        """Start the server and block until it serves requests; return ``hosts``."""
        if self._proc is not None:
            raise ZooKeeperLaunchError(f"EmbeddedZooKeeper already started on {self.hosts}")
        java = self._java or find_java()
        version = cached_java_version(java) if java else None
        if java is None or version is None:
            where = java or "neither in $JAVA_HOME/bin nor on PATH"
            raise ZooKeeperLaunchError(f"no usable `java` ({where}). {JAVA_INSTALL_HINT}")
        if version < MIN_JAVA_VERSION:
            raise ZooKeeperLaunchError(
                f"{java} is Java {version}; the embedded ZooKeeper needs Java "
                f"{MIN_JAVA_VERSION}+. {JAVA_INSTALL_HINT}"
            )
        if self._fixed_port is not None and port_in_use(self._fixed_port):
            # Checked before launching: the readiness probe would otherwise be answered by the other
            # server on that port and report ours as serving, just before ours fails to bind.
            raise ZooKeeperLaunchError(f"port {self._fixed_port} on 127.0.0.1 is already in use")
        deadline = time.monotonic() + timeout
        classpath = self._classpath
        attempts = 0
        while True:
            attempts += 1
            jars = self._jars or find_zookeeper_jars(all_jars=classpath == "all")
            if self._tls is not None and classpath == "minimal":
                jars = [*jars, *find_netty_jars()]
            try:
                return self._start_once(java, jars, deadline)
            except _RetryableLaunchError as exc:
                # Port stolen between free_port() and bind, or the minimal jar set
                # is not enough for this ZooKeeper: both deserve another go.
                if attempts >= 3 or time.monotonic() >= deadline:
                    raise ZooKeeperLaunchError(str(exc)) from None
                if exc.missing_class and self._jars is None and classpath == "minimal":
                    log.warning("minimal ZooKeeper classpath is incomplete; retrying with all jars")
                    classpath = "all"
                elif exc.missing_class:
                    raise ZooKeeperLaunchError(str(exc)) from None

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after the grace period) and clean up."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ValueError):
                atexit.unregister(self.stop)
            self._terminate(proc)
        self._port = None
        self._secure_port = None
        self._paused = False
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def pause(self) -> None:
        """SIGSTOP the JVM: the server keeps its sockets but stops answering."""
        os.kill(self.pid, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """SIGCONT the JVM after :meth:`pause`."""
        os.kill(self.pid, signal.SIGCONT)
        self._paused = False

    def command(self, word: str, timeout: float = 2.0) -> str:
        """Send a whitelisted four-letter word (ruok, srvr, mntr) to the server."""
        return four_letter_word(self._host, self.port, word, timeout)

    def log_tail(self, lines: int = 40) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return "<no log>"
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "<empty log>"

    def __enter__(self) -> Self:
        if self._proc is None:
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
        state = f"{self.hosts} pid={self.pid}" if self._proc is not None else "stopped"
        return f"<EmbeddedZooKeeper {state}>"

    # -- internals ----------------------------------------------------------------

    # _write_config and _java_command stay methods: an ensemble member overrides both.
    def _write_config(self, tmpdir: Path, port: int) -> Path:
        if self._tls is not None:
            self._secure_port = free_port()
        return write_server_config(
            tmpdir,
            port=port,
            data_dir=self._data_dir or tmpdir / "data",
            tick_time_ms=self._tick_time_ms,
            min_session_timeout_ms=self._min_session_timeout_ms,
            max_session_timeout_ms=self._max_session_timeout_ms,
            log_level=self._log_level,
            tls=self._tls,
            secure_port=self._secure_port,
            host=self._host,
        )

    def _java_command(self, java: str, jars: list[Path], tmpdir: Path, cfg: Path) -> list[str]:
        return java_command(java, jars, tmpdir, cfg, heap_mb=self._heap_mb)

    def _start_once(self, java: str, jars: list[Path], deadline: float) -> str:
        tmpdir = Path(tempfile.mkdtemp(prefix="loadmgr-zk-"))
        port = self._fixed_port or free_port()
        cfg = self._write_config(tmpdir, port)
        self._tmpdir = tmpdir
        # A file, never a PIPE: nobody drains the pipe, and a full one would block
        # the JVM's logging and freeze the server mid-test.
        self._log_file = (tmpdir / "zookeeper.log").open("wb")
        started = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                self._java_command(java, jars, tmpdir, cfg),
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                cwd=tmpdir,
                # Its own session: a terminal's Ctrl-C signals the whole foreground process group,
                # and a JVM in it would die before the clients had closed their sessions, leaving
                # every shutdown call of theirs retrying against a dead server. The JVM still dies
                # with us, through the parent-death signal or stop().
                start_new_session=True,
            )
        except OSError as exc:
            self.stop()
            raise ZooKeeperLaunchError(f"could not execute {java}: {exc}. {JAVA_INSTALL_HINT}") from exc
        self._port = port
        # Outlive neither the interpreter nor a failed test run.
        atexit.register(self.stop)
        try:
            self._wait_until_serving(deadline)
        except BaseException:
            # Includes KeyboardInterrupt: never leak a JVM from a half-finished start.
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        log.info(
            "embedded ZooKeeper on %s (pid %d) ready in %.2fs", self.hosts, self.pid, self.startup_seconds
        )
        return self.hosts

    def _wait_until_serving(self, deadline: float) -> None:
        assert self._proc is not None and self._port is not None
        last_error = "no answer yet"
        while True:
            code = self._proc.poll()
            if code is not None:
                raise self._launch_failure(f"java exited with code {code} during start-up")
            tail = self.log_tail(200)
            if _FATAL_LOG_PATTERNS.search(tail):
                raise self._launch_failure("ZooKeeper reported a fatal start-up error")
            try:
                # `ruok` is answered as soon as the listener is up, before the
                # database is loaded, so also insist that `srvr` reports a Mode.
                if self.command("ruok", timeout=1.0) == "imok" and "Mode:" in self.command(
                    "srvr", timeout=1.0
                ):
                    return
                last_error = "server not serving requests yet"
            except OSError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                raise ZooKeeperLaunchError(
                    f"ZooKeeper on {self._host}:{self._port} did not answer `ruok` in time "
                    f"({last_error}).\n--- last lines of {self.log_path} ---\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def _launch_failure(self, reason: str) -> ZooKeeperLaunchError:
        tail = self.log_tail()
        message = f"{reason}.\n--- last lines of {self.log_path} ---\n{tail}"
        if re.search(r"Address already in use|BindException", tail):
            return _RetryableLaunchError(message, missing_class=False)
        if re.search(r"NoClassDefFoundError|ClassNotFoundException", tail):
            return _RetryableLaunchError(message, missing_class=True)
        return ZooKeeperLaunchError(message)

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            # A stopped JVM holds SIGTERM pending until continued; wake it first.
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
        try:
            proc.wait(timeout=self._stop_grace)
        except subprocess.TimeoutExpired:
            log.warning("ZooKeeper pid %d ignored SIGTERM for %.1fs; killing", proc.pid, self._stop_grace)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)


class _RetryableLaunchError(ZooKeeperLaunchError):
    def __init__(self, message: str, *, missing_class: bool) -> None:
        super().__init__(message)
        self.missing_class = missing_class
