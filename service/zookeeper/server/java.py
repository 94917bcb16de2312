"""Java and jars for the embedded ZooKeeper: which ``java`` runs it, which pyspark jars it needs.

Java 17+ is the project's only system prerequisite (PySpark needs it too); the ZooKeeper server jars come
from the pyspark wheel, so no download is needed.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = [
    "JAVA_INSTALL_HINT",
    "MIN_JAVA_VERSION",
    "ZooKeeperLaunchError",
    "find_java",
    "find_zookeeper_jars",
    "java_version",
]

log = logging.getLogger(__name__)

MIN_JAVA_VERSION = 17
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

_JAR_VERSION_SUFFIX = re.compile(r"-\d[^/]*\.jar$")


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
def cached_java_version(java: str) -> int | None:
    # `java -version` costs 0.1-0.3 s; a per-test zk_server fixture would pay it every time.
    return java_version(java)


def _pyspark_jars_dir() -> Path:
    try:
        import pyspark
    except ImportError as exc:
        raise ZooKeeperLaunchError(
            "pyspark is not installed; it ships the ZooKeeper jars the embedded server uses "
            "(pip install 'loadmgr[spark]', or 'pyspark>=3.5')"
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


def find_netty_jars(jars_dir: Path | None = None) -> list[Path]:
    """The Netty jars of the pyspark wheel: ZooKeeper's TLS port needs NettyServerCnxnFactory.

    The tcnative (BoringSSL) jars are left out: ZooKeeper uses the JDK's TLS provider by default.
    """
    jars_dir = jars_dir if jars_dir is not None else _pyspark_jars_dir()
    jars = [j for j in sorted(jars_dir.glob("netty-*.jar")) if "tcnative" not in j.name]
    if not any(_jar_base_name(j) == "netty-handler" for j in jars):
        raise ZooKeeperLaunchError(
            f"no netty-handler-*.jar in {jars_dir}: the embedded ZooKeeper cannot serve TLS"
        )
    return jars
