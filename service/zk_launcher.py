"""A real, throw-away ZooKeeper server for tests and the demo, without Docker.

The pyspark wheel (a hard dependency of this project) already ships the ZooKeeper
server jars, so all that is needed on top is a Java runtime. The server runs as a
plain ``java`` child process in standalone mode, on a free loopback port, with its
data, config and log in a private temporary directory.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, Self

__all__ = [
    "MIN_JAVA_VERSION",
    "EmbeddedZooKeeper",
    "ZooKeeperLaunchError",
    "find_java",
    "find_zookeeper_jars",
    "java_version",
]

log = logging.getLogger(__name__)

MIN_JAVA_VERSION = 17
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JAVA_INSTALL_HINT = (
    "Install a Java 17+ runtime, e.g. `apt-get install openjdk-17-jre-headless` "
    "(Debian/Ubuntu) or `brew install openjdk@17` (macOS), or point JAVA_HOME at one."
)

# Jar-name prefixes (version suffix stripped) that ZooKeeperServerMain needs at
# runtime in standalone mode with the NIO connection factory and no admin server.
# metrics-core and snappy-java are not optional: ZooKeeper 3.9 touches both while
# starting (ServerMetrics and snapshot-name handling), and fails with
# NoClassDefFoundError in a thread that dies *without* ending the JVM.
_REQUIRED_JARS = ("zookeeper", "zookeeper-jute", "slf4j-api", "metrics-core", "snappy-java")
# Logging backend: without it SLF4J falls back to NOP and a failed start leaves an
# empty log, which makes ZooKeeperLaunchError useless for diagnosis.
_LOGGING_JARS = ("log4j-slf4j2-impl", "log4j-api", "log4j-core")

# Log lines that mean the server will never come up, so we stop polling early
# instead of burning the whole start timeout.
_FATAL_LOG_PATTERNS = re.compile(
    r"NoClassDefFoundError|ClassNotFoundException|Address already in use|BindException"
)

_JAR_VERSION_SUFFIX = re.compile(r"-\d[^/]*\.jar$")

Classpath = Literal["minimal", "all"]


class ZooKeeperLaunchError(RuntimeError):
    """The embedded ZooKeeper could not be started (no/old Java, no jars, or it died)."""


def find_java() -> str | None:
    """Return the java executable to use: $JAVA_HOME/bin/java first, then PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def java_version(java: str | None = None) -> int | None:
    """Major version of ``java`` (default: :func:`find_java`), or None if absent/unparsable.

    Handles both the legacy ``1.8.0_392`` scheme (-> 8) and the modern ``17.0.15`` /
    ``21-ea`` scheme. ``-version`` writes to stderr, possibly after a
    "Picked up JAVA_TOOL_OPTIONS" line, hence the search over the combined output.
    """
    java = java or find_java()
    if java is None:
        return None
    try:
        proc = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        major = int(match.group(2))
    return major


@functools.cache
def _cached_java_version(java: str) -> int | None:
    # `java -version` costs 0.1-0.3 s; a per-test zk_server fixture would pay it every time.
    return java_version(java)


def _pyspark_jars_dir() -> Path:
    try:
        import pyspark
    except ImportError as exc:
        raise ZooKeeperLaunchError(
            "pyspark is not installed; it ships the ZooKeeper jars the embedded server uses "
            "(pip install 'pyspark>=3.5')"
        ) from exc
    return Path(pyspark.__file__).parent / "jars"


def _jar_base_name(jar: Path) -> str:
    return _JAR_VERSION_SUFFIX.sub("", jar.name)


def find_zookeeper_jars(jars_dir: Path | None = None, *, all_jars: bool = False) -> list[Path]:
    """The jars needed to run the ZooKeeper server, taken from the installed pyspark wheel.

    By default only the small subset ZooKeeper needs is returned (JVM start ~1 s
    instead of ~1.5 s with all ~280 Spark jars, and no foreign log4j config leaking
    in). ``all_jars=True`` returns every jar as a fallback for a future pyspark whose
    ZooKeeper needs something new.

    Raises ZooKeeperLaunchError if the ZooKeeper jars themselves are missing.
    """
    jars_dir = jars_dir if jars_dir is not None else _pyspark_jars_dir()
    jars = sorted(jars_dir.glob("*.jar"))
    by_base: dict[str, Path] = {}
    for jar in jars:
        # Should a wheel ever carry two versions of one artifact, keep one (the
        # last in name order) rather than put both on the classpath.
        by_base[_jar_base_name(jar)] = jar
    missing = [name for name in ("zookeeper", "zookeeper-jute") if name not in by_base]
    if missing:
        raise ZooKeeperLaunchError(
            f"no {' / '.join(n + '-*.jar' for n in missing)} in {jars_dir}; this pyspark "
            "build does not ship ZooKeeper (expected since Spark 3.x)"
        )
    if all_jars:
        return jars
    missing_required = [name for name in _REQUIRED_JARS if name not in by_base]
    if missing_required:
        # The subset no longer matches this pyspark; all jars is slower but works.
        log.warning("pyspark jars lack %s; using the full pyspark classpath for ZooKeeper", missing_required)
        return jars
    return [by_base[name] for name in (*_REQUIRED_JARS, *_LOGGING_JARS) if name in by_base]


