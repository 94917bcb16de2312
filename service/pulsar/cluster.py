"""A real Apache Pulsar cluster on one machine: ``loadmgr pulsar-cluster`` and the ``tests/pulsar`` tier.

What runs, each a ``java`` child of this process with its own ports on 127.0.0.1 (with ``own_hosts``:
each broker in a network namespace of its own, ZooKeeper and the bookie on the host's bridge address,
see :mod:`service.pulsar.netns`):

* the metadata store: loadmgr's embedded ZooKeeper (or ``zk_hosts`` given), one store for both
  Pulsar's local metadata and its configuration store;
* ``PulsarClusterMetadataSetup`` once (cluster, ``public/default``, BookKeeper's ``/ledgers``);
* one bookie (persistent topics, and the system topics Pulsar's brokers create, need one);
* N brokers (``PulsarBrokerStarter``) running Pulsar's ``ModularLoadManagerImpl`` unless told
  otherwise, with their own shedding and auto-split **off** by default (loadmgr decides; pass
  ``broker_settings`` to run Pulsar's own load manager instead).

Each broker runs in its own cgroup (cpu + cpuacct, when ``/sys/fs/cgroup`` is writable), so the CPU
usage it reports is its own process's, not the host's; ``broker_cpus`` sets a CPU quota per broker
(heterogeneous brokers). Without cgroups every broker reports the host's CPU; without ``own_hosts``
every broker reports the host's NICs (loopback traffic is not counted).

``stop()`` (also at interpreter exit, and SIGKILL through PR_SET_PDEATHSIG when this process dies)
terminates every JVM and removes the data directory and cgroups.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from service.pulsar.broker_conf import BROKER_DEFAULTS
from service.pulsar.netns import BrokerHosts, netns_unavailable
from service.pulsar.processes import (
    CGROUP_ROOT,
    cgroups_writable,
    in_cgroup,
    terminate,
    wait_port,
    write_properties,
)
from service.pulsar.runtime import PulsarLaunchError, find_pulsar_lib, java_or_fail, jvm_command
from service.zookeeper.server.launcher import EmbeddedZooKeeper
from service.zookeeper.server.process import die_with_parent_prefix, free_port

log = logging.getLogger(__name__)


@dataclass
class BrokerProcess:
    index: int
    web_port: int
    service_port: int
    conf: Path
    log_path: Path
    cpus: float | None = None
    proc: subprocess.Popen[bytes] | None = None
    cgroup: str | None = None
    address: str = "127.0.0.1"  # its own namespace's address with ``own_hosts``

    @property
    def broker_id(self) -> str:
        """Pulsar's broker id (``advertisedAddress:webServicePort``): its node under /loadbalance/brokers."""
        return f"{self.address}:{self.web_port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.address}:{self.web_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.address}:{self.service_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class PulsarCluster:
    """``start()``, then ``brokers``, ``web_urls``, ``service_url``, ``zk_hosts``; ``stop()``."""

    brokers_count: int = 3
    cluster: str = "loadmgr"
    zk_hosts: str | None = None
    broker_heap_mb: int = 320
    broker_direct_mb: int = 256
    bookie_heap_mb: int = 256
    broker_settings: Mapping[str, str] = field(default_factory=dict)
    broker_cpus: Sequence[float] | None = None
    base_dir: Path | None = None
    default_bundles: int = 4
    start_timeout_s: float = 240.0
    # Each broker in a network namespace of its own (service/pulsar/netns.py), so the NIC it reads is
    # its own; ZooKeeper and the bookie then listen on the host's bridge address instead of loopback.
    own_hosts: bool = False
    brokers: list[BrokerProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._zk: EmbeddedZooKeeper | None = None
        self._bookie: subprocess.Popen[bytes] | None = None
        self._logs: list[IO[bytes]] = []
        self._tmp: Path | None = None
        self._lock = threading.Lock()
        self._java = ""
        self._lib = Path()
        self.bookie_port = 0
        self.startup_seconds: float | None = None
        self.cgroups = False
        self._hosts: BrokerHosts | None = None
        self.host_address = "127.0.0.1"  # where ZooKeeper and the bookie listen

    # ---- public ----------------------------------------------------------------------------------
    @property
    def web_urls(self) -> list[str]:
        return [b.web_url for b in self.brokers if b.running]

    @property
    def service_url(self) -> str:
        return ",".join(f"{b.address}:{b.service_port}" for b in self.brokers if b.running).join(
            ["pulsar://", ""]
        )

    @property
    def data_dir(self) -> Path:
        assert self._tmp is not None, "not started"
        return self._tmp

    def start(self) -> PulsarCluster:
        started = time.monotonic()
        self._lib = find_pulsar_lib()
        self._java = java_or_fail()
        self._tmp = Path(tempfile.mkdtemp(prefix="loadmgr-pulsar-", dir=self.base_dir))
        atexit.register(self.stop)
        self.cgroups = cgroups_writable()
        if self.broker_cpus is not None and not self.cgroups:
            raise PulsarLaunchError("broker CPU quotas need a writable cgroup v1 cpu/cpuacct hierarchy")
        if self.own_hosts and self.zk_hosts is not None:
            raise PulsarLaunchError(
                "own_hosts starts its own ZooKeeper on the bridge; zk_hosts cannot be given"
            )
        try:
            if self.own_hosts:
                why = netns_unavailable()
                if why is not None:
                    raise PulsarLaunchError(f"brokers on hosts of their own: {why}")
                self._hosts = BrokerHosts()
                self.host_address = self._hosts.start()
            if self.zk_hosts is None:
                self._zk = EmbeddedZooKeeper(heap_mb=256, host=self.host_address)
                self.zk_hosts = self._zk.start()
            self._setup_metadata()
            self._start_bookie()
            for _ in range(self.brokers_count):
                self._launch_broker()
            deadline = time.monotonic() + self.start_timeout_s
            for b in self.brokers:
                self._wait_ready(b, deadline)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        log.info(
            "pulsar cluster %r: %d brokers ready in %.1fs",
            self.cluster,
            len(self.brokers),
            self.startup_seconds,
        )
        return self

    def add_broker(self, cpus: float | None = None, wait: bool = True) -> BrokerProcess:
        """One more broker (a broker that joins the cluster)."""
        b = self._launch_broker(cpus)
        if wait:
            self._wait_ready(b, time.monotonic() + self.start_timeout_s)
        return b

    def stop_broker(self, broker: BrokerProcess, kill: bool = False) -> None:
        if broker.proc is not None:
            terminate(broker.proc, 0.0 if kill else 20.0)
        self._remove_cgroup(broker)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            atexit.unregister(self.stop)
        for b in self.brokers:
            with contextlib.suppress(Exception):
                self.stop_broker(b)
        if self._bookie is not None:
            terminate(self._bookie, 10.0)
            self._bookie = None
        if self._zk is not None:
            self._zk.stop()
            self._zk = None
        if self._hosts is not None:
            self._hosts.close()
            self._hosts = None
        for f in self._logs:
            with contextlib.suppress(Exception):
                f.close()
        self._logs = []
        if self._tmp is not None and not os.environ.get("LOADMGR_KEEP_PULSAR_DATA"):
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> PulsarCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, broker: BrokerProcess, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(broker.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    # ---- steps -----------------------------------------------------------------------------------
    def _run_java(
        self, main: str, args: list[str], name: str, heap_mb: int, direct_mb: int
    ) -> subprocess.Popen[bytes]:
        log_path = self.data_dir / f"{name}.log"
        out = open(log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime, closed in stop()
        self._logs.append(out)
        cmd = (
            die_with_parent_prefix()
            + jvm_command(self._java, self._lib, main, heap_mb, direct_mb, log_path)
            + args
        )
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.data_dir
        )

    def _setup_metadata(self) -> None:
        assert self.zk_hosts is not None
        store = f"zk:{self.zk_hosts}"
        web, svc = free_port(), free_port()
        proc = self._run_java(
            "org.apache.pulsar.PulsarClusterMetadataSetup",
            [
                "--cluster",
                self.cluster,
                "--metadata-store",
                store,
                "--configuration-metadata-store",
                store,
                "--web-service-url",
                f"http://127.0.0.1:{web}",
                "--broker-service-url",
                f"pulsar://127.0.0.1:{svc}",
                "--default-namespace-bundle-number",
                str(self.default_bundles),
            ],
            "metadata-setup",
            256,
            64,
        )
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            terminate(proc, 0)
            raise PulsarLaunchError("PulsarClusterMetadataSetup did not finish in 120 s") from None
        if rc != 0:
            tail = (self.data_dir / "metadata-setup.log").read_text(errors="replace")[-2000:]
            raise PulsarLaunchError(f"PulsarClusterMetadataSetup exited {rc}:\n{tail}")

    def _start_bookie(self) -> None:
        assert self.zk_hosts is not None
        self.bookie_port = free_port()
        bk = self.data_dir / "bookie"
        conf = self.data_dir / "bookkeeper.conf"
        write_properties(
            conf,
            {
                "bookiePort": str(self.bookie_port),
                "advertisedAddress": self.host_address,
                "listeningInterface": self._hosts.bridge if self._hosts is not None else "lo",
                "allowLoopback": "true",
                "metadataServiceUri": f"zk+null://{self.zk_hosts.split(',')[0]}/ledgers",
                "journalDirectories": str(bk / "journal"),
                "ledgerDirectories": str(bk / "ledgers"),
                "httpServerEnabled": "false",
                "journalSyncData": "false",
                "ledgerStorageClass": "org.apache.bookkeeper.bookie.SortedLedgerStorage",
                "diskUsageThreshold": "0.99",
                "diskUsageWarnThreshold": "0.98",
                "statsProviderClass": "org.apache.bookkeeper.stats.NullStatsProvider",
                "numAddWorkerThreads": "1",
                "numReadWorkerThreads": "1",
                "numJournalCallbackThreads": "1",
                "serverNumIOThreads": "2",
            },
        )
        self._bookie = self._run_java(
            "org.apache.bookkeeper.server.Main", ["--conf", str(conf)], "bookie", self.bookie_heap_mb, 256
        )
        wait_port(
            self.bookie_port,
            time.monotonic() + 90,
            self._bookie,
            "bookie",
            self.data_dir / "bookie.log",
            host=self.host_address,
        )

    def _launch_broker(self, cpus: float | None = None) -> BrokerProcess:
        assert self.zk_hosts is not None
        i = len(self.brokers) + 1
        if cpus is None and self.broker_cpus is not None and i <= len(self.broker_cpus):
            cpus = self.broker_cpus[i - 1]
        b = BrokerProcess(
            i,
            free_port(),
            free_port(),
            self.data_dir / f"broker-{i}.conf",
            self.data_dir / f"broker-{i}.log",
            cpus,
            address=self._hosts.add(i) if self._hosts is not None else "127.0.0.1",
        )
        settings = dict(BROKER_DEFAULTS)
        settings.update(
            {
                "clusterName": self.cluster,
                "metadataStoreUrl": f"zk:{self.zk_hosts}",
                "configurationMetadataStoreUrl": f"zk:{self.zk_hosts}",
                "brokerServicePort": str(b.service_port),
                "webServicePort": str(b.web_port),
                "bindAddress": b.address,
                "advertisedAddress": b.address,
                "defaultNumberOfNamespaceBundles": str(self.default_bundles),
            }
        )
        settings.update(self.broker_settings)
        write_properties(b.conf, settings)
        cmd = jvm_command(
            self._java,
            self._lib,
            "org.apache.pulsar.PulsarBrokerStarter",
            self.broker_heap_mb,
            self.broker_direct_mb,
            b.log_path,
        )
        cmd += ["--broker-conf", str(b.conf)]
        if self._hosts is not None:
            cmd = self._hosts.prefix(i) + cmd
        if self.cgroups:
            b.cgroup = f"loadmgr-{os.getpid()}-{b.web_port}"
            cmd = in_cgroup(b.cgroup, cpus) + cmd
        out = open(b.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._logs.append(out)
        b.proc = subprocess.Popen(
            die_with_parent_prefix() + cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.data_dir,
        )
        with self._lock:
            self.brokers.append(b)
        return b

    def _wait_ready(self, b: BrokerProcess, deadline: float) -> None:
        """Until the broker answers ``/admin/v2/brokers/ready`` (its services started)."""
        while time.monotonic() < deadline:
            if b.proc is not None and b.proc.poll() is not None:
                raise PulsarLaunchError(
                    f"broker {b.broker_id} exited {b.proc.returncode}:\n{self.log_tail(b)}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(b.web_url + "/admin/v2/brokers/ready", timeout=5).status_code == 200:
                    return
            time.sleep(0.5)
        raise PulsarLaunchError(
            f"broker {b.broker_id} not ready in {self.start_timeout_s:.0f} s:\n{self.log_tail(b)}"
        )

    def _remove_cgroup(self, b: BrokerProcess) -> None:
        if b.cgroup is None:
            return
        for ctl in ("cpu", "cpuacct"):
            with contextlib.suppress(OSError):
                (CGROUP_ROOT / ctl / b.cgroup).rmdir()
        b.cgroup = None
