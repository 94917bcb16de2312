"""Each broker a host of its own on one machine: a Linux network namespace per broker, joined to a
bridge by a veth pair, so the NIC counters a broker reads are its own traffic's.

Pulsar's brokers read bandwidth from every usable Ethernet NIC under ``/sys/class/net`` (type 1, up;
loopback does not count). On one host every broker would read the same host NICs, and the same (zero)
figure for traffic that only crosses loopback: a strategy that weighs bandwidth (ThresholdShedder,
loadmgr's) would see equal brokers. Here each broker sees one NIC, ``eth0`` (a veth), carrying its
clients', bookie's and ZooKeeper's traffic only.

Layout, all on ``10.213.<n>.0/24`` (``n`` chosen free at start): the bridge ``lm<pid>br`` holds
``.1`` on the host side, where ZooKeeper and the bookie listen (never on a public address: the bridge
reaches only these namespaces); broker ``i`` lives in namespace ``loadmgr-<pid>-b<i>`` at ``.<10+i>``.
Clients on the host (loadmgr, the Python client, the admin client) reach the brokers through the bridge.

A broker runs under :meth:`BrokerHosts.prefix`: a private mount namespace in the broker's network
namespace, with a fresh sysfs (so ``/sys/class/net`` lists the namespace's NICs: ``ip netns exec``
does the same) and the host's cgroup hierarchies moved back under it (``ip netns exec`` would drop
them, and the JVM would then report the host's CPU instead of its own cgroup's).

Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2, util-linux's ``unshare`` and ``nsenter``.
:func:`netns_unavailable` says why not, when not.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import os
import re
import shutil
import subprocess
from pathlib import Path

from service.pulsar.runtime import PulsarLaunchError

SUBNET_PREFIX = "10.213"
_COUNTER = itertools.count()
_LOCK = Path("/run/loadmgr-netns.lock")
# Inside the new mount namespace: keep the cgroup mounts, put a sysfs of this network namespace over
# /sys, move the cgroup mounts back under it, then run the broker.
_ENTER = (
    'd=$(mktemp -d) && mount --rbind /sys/fs/cgroup "$d" && mount -t sysfs sysfs /sys '
    '&& mount --move "$d" /sys/fs/cgroup && rmdir "$d" && exec "$@"'
)


def netns_unavailable() -> str | None:
    """Why brokers cannot get hosts of their own here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (iproute2, util-linux)"
    probe = f"loadmgr-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise PulsarLaunchError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")


def _used_subnets() -> set[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    used = set()
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            net = ipaddress.ip_interface(parts[parts.index("inet") + 1]).network
            used.add(str(net.network_address))
    return used


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Namespaces and bridges of launchers that died without cleaning up (SIGKILL): their JVMs died
    with them (PR_SET_PDEATHSIG), the network objects did not. Returns what was removed."""
    removed: list[str] = []
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    for ns in names:
        m = re.fullmatch(r"loadmgr-(\d+)x\d-b\d+", ns)
        if m and not _alive(int(m.group(1))):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            removed.append(ns)
    links = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True)
    for line in links.stdout.splitlines():
        m = re.match(r"\d+: (lm(\d+)x\dbr)[:@]", line)
        if m and not _alive(int(m.group(2))):
            subprocess.run(["ip", "link", "del", m.group(1)], capture_output=True)
            removed.append(m.group(1))
    return removed


class BrokerHosts:
    """The bridge and one namespace per broker: :meth:`start`, :meth:`add` per broker, :meth:`close`."""

    def __init__(self) -> None:
        # The launcher's pid (at most 7 digits: pid_max is 2^22) tells a leftover from a live one;
        # the counter keeps two clusters of one process apart. Interface names stay <= 15 characters.
        tag = f"{os.getpid()}x{next(_COUNTER) % 10}"
        self.bridge = f"lm{tag}br"
        self._ns_prefix = f"loadmgr-{tag}-b"
        self._veth_prefix = f"lm{tag}h"
        self.subnet = ""
        self.host_address = ""
        self.namespaces: list[str] = []

    def start(self) -> str:
        """Create the bridge on a free ``10.213.<n>.0/24``; returns the host's address on it."""
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(_LOCK, "w") as lock:  # two clusters starting at once must not pick the same subnet
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_leftovers()
            used = _used_subnets()
            free = next(
                (f"{SUBNET_PREFIX}.{n}" for n in range(1, 255) if f"{SUBNET_PREFIX}.{n}.0" not in used), None
            )
            if free is None:
                raise PulsarLaunchError(f"no free subnet under {SUBNET_PREFIX}.0.0/16")
            self.subnet = free
            self.host_address = f"{free}.1"
            _ip("link", "add", self.bridge, "type", "bridge")
            try:
                _ip("addr", "add", f"{self.host_address}/24", "dev", self.bridge)
                _ip("link", "set", self.bridge, "up")
            except PulsarLaunchError:
                self.close()
                raise
        return self.host_address

    def add(self, index: int) -> str:
        """Namespace and veth for broker ``index`` (1..240); returns the broker's address."""
        if not 1 <= index <= 240:
            raise PulsarLaunchError(f"broker index {index} outside 1..240")
        ns, veth = f"{self._ns_prefix}{index}", f"{self._veth_prefix}{index}"
        address = f"{self.subnet}.{10 + index}"
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        return address

    def prefix(self, index: int) -> list[str]:
        """The command prefix that runs a broker inside namespace ``index`` (see the module's doc)."""
        ns = f"{self._ns_prefix}{index}"
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "nsenter",
            f"--net=/run/netns/{ns}",
            "sh",
            "-c",
            _ENTER,
            "sh",
        ]

    def close(self) -> None:
        """Remove every namespace (their veths go with them) and the bridge; idempotent."""
        for ns in self.namespaces:
            with contextlib.suppress(OSError):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.namespaces = []
        with contextlib.suppress(OSError):
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
