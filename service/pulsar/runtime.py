"""Where the pinned Apache Pulsar release lives on this machine, and how its JVMs are started.

``make`` fetches the release's broker jars with Maven (``deploy/pulsar/pom.xml`` through
``scripts/fetch-pulsar.sh``) into ``~/.cache/loadmgr/pulsar-<version>/lib`` — outside git, one
directory of jars; ``LOADMGR_PULSAR_LIB`` points elsewhere. Nothing is built: Pulsar's own main
classes (``PulsarClusterMetadataSetup``, ``PulsarBrokerStarter``, BookKeeper's ``server.Main``) run
from that class path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from service.zookeeper.server.java import MIN_JAVA_VERSION, cached_java_version, find_java

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "deploy" / "pulsar" / "pom.xml"
FETCH_SCRIPT = ROOT / "scripts" / "fetch-pulsar.sh"


class PulsarLaunchError(RuntimeError):
    """The cluster could not be started; the message says what to do."""


def pulsar_version(pom: Path = POM) -> str:
    """The pinned release: ``<pulsar.version>`` of the pom ``make`` fetches with."""
    m = re.search(r"<pulsar\.version>([^<]+)</pulsar\.version>", pom.read_text(encoding="utf-8"))
    if m is None:
        raise PulsarLaunchError(f"{pom} names no <pulsar.version>")
    return m.group(1).strip()


def default_lib_dir(version: str | None = None) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "loadmgr" / f"pulsar-{version or pulsar_version()}" / "lib"


def find_pulsar_lib() -> Path:
    """The directory of the release's jars (PulsarLaunchError with the fetch command when missing)."""
    configured = os.environ.get("LOADMGR_PULSAR_LIB")
    lib = Path(configured) if configured else default_lib_dir()
    broker = list(lib.glob("pulsar-broker-[0-9]*.jar")) if lib.is_dir() else []
    if not broker:
        raise PulsarLaunchError(
            f"Apache Pulsar's jars are not in {lib}: run `make pulsar` (bash scripts/fetch-pulsar.sh), "
            "which fetches them from Maven Central"
        )
    return lib


def java_or_fail() -> str:
    java = find_java()
    version = cached_java_version(java) if java else None
    if java is None or version is None or version < MIN_JAVA_VERSION:
        raise PulsarLaunchError(f"Pulsar needs Java {MIN_JAVA_VERSION}+ (found {version or 'none'})")
    return java


# The module openings Pulsar's own bin/pulsar passes on Java 17: without them the broker cannot read
# its container's CPU metrics (jdk.internal.platform) nor some NIC and memory figures.
ADD_OPENS = [
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens=java.base/sun.net=ALL-UNNAMED",
    "--add-opens=java.management/sun.management=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.platform=ALL-UNNAMED",
]


def jvm_command(java: str, lib: Path, main: str, heap_mb: int, direct_mb: int, log_file: Path) -> list[str]:
    """``java`` with heap, direct memory and Pulsar's log4j settings for ``main``."""
    return [
        java,
        f"-Xms{min(heap_mb, 128)}m",
        f"-Xmx{heap_mb}m",
        f"-XX:MaxDirectMemorySize={direct_mb}m",
        # Two cores for three brokers and a bookie: one GC thread each, no JIT storm.
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.net.preferIPv4Stack=true",
        "-Dpulsar.log.level=info",
        f"-Dpulsar.log.file={log_file.name}",
        f"-Dpulsar.log.dir={log_file.parent}",
        *ADD_OPENS,
        "-cp",
        f"{lib}/*",
        main,
    ]
