"""What the service shows: the cluster view and the bounded decision log."""

from __future__ import annotations

import itertools
import threading
from collections import deque
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
        explanation: Explanation,
        bundle: str | None = None,
        source: str | None = None,
        destination: str | None = None,
        applied: bool = True,
        principal: str | None = None,
        **move: Any,
    ) -> DecisionRecord:
        """``move``: a move's state and times (``state``, ``planned_ms``, ...).

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
            principal=principal or explanation.numbers.get("principal"),
            explanation=explanation.model_dump(mode="json"),
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
    """A thread-safe ring of the last ``size`` decisions, newest last."""

    def __init__(self, size: int) -> None:
        self._items: deque[DecisionRecord] = deque(maxlen=max(size, 1))
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, time_ms: int, kind: DecisionKind, explanation: Explanation, **kw: Any) -> DecisionRecord:
        with self._lock:
            rec = DecisionRecord.of(next(self._ids), time_ms, kind, explanation, **kw)
            self._items.append(rec)
            return rec

    def update(self, record: DecisionRecord, **fields: Any) -> None:
        """Move ``record`` on in its life (state and times), in place: the log shows it as it is now."""
        with self._lock:
            for k, v in fields.items():
                setattr(record, k, v)

    def latest(self, limit: int = 100, kind: str | None = None) -> list[DecisionRecord]:
        """Newest first."""
        with self._lock:
            items = [r for r in reversed(self._items) if kind is None or r.kind == kind]
        return items[: max(limit, 0)]
