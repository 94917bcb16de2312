"""Carrying out the leader's decisions: unload (move) and split a bundle.

Two implementations of one :class:`Executor` protocol:

* :class:`ZkExecutor` writes the leader's intent into ZooKeeper (``docs/ownership.md``): an unload
  rewrites the bundle's assignment node, a split rewrites the namespace's bundle layout and assigns
  the children. Every write is fenced on the leader epoch, so a leader that has been replaced cannot
  write; a cycle's moves go out together (:meth:`ZkExecutor.unload_many`, fenced batches of
  :mod:`service.zookeeper.session.batch`). Brokers' agents act on what it wrote.
* :class:`service.pulsar.admin.PulsarAdminExecutor` drives a real Pulsar cluster through its admin
  REST API (Pulsar mode).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from balancer.bundles import bundle_name, split_bundle_name
from balancer.errors import InvalidInput, UnknownBundle
from service.errors import StaleWrite
from service.zookeeper import paths as P
from service.zookeeper.metadata.store import Assignment, Versioned, ZkStore
from service.zookeeper.session.batch import BatchResult, Op, commit_batches

log = logging.getLogger(__name__)

SPECIFIED = "specified_positions_divide"


class Executor(Protocol):
    """Carries out moves and splits. ``remote_split``: the far side computes split boundaries itself."""

    name: str
    remote_split: bool

    def prepare(self, bundle: str, destination: str | None) -> None:
        """Ready ``destination`` for ``bundle`` before the move is sent (Pulsar mode: warm a broker that
        just joined, which may take seconds). The move's start is counted from after it."""
        ...

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        """Move ``bundle`` off ``source``: to ``destination``, or wherever placement puts it when None."""
        ...

    def split(
        self, bundle: str, algorithm: str | None, positions: Sequence[int] | None, unload: bool = False
    ) -> list[str]:
        """Replace ``bundle`` by its children; returns the children's names when known locally."""
        ...


