"""What the service shows: the cluster view and the bounded decision log."""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from balancer.explain import Explanation
from balancer.models import BundleData, LocalBrokerData

DecisionKind = Literal["shedding", "placement", "split", "manual", "adoption", "drain", "leadership"]
# A move's life (service/leader/move_queue.py): planned (queued, waiting its turn), in_flight (unloaded,
# not yet served at its destination), served; or refused (not written, or no longer valid when its
# turn came), replaced (a later plan took its place before it went), dropped (leadership lost),
# unserved (given up on: never seen at its destination).
MoveState = Literal["planned", "in_flight", "served", "refused", "replaced", "dropped", "unserved"]
_KINDS = frozenset(get_args(DecisionKind))
_STATES = frozenset((None, *get_args(MoveState)))


class ClusterView(BaseModel):
    """One consistent read of the cluster: brokers' reports, bundle data, ownership, layouts."""

    time_ms: int = 0
    leader: dict[str, Any] | None = None
    brokers: dict[str, LocalBrokerData] = Field(default_factory=dict)
    bundle_data: dict[str, BundleData] = Field(default_factory=dict)
    owners: dict[str, str] = Field(default_factory=dict, description="bundle -> owning broker")
    assignments: dict[str, str] = Field(default_factory=dict, description="bundle -> assigned broker")
    namespaces: dict[str, list[str]] = Field(default_factory=dict, description="namespace -> bundle names")
    recently_unloaded: dict[str, int] = Field(default_factory=dict)
    malformed: dict[str, int] = Field(default_factory=dict, description="node path -> times skipped")

    def bundles(self) -> list[str]:
        return sorted(b for bs in self.namespaces.values() for b in bs)


class DecisionRecord(BaseModel):
    """One decision of the leader or an operator, with its explanation as plain JSON."""

    id: int
    time_ms: int
    kind: DecisionKind
    bundle: str | None = None
    source: str | None = None
    destination: str | None = None
    applied: bool = True
    principal: str | None = Field(
        None, description="who asked (operator decisions): role and token fingerprint"
    )
    explanation: dict[str, Any] = Field(default_factory=dict)
    # Moves only: where the move is in its life, and when each step happened (ms since the epoch).
    state: MoveState | None = None
    planned_ms: int | None = None
    released_ms: int | None = Field(None, description="when its unload was written")
    served_ms: int | None = Field(None, description="when its destination was seen serving it")
    ended_ms: int | None = Field(None, description="when it was refused, replaced, dropped or given up")
    note: dict[str, Any] | None = Field(None, description="why a planned move waits, or why it ended so")

    @classmethod
    def of(
        cls,
        id: int,
        time_ms: int,
        kind: DecisionKind,
        explanation: Explanation | None,
        bundle: str | None = None,
        source: str | None = None,
        destination: str | None = None,
        applied: bool = True,
        principal: str | None = None,
        **move: Any,
    ) -> DecisionRecord:
        """``move``: a move's state and times (``state``, ``planned_ms``, ...). ``explanation`` None:
        an empty one, filled later (:meth:`DecisionLog.add_lazy`).

        Built without pydantic's validation: every caller is the leader's own code, and a cycle
        records tens of thousands of planned moves (validation copied each explanation once more:
        ~1.3 KB and ~20 us a move). The kind and state are still checked."""
        if kind not in _KINDS or move.get("state") not in _STATES:
            raise ValueError(f"decision kind {kind!r} / state {move.get('state')!r} unknown")
        unknown = move.keys() - _MOVE_FIELDS
        if unknown:
            raise ValueError(f"decision record has no field(s) {sorted(unknown)}")
        values = dict(
            _MOVE_DEFAULTS,
            **move,
            id=id,
            time_ms=time_ms,
            kind=kind,
            bundle=bundle,
            source=source,
            destination=destination,
            applied=applied,
            principal=principal or (explanation.numbers.get("principal") if explanation else None),
            explanation=explanation.model_dump(mode="json") if explanation is not None else {},
        )
        # What ``model_construct`` leaves (its __dict__, the fields given as set, no extra, no
        # private), without its walk over every field's default: ~half a planned move's record.
        # tests/unit/test_decision_record.py holds it equal to model_construct's.
        rec = cls.__new__(cls)
        object.__setattr__(rec, "__dict__", values)
        object.__setattr__(rec, "__pydantic_fields_set__", _GIVEN | move.keys())
        object.__setattr__(rec, "__pydantic_extra__", None)
        object.__setattr__(rec, "__pydantic_private__", None)
        return rec


