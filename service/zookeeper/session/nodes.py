"""Kazoo session with JSON nodes: typed reads, compare-and-set writes, pipelined multi-node reads.

Everything kazoo raises is translated here (:func:`~service.zookeeper.session.wire.translated`): connection
problems become :class:`~service.errors.StoreUnavailable`, lost races :class:`~service.errors.StaleWrite`.
Fenced multi-op transactions (:meth:`JsonZk.fenced`) are :mod:`service.zookeeper.session.fenced`'s.
Every node's bytes pass :mod:`service.zookeeper.session.validate` (size, depth, finite numbers) before they
are parsed; a node that fails, or whose JSON does not make the record, is skipped, logged once per
version and counted by path kind (``malformed_log``), never fatal.
Pulsar's records on top of this live in :mod:`service.zookeeper.metadata.store`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar

from kazoo.exceptions import AuthFailedError, BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState, KeeperState
from pydantic import BaseModel, ValidationError

from balancer.errors import InvalidInput
from service.errors import StaleWrite, StoreUnavailable, ZkAccessDenied
from service.settings import Settings
from service.zookeeper import paths as P
from service.zookeeper.session import bulk
from service.zookeeper.session.client import new_client
from service.zookeeper.session.fenced import Fenced
from service.zookeeper.session.security import ZkSecurity
from service.zookeeper.session.validate import BadNode, MalformedLog, decode, path_kind
from service.zookeeper.session.wire import AUTH_FAILED, Versioned, json_bytes, translated

log = logging.getLogger(__name__)
# ZooKeeper connection strings already warned about as world-writable (see connect)
_WARNED_OPEN: set[str] = set()
M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")
PIPELINE = 512  # reads in flight per batch: enough to hide the round trip, few enough to bound memory
MULTI_READ_MIN = 64  # reads of at least this many nodes go out as multiRead requests (bulk.get_many)
# Every ZooKeeper call made while shutting down waits at most this long: kazoo queues a request made
# while disconnected until it reconnects, which against a dead server is for ever. An ephemeral node
# left behind by a call that gave up goes with the session anyway.
SHUTDOWN_CALL_TIMEOUT_S = 2.0


class JsonZk:
    """Kazoo session plus JSON nodes. ``start()`` connects and creates the base paths; ``stop()`` closes.

    ``on_malformed(path, reason)`` is called once per version of every node skipped because it did
    not parse (re-reading the same bad version is silent). ``base_paths`` are the nodes ``start()``
    creates (Pulsar's layout by default: ZooKeeper-native mode plays the brokers and their leader;
    Pulsar mode passes loadmgr's own root only). A ``read_only`` session creates nothing at all and
    proves it may read instead of write: Pulsar's configuration store is never written.
    """

    def __init__(
        self,
        hosts: str,
        chroot: str = "",
        session_timeout_s: float = 10.0,
        on_malformed: Callable[[str, str], None] | None = None,
        security: ZkSecurity | None = None,
        *,
        base_paths: Sequence[str] = P.BASE_PATHS,
        read_only: bool = False,
    ) -> None:
        chroot = chroot.rstrip("/")
        if chroot and not chroot.startswith("/"):
            raise InvalidInput("zk_chroot", chroot, "must start with '/'")
        self.hosts = hosts + chroot
        self.security = security or ZkSecurity()
        self.client = new_client(self.hosts, self.security, session_timeout_s)
        self.session_timeout_s = session_timeout_s
        self.malformed_log = MalformedLog()
        self._on_malformed = on_malformed
        # Called (never blocking) when a write fenced on the leader epoch is refused because the
        # epoch moved on: the owner (the leader service) must stop leading at once.
        self.on_fenced_out: Callable[[str], None] | None = None
        self._lock = threading.Lock()
        self.read_only = read_only
        self.base_paths: tuple[str, ...] = () if read_only else tuple(base_paths)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        hosts: str | None = None,
        chroot: str | None = None,
        session_timeout_s: float | None = None,
    ) -> Self:
        """A session with the settings' ZooKeeper, TLS, credentials and ACL (``LOADMGR_ZK_*``); the
        arguments given override the settings' hosts, chroot and timeout."""
        return cls(
            settings.zk_hosts if hosts is None else hosts,
            settings.zk_chroot if chroot is None else chroot,
            settings.zk_session_timeout_s if session_timeout_s is None else session_timeout_s,
            security=ZkSecurity.from_settings(settings),
            # Pulsar mode creates nothing of Pulsar's: its brokers own those paths.
            base_paths=(P.LOADMGR,) if settings.pulsar_mode else P.BASE_PATHS,
        )

    # ---- connection -----------------------------------------------------------------------
    def start(self, timeout_s: float = 15.0) -> None:
        """Connect, create the base paths, and prove this identity may write what loadmgr wrote.

        Raises StoreUnavailable (unreachable, or TLS refused) or ZkAccessDenied (wrong credentials),
        each one line naming the hosts and the identity, with the session closed again. A connection
        that drops after the session was set up (a ZooKeeper stall, a leader election in the
        ensemble) is waited out: the first requests are retried until ``timeout_s``, or the session
        timeout if longer, has passed since the start.
        """
        deadline = time.monotonic() + max(timeout_s, self.session_timeout_s)
        try:
            self.client.start(timeout=timeout_s)
        except AuthFailedError:
            self.stop()
            raise self._login_refused() from None
        except (KazooTimeoutError, OSError) as e:
            self.stop()
            if self.client.login_refused:
                raise self._login_refused() from None
            # describe() names the transport (TLS or plain TCP): said once
            raise StoreUnavailable(
                f"cannot connect to ZooKeeper at {self.hosts} as {self.security.describe()}: "
                f"{type(e).__name__}"
            ) from None
        try:
            self._first_requests(deadline)
        except ZkAccessDenied as e:
            # kazoo returns from start() even when the server refuses SASL; the first request fails
            refused_login = (
                str(e) == AUTH_FAILED
                or self.client.login_refused
                or self.client.client_state == KeeperState.AUTH_FAILED
            )
            self.stop()
            if refused_login:
                raise self._login_refused() from None
            what = "reads" if self.read_only else "writes"
            raise ZkAccessDenied(
                f"ZooKeeper at {self.hosts} refused {what} by {self.security.describe()}: wrong "
                "zk_auth credentials, or the existing nodes' ACL does not grant this identity"
            ) from None
        except BaseException:
            self.stop()
            raise
        if self.security.open and self.hosts not in _WARNED_OPEN:
            # Once per ZooKeeper and process: every session of the demo's agents would repeat it.
            _WARNED_OPEN.add(self.hosts)
            log.warning(
                "ZooKeeper nodes created by loadmgr are world-writable (%s): anyone who reaches "
                "ZooKeeper can rewrite them, the leader node included; set LOADMGR_ZK_AUTH",
                self.security.describe(),
            )

    def _first_requests(self, deadline: float) -> None:
        """The base paths and the write probe (a read-only session: a read), retried while the
        connection is down until ``deadline``."""
        while True:
            try:
                with translated():
                    for path in self.base_paths:
                        self.client.ensure_path(path)
                    if self.read_only:
                        with contextlib.suppress(NoNodeError):  # an absent chroot reads as empty
                            self.client.get_children("/")
                    else:
                        self._probe_write()
                return
            except ZkAccessDenied:
                raise
            except StoreUnavailable as e:
                if self.client.login_refused:  # refused after start() returned: closed for good
                    raise ZkAccessDenied(AUTH_FAILED) from None
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(
                        f"ZooKeeper at {self.hosts} dropped the connection while loadmgr started and did not"
                        f" come back in time ({e})"
                    ) from None
                log.info("ZooKeeper at %s: %s while starting; retrying", self.hosts, e)
                time.sleep(0.2)

    def _login_refused(self) -> ZkAccessDenied:
        return ZkAccessDenied(
            f"ZooKeeper at {self.hosts} refused authentication of {self.security.describe()}: "
            "wrong zk_auth credentials, or the user is not in the server's JAAS Server section"
        )

    def _probe_write(self) -> None:
        # A wrong digest password is not refused at connect time (it is just another identity), so
        # create and delete a throw-away ephemeral node where loadmgr's own nodes live.
        probe = self.client.create(P.join(P.LOADMGR, "auth-probe-"), b"", ephemeral=True, sequence=True)
        with contextlib.suppress(NoNodeError):
            self.client.delete(probe)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client.stop()
        with contextlib.suppress(Exception):
            self.client.close()

    def release_if_mine(self, path: str, timeout_s: float = SHUTDOWN_CALL_TIMEOUT_S) -> bool:
        """Delete the ephemeral node at ``path`` if this session holds it, waiting at most ``timeout_s``
        for ZooKeeper (for shutdown paths); StoreUnavailable when it does not answer in time."""
        if not self.connected:
            raise StoreUnavailable(f"not connected to ZooKeeper; {path} is left to the session expiry")
        deadline = time.monotonic() + timeout_s
        with translated():
            try:
                stat = self.client.exists_async(path).get(timeout=timeout_s)
                if stat is None or stat.ephemeralOwner != self.session_id:
                    return False
                remaining = max(deadline - time.monotonic(), 0.05)
                self.client.delete_async(path, version=stat.version).get(timeout=remaining)
                return True
            except (NoNodeError, BadVersionError):
                return False

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """``fn`` gets ``"CONNECTED"``, ``"SUSPENDED"`` or ``"LOST"`` on kazoo's thread: it must not block."""

        def listener(state: KazooState) -> bool:
            fn(str(state))
            return False

        self.client.add_listener(listener)

    @property
    def malformed(self) -> Counter[str]:
        """Node path -> versions of it skipped as malformed."""
        return self.malformed_log.by_path

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return None if cid is None else int(cid[0])

    # ---- generic ----------------------------------------------------------------------------
    def ensure_parent(self, path: str) -> None:
        if self.read_only:
            raise ZkAccessDenied(f"{self.hosts} is read-only here: {path} is not written")
        with translated():
            self.client.ensure_path(P.parent(path))

    def get_json(self, path: str) -> Versioned[Any] | None:
        """The node's JSON and version; None if absent; a node that is not JSON counts as malformed."""
        with translated():
            try:
                raw, stat = self.client.get(path)
            except NoNodeError:
                return None
        return self._json(path, raw, stat)

    def get_model(self, path: str, model: type[M]) -> Versioned[M] | None:
        with translated():
            try:
                raw, stat = self.client.get(path)
            except NoNodeError:
                return None
        return self.parse_node(path, raw, stat, model.model_validate)

    def get_many(self, paths: Sequence[str]) -> dict[str, tuple[bytes, Any]]:
        """``(data, stat)`` of each existing node, with up to ``PIPELINE`` reads in flight at once.

        Reading 100,000 bundle nodes one round trip at a time takes minutes on a remote ensemble;
        pipelined it costs one round trip per batch. Absent nodes are left out.
        """
        out: dict[str, tuple[bytes, Any]] = {}
        timeout = max(self.session_timeout_s, 1.0) * 2
        if len(paths) >= MULTI_READ_MIN and bulk.supported(self.client):
            # A cycle's moves re-read thousands of nodes: multiRead answers a thousand a request.
            with translated():
                got = bulk.get_many(self.client, paths, timeout)
            return {p: g for p, g in zip(paths, got, strict=True) if g is not None}
        with translated():
            for start in range(0, len(paths), PIPELINE):
                pending = [(p, self.client.get_async(p)) for p in paths[start : start + PIPELINE]]
                for path, result in pending:
                    try:
                        out[path] = result.get(timeout=timeout)
                    except NoNodeError:
                        continue
        return out

    def get_many_json(self, paths: Sequence[str]) -> dict[str, Versioned[Any]]:
        """:meth:`get_json` of many nodes, pipelined; absent and malformed nodes are left out."""
        out: dict[str, Versioned[Any]] = {}
        for path, (raw, stat) in self.get_many(paths).items():
            got = self._json(path, raw, stat)
            if got is not None:
                out[path] = got
        return out

    def get_many_models(self, paths: Sequence[str], model: type[M]) -> dict[str, Versioned[M]]:
        """:meth:`get_model` of many nodes, pipelined; absent and malformed nodes are left out."""
        out: dict[str, Versioned[M]] = {}
        for path, (raw, stat) in self.get_many(paths).items():
            parsed = self.parse_node(path, raw, stat, model.model_validate)
            if parsed is not None:
                out[path] = parsed
        return out

    def _json(self, path: str, raw: bytes, stat: Any) -> Versioned[Any] | None:
        """The node's validated JSON with its version; None (skipped, reported) if it is not acceptable.

        A version already found bad is skipped without parsing again, so a flood of bad nodes costs
        one parse each, not one per read."""
        zxid = _zxid(stat)
        if self.malformed_log.known_bad(path, zxid):
            return None
        try:
            value = decode(raw)
        except BadNode as e:
            self._malformed(path, e.reason, zxid)
            return None
        return Versioned(value, int(stat.version))

    def parse_node(self, path: str, raw: bytes, stat: Any, parse: Callable[[Any], V]) -> Versioned[V] | None:
        """Validated JSON through ``parse``; any error ``parse`` raises (BadNode, pydantic's, a
        ValueError from a record's own checks) skips the node as malformed."""
        got = self._json(path, raw, stat)
        if got is None:
            return None
        try:
            return Versioned(parse(got.value), got.version)
        except BadNode as e:
            self._malformed(path, e.reason, _zxid(stat))
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err.get("loc", ())) or "(root)"
            self._malformed(path, f"{where}: {err['msg']}", _zxid(stat))
        except Exception as e:  # the boundary: nothing a node holds may escape as an exception
            self._malformed(path, f"{type(e).__name__}: {str(e)[:200]}", _zxid(stat))
        return None

    def put_json(self, path: str, obj: Any, version: int | None = None, ephemeral: bool = False) -> int:
        """Write ``obj``; with ``version`` a compare-and-set (``-1``: must not exist). Returns the version."""
        data = json_bytes(obj)
        with translated():
            if version is None:
                try:
                    return int(self.client.set(path, data).version)
                except NoNodeError:
                    pass
            if version is None or version == -1:
                self.client.ensure_path(P.parent(path))
                try:
                    self.client.create(path, data, ephemeral=ephemeral)
                    return 0
                except NodeExistsError:
                    if version == -1:
                        raise StaleWrite(f"{path} already exists") from None
                    return int(self.client.set(path, data).version)
            try:
                return int(self.client.set(path, data, version=version).version)
            except NoNodeError:
                raise StaleWrite(f"{path} vanished before the write") from None

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        with translated():
            try:
                self.client.delete(path, version=version, recursive=recursive)
                return True
            except NoNodeError:
                return False

    def children(self, path: str) -> list[str]:
        with translated():
            try:
                return sorted(self.client.get_children(path))
            except NoNodeError:
                return []

    def walk_ranges(self, root: str) -> list[str]:
        """Relative names (``tenant/ns/0x…_0x…``) of every bundle-range node below ``root``."""
        out: list[str] = []
        level = [""]
        while level:
            # One level at a time with every listing of the level in flight: a tree of many tenants
            # and namespaces (or an attacker's flood of them) costs one round trip per level.
            listed = self._children_many([P.join(root, rel) if rel else root for rel in level])
            deeper: list[str] = []
            for rel, children in zip(level, listed, strict=True):
                for child in children:
                    name = f"{rel}/{child}" if rel else child
                    if P.is_range(child):
                        out.append(name)
                    elif rel.count("/") < 3:  # tenant/ns or tenant/cluster/ns: never deeper
                        deeper.append(name)
            level = deeper
        return sorted(out)

    def _children_many(self, paths: Sequence[str]) -> list[list[str]]:
        """Children of each path (empty if absent), up to ``PIPELINE`` listings in flight."""
        out: list[list[str]] = []
        with translated():
            for start in range(0, len(paths), PIPELINE):
                pending = [self.client.get_children_async(p) for p in paths[start : start + PIPELINE]]
                for result in pending:
                    try:
                        out.append(sorted(result.get(timeout=max(self.session_timeout_s, 1.0) * 2)))
                    except NoNodeError:
                        out.append([])
        return out

    def fenced(self, fence: Versioned[str] | None) -> Fenced:
        return Fenced(self, fence)

    def report_fenced_out(self, why: str) -> None:
        """A fenced write was refused on the epoch check: tell whoever leads through this session."""
        if self.on_fenced_out is not None:
            self.on_fenced_out(why)

    def _malformed(self, path: str, reason: str, zxid: int = -1) -> None:
        """Skip ``path``: logged and counted once per version (``zxid``; -1 when unknown)."""
        if self.malformed_log.report(path, zxid, reason) and self._on_malformed is not None:
            self._on_malformed(path, reason)

    @staticmethod
    def kind_of(path: str) -> str:
        return path_kind(path)


def _zxid(stat: Any) -> int:
    """The zxid of the node's last modification: names one version of one node, even across re-creation."""
    try:
        return int(stat.mzxid)
    except (AttributeError, TypeError, ValueError):
        return -1
