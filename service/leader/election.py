"""Leader election through the ephemeral node ``/loadbalance/leader``, as a lease.

The kazoo state listener only records the state and wakes the election thread; it never blocks
and never touches ZooKeeper. The election thread does the work:

* SUSPENDED: :meth:`LeaderElection.is_leader` turns False at once (no decision while the
  connection is in doubt), leadership itself is kept, since the session may still be alive.
* LOST: the session and its ephemeral node are gone, so leadership is given up (``on_revoked``).
* CONNECTED again: a leader checks that the node is still its own and asks for a full re-read
  (``on_resync``) before it decides again; a non-leader tries to win.

The node carries a signature (:mod:`service.leader.identity`) binding the session that owns it and
the epoch won, written once the epoch is bumped; followers check it against the node's ``Stat``
(:meth:`LeaderElection.verified_leader`). On a secured ZooKeeper only loadmgr's identity may write
the node; a leader also checks its content each step and rewrites it if someone changed it, so
followers never learn a forged address from its own node.

On winning, the new leader bumps the leader epoch (``/loadmgr/leader-epoch``); every write of the
leader is a transaction that checks that epoch, so a replaced leader's late write fails.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from service.errors import ServiceError
from service.leader.identity import LeaderIdentity
from service.zookeeper import paths as P
from service.zookeeper.metadata.leader_node import read_epoch_owner, read_leader_node
from service.zookeeper.metadata.store import Versioned, ZkStore, translated
from service.zookeeper.session.nodes import SHUTDOWN_CALL_TIMEOUT_S

log = logging.getLogger(__name__)


class LeaderElection:
    """Campaign for ``path`` with ``{"brokerId": leader_id, "serviceUrl": service_url}``.

    ``path`` is Pulsar's ``/loadbalance/leader`` in ZooKeeper-native mode (loadmgr plays Pulsar's
    leader broker there) and loadmgr's own ``/loadmgr/leader`` in Pulsar mode, where Pulsar's brokers
    keep electing their leader on theirs (their lookups go through it)."""

    def __init__(
        self,
        store: ZkStore,
        leader_id: str,
        service_url: str,
        on_elected: Callable[[], None],
        on_revoked: Callable[[], None],
        on_resync: Callable[[], None] | None = None,
        retry_s: float = 1.0,
        identity: LeaderIdentity | None = None,
        path: str = P.LEADER,
        on_stepped_down: Callable[[str], None] | None = None,
    ) -> None:
        self._store = store
        self.path = path
        self.leader_id = leader_id
        self.service_url = service_url
        self._on_elected = on_elected
        self._on_revoked = on_revoked
        self._on_resync = on_resync
        self._on_stepped_down = on_stepped_down
        self._retry_s = retry_s
        self.identity = identity or LeaderIdentity()
        self._state = "CONNECTED"
        self._lost = False
        self._resync = False
        self._leader = False
        self._fence: Versioned[str] | None = None
        # Set (from any thread) when a write fenced on our epoch was refused: is_leader() turns False
        # at once; the election thread then gives the node up and campaigns again.
        self._fenced_out: str | None = None
        # Why this instance last stopped leading, and when (monotonic s): /readyz and the log say it.
        self.last_step_down: tuple[float, str] | None = None
        # Why this instance does not campaign now (another mode leads this ZooKeeper), or None.
        self.blocked: str | None = None
        self.fenced_out_count = 0
        self._signed: bytes | None = None  # the node's content while leading: session and epoch bound
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.terms = 0  # how many times this instance has won

    # ---- public --------------------------------------------------------------------------------
    def start(self) -> None:
        self._store.add_state_listener(self._on_state)
        self._state = "CONNECTED" if self._store.connected else "SUSPENDED"
        self._thread = threading.Thread(target=self._run, name=f"election-{self.leader_id}", daemon=True)
        self._thread.start()
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            # A step blocked on a dead ZooKeeper is failed by the store's stop(); do not wait for it.
            self._thread.join(timeout=SHUTDOWN_CALL_TIMEOUT_S)
        if self._leader:
            self._leader = False
            self._fence = None
            try:
                self._release_node()
            except Exception as e:  # the node goes with the session; a follower takes over then
                log.info("%s: leader node left to the session expiry: %s", self.leader_id, e)
            self._on_revoked()

    def is_leader(self) -> bool:
        """True only while leading on a connection that is up: callers re-check before every write."""
        return (
            self._leader
            and self._fenced_out is None
            and self._state == "CONNECTED"
            and not self._resync
            and self._store.connected
        )

    def fenced_out(self, why: str) -> None:
        """A write fenced on this leader's epoch was refused: the epoch moved on, so another writer
        (a second instance, another mode on the same ZooKeeper, a hand edit) leads now. Stop
        deciding at once; the election thread gives the node up and campaigns again. Never blocks:
        it is called from whichever thread wrote."""
        if not self._leader or self._fenced_out is not None:
            return
        self._fenced_out = why
        self._wake.set()

    @property
    def connection_state(self) -> str:
        """The last kazoo state seen: ``CONNECTED``, ``SUSPENDED`` or ``LOST``."""
        return self._state

    def leading_unconfirmed(self) -> bool:
        """Still holding leadership, but not deciding until the node is confirmed after a reconnect."""
        return self._leader and self._fenced_out is None and not self.is_leader()

    def fence(self) -> Versioned[str] | None:
        """The epoch to fence writes on, or None when this instance must not write."""
        return self._fence if self.is_leader() else None

    def leader_info(self) -> dict[str, Any] | None:
        """The leader node's content (``brokerId``, ``serviceUrl``), or None when nobody leads."""
        got = self._store.get_json(self.path)
        return got.value if got is not None and isinstance(got.value, dict) else None

    def verified_leader(self) -> tuple[str | None, str, dict[str, Any] | None]:
        """``(url, why not, node)``: the leader's URL when its node verifies against the session that
        owns it and the current epoch (see :mod:`service.leader.identity`), else None and the reason."""
        node = read_leader_node(self._store, self.path)
        if node is None:
            return None, "no leader node", None
        url, why = self.identity.verify(node.info, node.owner_session, node.epoch)
        return url, why, node.info

    def wake(self) -> None:
        self._wake.set()

    # ---- kazoo thread: record and wake, nothing else ------------------------------------------------
    def _on_state(self, state: str) -> None:
        self._state = state
        if state == "LOST":
            self._lost = True
        elif state == "SUSPENDED":
            self._resync = self._leader or self._resync
        self._wake.set()

    # ---- election thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self._retry_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._step()
            except ServiceError as e:
                log.info("election step of %s deferred: %s", self.leader_id, e)
            except Exception:
                log.exception("election step of %s failed", self.leader_id)

    def _step(self) -> None:
        if self._lost:
            self._lost = False
            if self._leader:
                log.warning("%s: ZooKeeper session lost; giving up leadership", self.leader_id)
                self._revoke()
        if self._fenced_out is not None and self._leader:
            self._step_down(self._fenced_out)
        if self._state != "CONNECTED" or not self._store.connected:
            return
        if self._leader:
            superseded = self._epoch_superseded()
            if superseded is not None:
                self._step_down(superseded)
                return
            if not self._node_is_mine():
                log.warning("%s: leader node is no longer ours; giving up leadership", self.leader_id)
                self._revoke()
                return
            self._restore_content()
            if self._resync:
                if self._on_resync is not None:
                    self._on_resync()
                self._resync = False
            return
        self._campaign()

    def _campaign(self) -> None:
        client = self._store.client
        self.blocked = self._other_mode_leads()
        if self.blocked is not None:
            return  # looked at again every retry; nothing of ours is written meanwhile
        with translated():
            try:
                # Pulsar's two fields first: the signature binds the epoch, known only once won
                client.create(self.path, self._doc(), ephemeral=True, makepath=True)
            except NodeExistsError:
                if self._node_is_mine():  # our own node survived a reconnect of the same session
                    pass
                else:
                    # Wake when the current leader's node goes away.
                    if client.exists(self.path, watch=lambda _e: self._wake.set()) is None:
                        self._wake.set()
                    return
            fence = self._store.bump_epoch(self.leader_id, self.path)
            session = self._store.session_id
            assert session is not None  # connected: create just succeeded
            signed = self.identity.document(self.leader_id, self.service_url, session, fence.version)
            self._signed = json.dumps(signed).encode()
            client.set(self.path, self._signed)
        self._fence = fence
        self._resync = False
        self._leader = True
        self.terms += 1
        log.info("%s is now the leader (epoch %d)", self.leader_id, fence.version)
        self._on_elected()

    def _node_is_mine(self) -> bool:
        with translated():
            try:
                stat = self._store.client.exists(self.path)
            except NoNodeError:
                return False
        return stat is not None and stat.ephemeralOwner == self._store.session_id

    def _doc(self) -> bytes:
        """The node's content: signed for this session and epoch once won, Pulsar's two fields before."""
        if self._leader and self._signed is not None:
            return self._signed
        return json.dumps(self.identity.document(self.leader_id, self.service_url)).encode()

    def _restore_content(self) -> None:
        # Our session still owns the node, but an open ACL lets anyone rewrite its content (e.g. to
        # point followers at their own listener): put ours back and say so.
        with translated():
            try:
                raw, _ = self._store.client.get(self.path)
            except NoNodeError:
                return
            if raw != self._doc():
                log.warning(
                    "%s: someone rewrote %s to %r; restoring it (secure ZooKeeper with LOADMGR_ZK_AUTH)",
                    self.leader_id,
                    self.path,
                    raw[:200],
                )
                self._store.client.set(self.path, self._doc())

    def _release_node(self) -> None:
        # Bounded: stop() runs on the way out, when ZooKeeper may already be gone.
        self._store.release_if_mine(self.path, SHUTDOWN_CALL_TIMEOUT_S)

    def _revoke(self) -> None:
        self._leader = False
        self._fence = None
        self._signed = None
        self._fenced_out = None
        self._on_revoked()

    def _step_down(self, why: str) -> None:
        """Stop leading because the epoch moved on: give the node up so the election is open again,
        say so, and campaign at the next step."""
        self.fenced_out_count += 1
        self.last_step_down = (time.monotonic(), why)
        log.error(
            "%s: no longer the leader: %s; stepping down from %s and campaigning again",
            self.leader_id,
            why,
            self.path,
        )
        try:
            self._release_node()
        except Exception as e:  # the node goes with the session at worst; the next step retries
            log.info("%s: leader node not released now: %s", self.leader_id, e)
        self._revoke()
        if self._on_stepped_down is not None:
            self._on_stepped_down(why)
        self._wake.set()

    def _epoch_superseded(self) -> str | None:
        """Why our epoch no longer holds (someone bumped ``/loadmgr/leader-epoch``), else None.

        Checked every step (about a second), so a leader that writes nothing (a quiet cluster)
        learns it too, not only at its next refused write."""
        if self._fence is None:
            return None
        with translated():
            stat = self._store.client.exists(P.LEADER_EPOCH)
        if stat is None:
            return f"{P.LEADER_EPOCH} was deleted"
        if int(stat.version) != self._fence.version:
            who = read_epoch_owner(self._store)
            by = f" by {who.leader_id} ({who.election_path})" if who is not None else ""
            return f"leader epoch {self._fence.version} superseded: now {int(stat.version)}{by}"
        return None

    def _other_mode_leads(self) -> str | None:
        """The reason not to campaign: the epoch was last won through another election node (the
        other mode: ``/loadbalance/leader`` is ZooKeeper-native, ``/loadmgr/leader`` Pulsar mode)
        and that node is still held. Both modes fence on the same epoch, so campaigning would cut
        the other mode's leader off mid-term (and it would cut us off in turn)."""
        owner = read_epoch_owner(self._store)
        if owner is None or owner.election_path in ("", self.path):
            return None
        with translated():
            stat = self._store.client.exists(owner.election_path)
        if stat is None:
            return None
        return (
            f"{owner.leader_id} leads this ZooKeeper in the other mode ({owner.election_path} is held, "
            f"this instance campaigns on {self.path}); not campaigning while it does"
        )
