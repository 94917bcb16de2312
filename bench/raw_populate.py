"""A Pulsar-shaped cluster written into ZooKeeper by raw kazoo clients, independently of loadmgr.

    .venv/bin/python bench/raw_populate.py --hosts 127.0.0.1:2181 [--brokers 1000] [--bundles 100000]

Nothing of ``service`` or ``balancer`` is imported: every node is written by hand, in the JSON shapes
Pulsar's brokers write (``LocalBrokerData``, ``BundleData``, ``LocalPolicies``, ``Policies``,
``NamespaceEphemeralData``) and the assignment nodes loadmgr's ZooKeeper-native mode reads
(``/loadmgr/assignments/<bundle>`` = ``{"broker", "source", "reason", "time"}``), so a leader reading
them reads data its own helpers never wrote. The shape differs from ``service/demo/synthetic.py`` on
purpose: Pulsar's broker ids (``10.20.x.y:8080``), ownership nodes naming the broker by its URLs only
(no ``brokerId``), Pulsar's own initial boundaries (``0xffffffff // n``), namespaces of uneven size
over several tenants, bundles spread unevenly over 45 % of the brokers with log-normal rates, CPU
following each broker's traffic, and no assignment hints (a cluster whose assignments an agent never
needed announced).

Each broker's ephemeral nodes (its report and its bundles' ownership) live in one of
``--brokers-per-session``-sized sessions, as a few hundred broker processes would hold them. The
process prints ``READY {json}`` once everything is written, then keeps the sessions until its
standard input closes (or SIGTERM); meanwhile a line ``touch <broker> ...`` rewrites those brokers'
reports (fresh ``lastUpdate`` and CPU, as their next load report) and answers ``DONE``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import sys
import time
from collections import deque
from typing import Any

from kazoo.client import KazooClient

FULL_UPPER = 0xFFFFFFFF
TXN_OPS = 500
TXN_BYTES = 512 * 1024
IN_FLIGHT = 4
NIC_KBPS = 10 * 1024 * 1024  # 10 Gbit/s in Kbit/s, Pulsar's bandwidth limit unit


class Cluster:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.brokers = [f"10.20.{i // 250}.{i % 250 + 1}:8080" for i in range(args.brokers)]
        self.rng.shuffle(self.brokers)
        self.bundles: list[str] = []
        self.layouts: dict[str, list[int]] = {}
        self.owner: dict[str, str] = {}
        self.rate: dict[str, float] = {}
        self.size: dict[str, float] = {}
        self.topics: dict[str, int] = {}
        self.sessions: list[KazooClient] = []
        self.session_of: dict[str, KazooClient] = {}

    # ---- shape ---------------------------------------------------------------------------------
    def plan(self) -> None:
        a = self.args
        # Uneven namespaces: weights 1..8, scaled to the bundle total, at least 1 bundle each.
        weights = [self.rng.choice((1, 1, 2, 2, 3, 4, 6, 8)) for _ in range(a.namespaces)]
        counts = [max(1, a.bundles * w // sum(weights)) for w in weights]
        counts[-1] += a.bundles - sum(counts)
        for i, n in enumerate(counts):
            ns = f"tenant-{i % a.tenants:02d}/ns-{i:04d}"
            seg = FULL_UPPER // n
            bounds = [seg * k for k in range(n)] + [FULL_UPPER]
            self.layouts[ns] = bounds
            self.bundles += [f"{ns}/0x{bounds[k]:08x}_0x{bounds[k + 1]:08x}" for k in range(n)]
        loaded = self.brokers[: max(1, int(len(self.brokers) * a.loaded_fraction))]
        share = [self.rng.lognormvariate(0, 0.5) for _ in loaded]
        cum = list(_accumulate(share))
        for b in self.bundles:
            x = self.rng.random() * cum[-1]
            self.owner[b] = loaded[_bisect(cum, x)]
            self.rate[b] = self.rng.lognormvariate(math.log(60), 0.9)
            self.size[b] = self.rng.choice((256.0, 1024.0, 4096.0))
            self.topics[b] = self.rng.randint(1, 12)

    # ---- documents, by hand ----------------------------------------------------------------------
    def report(self, broker: str, owned: list[str], now: int) -> dict[str, Any]:
        host = broker.rsplit(":", 1)[0]
        rate_in = sum(self.rate[b] for b in owned)
        thr_in = sum(self.rate[b] * self.size[b] for b in owned)
        cpu = (5.0 + min(90.0, rate_in / 250.0) if owned else 3.0) + self.rng.random() * 4
        last_stats = {
            b: {
                "msgRateIn": self.rate[b],
                "msgThroughputIn": self.rate[b] * self.size[b],
                "msgRateOut": self.rate[b] * 2,
                "msgThroughputOut": self.rate[b] * self.size[b] * 2,
                "consumerCount": self.topics[b] * 2,
                "producerCount": self.topics[b],
                "topics": self.topics[b],
                "cacheSize": 0,
            }
            for b in owned
        }
        return {
            "webServiceUrl": f"http://{broker}",
            "webServiceUrlTls": None,
            "pulsarServiceUrl": f"pulsar://{host}:6650",
            "pulsarServiceUrlTls": None,
            "persistentTopicsEnabled": True,
            "nonPersistentTopicsEnabled": True,
            "cpu": {"usage": cpu * 4, "limit": 400.0},
            "memory": {"usage": 2048.0 + self.rng.random() * 1024, "limit": 8192.0},
            "directMemory": {"usage": 512.0, "limit": 4096.0},
            "bandwidthIn": {"usage": thr_in * 8 / 1024, "limit": NIC_KBPS},
            "bandwidthOut": {"usage": thr_in * 16 / 1024, "limit": NIC_KBPS},
            "msgThroughputIn": thr_in,
            "msgThroughputOut": thr_in * 2,
            "msgRateIn": rate_in,
            "msgRateOut": rate_in * 2,
            "lastUpdate": now,
            "lastStats": last_stats,
            "numTopics": sum(self.topics[b] for b in owned),
            "numBundles": len(owned),
            "numConsumers": sum(self.topics[b] * 2 for b in owned),
            "numProducers": sum(self.topics[b] for b in owned),
            "bundles": owned,
            "lastBundleGains": [],
            "lastBundleLosses": [],
            "brokerVersionString": "3.3.2",
            "protocols": {},
            "advertisedListeners": {},
            "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
            "startTimestamp": now - 3_600_000,
            "maxResourceUsage": cpu / 100,
            "loadReportType": "LocalBrokerData",
        }

    def bundle_data(self, b: str) -> dict[str, Any]:
        def window(max_samples: int) -> dict[str, Any]:
            return {
                "maxSamples": max_samples,
                "numSamples": min(max_samples, 60),
                "msgThroughputIn": self.rate[b] * self.size[b],
                "msgThroughputOut": self.rate[b] * self.size[b] * 2,
                "msgRateIn": self.rate[b],
                "msgRateOut": self.rate[b] * 2,
            }

        return {"shortTermData": window(10), "longTermData": window(1000), "topics": self.topics[b]}

    @staticmethod
    def owner_node(broker: str) -> dict[str, Any]:
        host = broker.rsplit(":", 1)[0]
        return {
            "nativeUrl": f"pulsar://{host}:6650",
            "nativeUrlTls": None,
            "httpUrl": f"http://{broker}",
            "httpUrlTls": None,
            "disabled": False,
            "advertisedListeners": {},
        }

    # ---- writing -------------------------------------------------------------------------------
    def connect(self) -> KazooClient:
        zk = KazooClient(hosts=self.args.hosts, timeout=self.args.session_timeout)
        zk.start(timeout=30)
        return zk

    def populate(self) -> dict[str, Any]:
        t0 = time.monotonic()
        admin = self.connect()
        self.sessions.append(admin)
        now = int(time.time() * 1000)
        dirs: set[str] = set()
        for root in (
            "/loadbalance/brokers",
            "/loadbalance/bundle-data",
            "/namespace",
            "/loadmgr/assignments",
        ):
            dirs.add(root)
            for ns in self.layouts:
                tenant = ns.split("/")[0]
                dirs.update({f"{root}/{tenant}", f"{root}/{ns}"} if root != "/loadbalance/brokers" else set())
        for ns in self.layouts:
            dirs.update({f"/admin/local-policies/{ns.split('/')[0]}", f"/admin/policies/{ns.split('/')[0]}"})
        for d in sorted(dirs, key=lambda p: (p.count("/"), p)):
            admin.ensure_path(d)
        persistent: list[tuple[str, bytes]] = []
        for ns, bounds in self.layouts.items():
            hexes = [f"0x{x:08x}" for x in bounds]
            bundles = {"boundaries": hexes, "numBundles": len(bounds) - 1}
            local = {"bundles": bundles, "bookieAffinityGroup": None, "namespaceAntiAffinityGroup": None}
            persistent.append((f"/admin/local-policies/{ns}", _j(local)))
            policies = {"bundles": bundles, "replication_clusters": ["standalone"], "deleted": False}
            persistent.append((f"/admin/policies/{ns}", _j(policies)))
        for tenant in sorted({ns.split("/")[0] for ns in self.layouts}):
            info = {"adminRoles": [], "allowedClusters": ["standalone"]}
            admin.set(f"/admin/policies/{tenant}", _j(info))
        for b in self.bundles:
            doc = {"broker": self.owner[b], "source": None, "reason": "restored from backup", "time": now}
            persistent.append((f"/loadmgr/assignments/{b}", _j(doc)))
            persistent.append((f"/loadbalance/bundle-data/{b}", _j(self.bundle_data(b))))
        _create_all(admin, persistent, ephemeral=False)
        written = len(persistent)
        per = self.args.brokers_per_session
        for start in range(0, len(self.brokers), per):
            group = self.brokers[start : start + per]
            zk = self.connect()
            self.sessions.append(zk)
            for broker in group:
                self.session_of[broker] = zk
            members = set(group)
            owned = [
                (f"/namespace/{b}", _j(self.owner_node(o))) for b, o in self.owner.items() if o in members
            ]
            _create_all(zk, owned, ephemeral=True)
            written += len(owned)
        written += self.write_reports(self.brokers, create=True)
        return {
            "brokers": len(self.brokers),
            "bundles": len(self.bundles),
            "namespaces": len(self.layouts),
            "loaded_brokers": len(set(self.owner.values())),
            "max_bundles_per_broker": max(_counts(self.owner).values()),
            "nodes_written": written,
            "seconds": round(time.monotonic() - t0, 1),
        }

    def write_reports(self, brokers: list[str], create: bool = False) -> int:
        owned: dict[str, list[str]] = {b: [] for b in brokers}
        for bundle, broker in self.owner.items():
            if broker in owned:
                owned[broker].append(bundle)
        now = int(time.time() * 1000)
        by_session: dict[int, tuple[KazooClient, list[tuple[str, bytes]]]] = {}
        for broker in brokers:
            zk = self.session_of[broker]
            doc = _j(self.report(broker, sorted(owned[broker]), now))
            by_session.setdefault(id(zk), (zk, []))[1].append((f"/loadbalance/brokers/{broker}", doc))
        for zk, nodes in by_session.values():
            if create:
                _create_all(zk, nodes, ephemeral=True)
            else:
                _set_all(zk, nodes)
        return len(brokers)

    def close(self) -> None:
        for zk in self.sessions:
            try:
                zk.stop()
                zk.close()
            except Exception:
                pass


def _j(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _accumulate(xs: list[float]) -> list[float]:
    out, s = [], 0.0
    for x in xs:
        s += x
        out.append(s)
    return out


def _bisect(cum: list[float], x: float) -> int:
    lo, hi = 0, len(cum) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _counts(owner: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in owner.values():
        out[o] = out.get(o, 0) + 1
    return out


def _batches(nodes: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
    out: list[list[tuple[str, bytes]]] = []
    cur: list[tuple[str, bytes]] = []
    size = 0
    for path, data in nodes:
        n = len(path) + len(data) + 64
        if cur and (len(cur) >= TXN_OPS or size + n > TXN_BYTES):
            out.append(cur)
            cur, size = [], 0
        cur.append((path, data))
        size += n
    if cur:
        out.append(cur)
    return out


def _commit(zk: KazooClient, batches: list[list[tuple[str, bytes]]], add: Any) -> None:
    window: deque[Any] = deque()
    for batch in batches:
        tx = zk.transaction()
        for path, data in batch:
            add(tx, path, data)
        window.append((batch, tx.commit_async()))
        while len(window) >= IN_FLIGHT or (window and batch is batches[-1]):
            first, result = window.popleft()
            bad = [r for r in result.get(timeout=120) if isinstance(r, Exception)]
            if bad:
                raise RuntimeError(
                    f"transaction of {len(first)} writes from {first[0][0]} failed: {bad[0]!r}"
                )


def _create_all(zk: KazooClient, nodes: list[tuple[str, bytes]], ephemeral: bool) -> None:
    _commit(zk, _batches(nodes), lambda tx, p, d: tx.create(p, d, ephemeral=ephemeral))


def _set_all(zk: KazooClient, nodes: list[tuple[str, bytes]]) -> None:
    _commit(zk, _batches(nodes), lambda tx, p, d: tx.set_data(p, d))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--bundles", type=int, default=100_000)
    ap.add_argument("--namespaces", type=int, default=100)
    ap.add_argument("--tenants", type=int, default=10)
    ap.add_argument("--loaded-fraction", type=float, default=0.45)
    ap.add_argument("--brokers-per-session", type=int, default=20)
    ap.add_argument("--session-timeout", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    if args.brokers < 1 or args.namespaces < 1 or args.bundles < args.namespaces:
        ap.error(f"need brokers >= 1 and bundles >= namespaces >= 1 (got {args.brokers=}, {args.bundles=})")
    cluster = Cluster(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        cluster.plan()
        summary = cluster.populate()
        print("READY " + json.dumps(summary), flush=True)
        for line in sys.stdin:
            words = line.split()
            if words and words[0] == "touch":
                cluster.write_reports([b for b in words[1:] if b in cluster.session_of])
                print("DONE", flush=True)
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