class ZkExecutor:
    """Writes assignments and layouts into ZooKeeper, fenced on the leader epoch ``fence()`` returns."""

    name = "zookeeper"
    remote_split = False

    def __init__(
        self,
        store: ZkStore,
        fence: Callable[[], Versioned[str] | None],
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._store = store
        self._fence = fence
        self._clock_ms = clock_ms

    def current_fence(self) -> Versioned[str]:
        fence = self._fence()
        if fence is None:
            raise StaleWrite("not the leader: no leader epoch to fence the write on")
        return fence

    def prepare(self, bundle: str, destination: str | None) -> None:
        """Nothing to ready: the destination's agent takes the bundle as soon as it sees the assignment."""

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        """Point the assignment at ``destination``; without one, drop it so the bundle is placed afresh."""
        tx = self._store.fenced(self.current_fence())
        path = P.assignment_path(bundle)
        if destination is None:
            got = self._store.get_json(path)
            if got is not None:
                tx.delete(path, got.version)
        else:
            doc = ZkStore.assignment_doc(Assignment(destination, source, reason, self._clock_ms()))
            tx.upsert_json(path, doc).hint(destination, bundle)
        tx.commit()

    def unload_many(
        self,
        moves: Iterable[tuple[str, str | None, str | None, str]],
        assignments: Mapping[str, Versioned[Assignment]],
        written: dict[str, Assignment] | None = None,
    ) -> BatchResult:
        """:meth:`unload` of many ``(bundle, source, destination, reason)`` in fenced batches.

        Each write is compare-and-set on the assignment version in ``assignments`` (the leader's
        view): a bundle whose assignment changed since is refused, not overwritten. An op's ``key``
        is its bundle; ``Op.data`` is the assignment document written (empty for a delete).
        ``written``, if given, gets each bundle's assignment as its ``Op.data`` says (what a read of
        the node would decode to), so the caller need not parse tens of thousands of them back.
        """
        fence = self.current_fence()
        ops: list[Op] = []
        nothing_to_do: list[Op] = []  # placement decides, and there is no assignment to drop
        now = self._clock_ms()
        for bundle, source, destination, reason in moves:
            path = P.assignment_path(bundle)
            current = assignments.get(bundle)
            if destination is None:
                if current is None:
                    nothing_to_do.append(Op.delete(path, key=bundle))
                else:
                    ops.append(Op.delete(path, current.version, key=bundle))
                continue
            value = Assignment(destination, source, reason, now)
            if written is not None:
                written[bundle] = value
            doc = ZkStore.assignment_doc(value)
            if current is None:
                ops.append(Op.create(path, doc, key=bundle))
            else:
                ops.append(Op.set(path, doc, current.version, key=bundle))
            ops.append(Op.hint(destination, bundle))
        result = commit_batches(self._store, ops, fence)
        result.done.extend((op, -1) for op in nothing_to_do)
        return result

    def assign(self, bundle: str, broker: str, reason: str, expected_version: int | None) -> None:
        """Give an unowned bundle to ``broker``; ``expected_version`` None = no assignment node existed."""
        tx = self._store.fenced(self.current_fence())
        doc = ZkStore.assignment_doc(Assignment(broker, None, reason, self._clock_ms()))
        path = P.assignment_path(bundle)
        if expected_version is None:
            tx.create_json(path, doc)
        else:
            tx.set_json(path, doc, expected_version)
        tx.hint(broker, bundle).commit()

    def split(
        self, bundle: str, algorithm: str | None, positions: Sequence[int] | None, unload: bool = False
    ) -> list[str]:
        """Cut ``bundle`` at ``positions`` (already computed boundaries).

        Without ``unload`` the children go to the parent's owner; with it they are left unassigned,
        so the leader places each afresh (Pulsar unloads them and the next lookup assigns them).
        One transaction: the layout (compare-and-set on its version), the children's assignments,
        and the removal of the parent's assignment and bundle data.
        """
        if algorithm not in (None, SPECIFIED):
            raise InvalidInput("algorithm", algorithm, "the ZooKeeper executor takes computed boundaries")
        if not positions:
            raise InvalidInput("positions", positions, "need at least one boundary inside the bundle")
        ns, rng = split_bundle_name(bundle)
        got = self._store.read_layout(ns)
        if got is None or not got.value.contains(rng):
            raise UnknownBundle(bundle)
        new_layout = got.value.split(rng, list(positions))
        inside = [r for r in new_layout.ranges if rng.lower <= r.lower and r.upper <= rng.upper]
        children = [bundle_name(ns, r) for r in inside]
        # The parent's own two nodes only: reading every assignment and owner costs seconds at 100k.
        owner = self._store.read_owner(bundle)
        current = self._store.read_assignment(bundle)
        broker = owner.broker if owner is not None else (current.value.broker if current else None)
        fence = self.current_fence()
        tx = self._store.fenced(fence)
        tx.set_json(P.policies_path(ns), self._store.layout_doc(ns, new_layout), got.version)
        # Pulsar (NamespaceService.updateNamespaceBundlesForPolicies) keeps the bundles of the
        # namespace's Policies node in step with LocalPolicies; admin tools read them there.
        policies = self._store.get_json(P.join(P.TENANT_POLICIES, ns))
        if policies is not None and isinstance(policies.value, dict) and "bundles" in policies.value:
            doc = dict(policies.value, bundles=new_layout.to_policies())
            tx.set_json(P.join(P.TENANT_POLICIES, ns), doc, policies.version)
        if broker is not None and not unload:
            for child in children:
                doc = ZkStore.assignment_doc(Assignment(broker, None, f"split of {bundle}", self._clock_ms()))
                tx.upsert_json(P.assignment_path(child), doc).hint(broker, child)
        if current is not None:
            tx.delete(P.assignment_path(bundle), current.version)
        tx.commit()
        self._store.delete_bundle_data(bundle, fence)
        return children