# The fields ``of`` sets from its own arguments, and the move fields' defaults (none is a factory).
_GIVEN = frozenset(
    ("id", "time_ms", "kind", "bundle", "source", "destination", "applied", "principal", "explanation")
)
_MOVE_FIELDS = frozenset(DecisionRecord.model_fields) - _GIVEN
_MOVE_DEFAULTS = {name: DecisionRecord.model_fields[name].get_default() for name in sorted(_MOVE_FIELDS)}


class DecisionLog:
    """A thread-safe ring of the last ``size`` decisions, newest last.

    A planned move's record may be added with its explanation still to build (:meth:`add_lazy`): a
    whole-plan cycle records tens of thousands of moves, the ring keeps the last ``size``, and
    building and dumping every move's explanation was most of the recording. Every read of the log
    (:meth:`latest`, what ``/decisions`` shows) fills the records it returns first; a record that
    leaves the ring unread is never shown, and its explanation is never built."""

    def __init__(self, size: int) -> None:
        self._items: deque[DecisionRecord] = deque(maxlen=max(size, 1))
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._unbuilt: dict[int, Callable[[], Explanation]] = {}  # record id -> its explanation's maker

    def add(self, time_ms: int, kind: DecisionKind, explanation: Explanation, **kw: Any) -> DecisionRecord:
        with self._lock:
            rec = DecisionRecord.of(next(self._ids), time_ms, kind, explanation, **kw)
            self._append(rec)
            return rec

    def add_lazy(
        self, time_ms: int, kind: DecisionKind, explanation: Callable[[], Explanation], **kw: Any
    ) -> DecisionRecord:
        """:meth:`add`, the explanation made by ``explanation()`` when the record is first read (its
        ``explanation`` and, unless given, ``principal`` are filled then)."""
        with self._lock:
            rec = DecisionRecord.of(next(self._ids), time_ms, kind, None, **kw)
            self._append(rec)
            self._unbuilt[rec.id] = explanation
            return rec

    def _append(self, rec: DecisionRecord) -> None:
        items = self._items
        if self._unbuilt and len(items) == items.maxlen:
            self._unbuilt.pop(items[0].id, None)  # it leaves the ring unread: never shown
        items.append(rec)

    def _fill(self, rec: DecisionRecord) -> DecisionRecord:
        make = self._unbuilt.pop(rec.id, None)
        if make is not None:
            why = make()
            rec.__dict__["explanation"] = why.model_dump(mode="json")
            if rec.principal is None:
                rec.__dict__["principal"] = why.numbers.get("principal")
        return rec

    def update(self, record: DecisionRecord, **fields: Any) -> None:
        """Move ``record`` on in its life (state and times), in place: the log shows it as it is now."""
        with self._lock:
            for k, v in fields.items():
                setattr(record, k, v)

    def update_many(self, records: list[DecisionRecord], **fields: Any) -> None:
        """:meth:`update` of each of ``records`` with the same ``fields`` (a whole plan's moves written)."""
        bad = fields.keys() - DecisionRecord.model_fields.keys()
        if bad:
            raise ValueError(f"decision record has no field(s) {sorted(bad)}")
        # As pydantic's own assignment (no validation on assignment here): the value, and the field set.
        with self._lock:
            for record in records:
                record.__dict__.update(fields)
                record.__pydantic_fields_set__.update(fields)

    def latest(self, limit: int = 100, kind: str | None = None) -> list[DecisionRecord]:
        """Newest first, every one with its explanation."""
        with self._lock:
            items = [r for r in reversed(self._items) if kind is None or r.kind == kind][: max(limit, 0)]
            if self._unbuilt:
                for r in items:
                    self._fill(r)
        return items