def _free_port() -> int:
    # Inherently racy (the port can be taken before java binds it); start() retries
    # on "Address already in use" to cover that.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def four_letter_word(host: str, port: int, command: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (ruok, srvr, mntr...) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


_LOG4J2_PROPERTIES = """\
# Generated by loadmgr's EmbeddedZooKeeper; the output goes to a file, so INFO for
# ZooKeeper itself is affordable and helps when a session mysteriously expires.
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{ISO8601}} %-5p [%t] %c{{1}} - %m%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
logger.zk.name = org.apache.zookeeper
logger.zk.level = {level}
"""


class EmbeddedZooKeeper:
    """A standalone ZooKeeper server in a child ``java`` process.

    Usage::

        with EmbeddedZooKeeper() as zk:
            client = KazooClient(hosts=zk.hosts)

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
    ) -> None:
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
        self._paused = False
        self.startup_seconds: float | None = None

    # -- public API ---------------------------------------------------------------

    @property
    def hosts(self) -> str:
        """Connection string ``127.0.0.1:<port>``; only valid while started."""
        if self._port is None or self._proc is None:
            raise ZooKeeperLaunchError("EmbeddedZooKeeper is not started")
        return f"127.0.0.1:{self._port}"

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
        version = _cached_java_version(java) if java else None
        if java is None or version is None:
            where = java or "neither in $JAVA_HOME/bin nor on PATH"
            raise ZooKeeperLaunchError(f"no usable `java` ({where}). {JAVA_INSTALL_HINT}")
        if version < MIN_JAVA_VERSION:
            raise ZooKeeperLaunchError(
                f"{java} is Java {version}; the embedded ZooKeeper needs Java "
                f"{MIN_JAVA_VERSION}+. {JAVA_INSTALL_HINT}"
            )
        deadline = time.monotonic() + timeout
        classpath = self._classpath
        attempts = 0
        while True:
            attempts += 1
            jars = self._jars or find_zookeeper_jars(all_jars=classpath == "all")
            try:
                return self._start_once(java, jars, deadline)
            except _RetryableLaunchError as exc:
                # Port stolen between _free_port() and bind, or the minimal jar set
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
        return four_letter_word("127.0.0.1", self.port, word, timeout)

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

    def _write_config(self, tmpdir: Path, port: int) -> Path:
        data_dir = self._data_dir or tmpdir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        cfg = tmpdir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self._tick_time_ms}",
                    f"dataDir={data_dir}",
                    f"clientPort={port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,mntr,srvr",
                    f"minSessionTimeout={self._min_session_timeout_ms}",
                    f"maxSessionTimeout={self._max_session_timeout_ms}",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        (tmpdir / "log4j2.properties").write_text(
            _LOG4J2_PROPERTIES.format(level=self._log_level), encoding="utf-8"
        )
        return cfg

    def _java_command(self, java: str, jars: list[Path], tmpdir: Path, cfg: Path) -> list[str]:
        return [
            *_die_with_parent_prefix(),
            java,
            # Small heap, serial GC and C1-only keep start-up near one second and the
            # footprint low when several servers run in one test session.
            f"-Xmx{self._heap_mb}m",
            "-Xms32m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j2.configurationFile={tmpdir / 'log4j2.properties'}",
            # Registering logger MBeans costs start-up time for nothing we use.
            "-Dlog4j2.disable.jmx=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            # fsync-latency warnings on slow CI disks are noise for a throw-away server.
            "-Dzookeeper.fsync.warningthresholdms=5000",
            "-cp",
            os.pathsep.join(str(j) for j in jars),
            MAIN_CLASS,
            str(cfg),
        ]

    def _start_once(self, java: str, jars: list[Path], deadline: float) -> str:
        tmpdir = Path(tempfile.mkdtemp(prefix="loadmgr-zk-"))
        port = self._fixed_port or _free_port()
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
                    f"ZooKeeper on 127.0.0.1:{self._port} did not answer `ruok` in time "
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


def _die_with_parent_prefix() -> list[str]:
    """Command prefix that makes Linux SIGKILL the JVM if this process dies abruptly.

    atexit covers normal exits, but not `kill -9` of pytest or a crashed demo, which
    would otherwise leave an orphan JVM holding its port. util-linux's setpriv sets
    PR_SET_PDEATHSIG and then *execs* java, so the child pid stays the JVM's pid
    (pause()/resume() rely on that); a preexec_fn would do the same but is unsafe
    with the threads kazoo runs in this process. The death signal fires when the
    *thread* that forked exits, so it is only used from the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = _setpriv_with_pdeathsig()
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


@functools.cache
def _setpriv_with_pdeathsig() -> str | None:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    try:
        # --pdeathsig only exists since util-linux 2.33.
        help_text = subprocess.run(
            [setpriv, "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return setpriv if "--pdeathsig" in help_text else None
