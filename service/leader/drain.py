"""A drain's state and its sequencer: one bundle in flight, the next once the previous is served.

What moves next and where is :func:`balancer.drain.drain_moves` (pure); *when* is
:class:`DrainSequencer`, kept apart so the moves can be routed through another pacer (the
disruption budget's ``MoveQueue.submit(moves, "drain")``) by handing it another ``submit``.

The state lives in ZooKeeper (``/loadmgr/drain``, :mod:`service.leader.cordons`), and the bundle in
flight is written there *before* its move is: a leader that takes over mid-drain finds it and waits
for it to be served instead of choosing again, so nothing is moved twice. The next moves are always
generated from the ownership the leader reads now (the bundles the drained broker still owns), so a
bundle that has left is never moved again either.

"Served" is read where each mode keeps it: the bundle's ownership (its owner node in
ZooKeeper-native mode, Pulsar's ``/namespace`` ownership loadmgr reads in Pulsar mode) names the
destination. Pulsar places an unloaded bundle on the next client lookup: one nobody looks up stays
unowned, which is off the drained broker; after ``served_timeout_ms`` the drain goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from balancer.cycle import Move
from balancer.drain import DrainStep
from service.errors import ServiceError

log = logging.getLogger(__name__)

RUNNING, STOPPED, DONE, FAILED = "running", "stopped", "done", "failed"
STATES = (RUNNING, STOPPED, DONE, FAILED)
ATTEMPTS = 3  # moves of one bundle that failed or were not served before the drain leaves it
RECENT = 50  # moved bundles kept by name in the node (the count is kept in full)


@dataclass
class InFlight:
    bundle: str
    destination: str
    since_ms: int


@dataclass
class DrainState:
    broker: str
    state: str = RUNNING
    started_ms: int = 0
    updated_ms: int = 0
    by: str | None = None
    then_shutdown: bool = False
    total: int = 0  # bundles to move when it started (or resumed)
    moved: int = 0
    recent: list[str] = field(default_factory=list)  # the last RECENT bundles moved
    in_flight: InFlight | None = None
    attempts: dict[str, int] = field(default_factory=dict)
    given_up: dict[str, str] = field(default_factory=dict)  # bundle -> why it was left in place
    remaining: int = 0  # as last seen
    shutdown: str | None = None  # Pulsar mode with then_shutdown: requested / done / failed: why
    message: str = ""

    @property
    def active(self) -> bool:
        return self.state == RUNNING

    def to_json(self) -> dict[str, Any]:
        f = self.in_flight
        return {
            "broker": self.broker,
            "state": self.state,
            "startedAt": self.started_ms,
            "updatedAt": self.updated_ms,
            "by": self.by,
            "thenShutdown": self.then_shutdown,
            "total": self.total,
            "moved": self.moved,
            "recent": list(self.recent),
            "inFlight": None
            if f is None
            else {"bundle": f.bundle, "destination": f.destination, "since": f.since_ms},
            "attempts": dict(self.attempts),
            "givenUp": dict(self.given_up),
            "remaining": self.remaining,
            "shutdown": self.shutdown,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, doc: Any) -> DrainState:
        """Strict: a field of the wrong type raises ValueError (the node is then ignored, logged)."""
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")

        def get(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
            v = doc.get(key, default)
            if v is default:
                return v
            if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
                raise ValueError(f"{key}: {type(v).__name__}")
            return v

        broker = get("broker", str, None)
        state = get("state", str, RUNNING)
        if not broker or state not in STATES:
            raise ValueError(f"broker={broker!r} state={state!r}")
        f = doc.get("inFlight")
        in_flight = None
        if f is not None:
            if not (
                isinstance(f, dict)
                and isinstance(f.get("bundle"), str)
                and isinstance(f.get("destination"), str)
                and isinstance(f.get("since"), int)
            ):
                raise ValueError("inFlight")
            in_flight = InFlight(f["bundle"], f["destination"], f["since"])
        attempts = get("attempts", dict, {})
        given_up = get("givenUp", dict, {})
        recent = get("recent", list, [])
        return cls(
            broker=broker,
            state=state,
            started_ms=get("startedAt", int, 0),
            updated_ms=get("updatedAt", int, 0),
            by=get("by", (str, type(None)), None),
            then_shutdown=bool(get("thenShutdown", bool, False)),
            total=get("total", int, 0),
            moved=get("moved", int, 0),
            recent=[str(x) for x in recent][-RECENT:],
            in_flight=in_flight,
            attempts={str(k): int(v) for k, v in attempts.items() if isinstance(v, int)},
            given_up={str(k): str(v) for k, v in given_up.items()},
            remaining=get("remaining", int, 0),
            shutdown=get("shutdown", (str, type(None)), None),
            message=str(get("message", str, "")),
        )


@dataclass
class Observation:
    """What the leader reads now: each live bundle's owner, and the live brokers."""

    owners: Mapping[str, str]
    live: Collection[str]
    brokers: Collection[str]
    now_ms: int
    # Bundles with no traffic in the drained broker's last report: unowned after their unload, no
    # client will look them up soon (Pulsar mode), and none waits for them.
    idle: Collection[str] = ()


def in_flight_outcome(
    state: DrainState, obs: Observation, served_timeout_ms: int, back_after_ms: int | None = None
) -> str:
    """What became of the bundle in flight: ``served`` (at its destination), ``elsewhere`` (owned by
    another broker than the drained one), ``gone`` (split or deleted), ``waiting``, ``back`` (with
    ``back_after_ms``: the drained broker owns it that long after its move started), or, after
    ``served_timeout_ms`` (at once for an idle bundle), ``unowned`` (nobody took it: it is off the
    drained broker) or ``stuck`` (the drained broker still owns it)."""
    f = state.in_flight
    assert f is not None
    if f.bundle not in obs.live:
        return "gone"
    where = obs.owners.get(f.bundle)
    if where == f.destination:
        return "served"
    if where is not None and where != state.broker:
        return "elsewhere"
    if where is None and f.bundle in obs.idle:
        return "unowned"
    if where == state.broker and back_after_ms is not None and obs.now_ms - f.since_ms >= back_after_ms:
        return "back"
    if obs.now_ms - f.since_ms < served_timeout_ms:
        return "waiting"
    return "unowned" if where is None else "stuck"


Submit = Callable[[list[Move]], list[Move]]  # carries moves out; returns those applied


class DrainSequencer:
    """Advances one drain by one tick. ``persist(state)`` writes the state (fenced; raises when this
    instance no longer leads), ``submit(moves)`` carries moves out, ``plan(skip)`` is the pure next
    step (:func:`balancer.drain.drain_moves` over the leader's view), ``on_event(kind, state, move,
    why)`` records what happened (decision log, metrics). ``release(bundle, destination)`` drops the
    placement preallocation of a move that was refused, given up or served elsewhere than decided
    (its destination will never report the bundle); a served one keeps it until its destination's
    report shows the bundle (the placement context's refresh)."""

    def __init__(
        self,
        persist: Callable[[DrainState], None],
        submit: Submit,
        on_event: Callable[[str, DrainState, Move | None, str], None],
        served_timeout_ms: int = 30_000,
        back_after_ms: int | None = None,
        release: Callable[[str, str], None] | None = None,
    ) -> None:
        self.persist = persist
        self.submit = submit
        self.on_event = on_event
        self.served_timeout_ms = served_timeout_ms
        self.back_after_ms = back_after_ms
        self.release = release

    def tick(
        self, state: DrainState, obs: Observation, owned: list[str], plan: Callable[[set[str]], DrainStep]
    ) -> bool:
        """One step; True when something changed (the caller ticks again soon)."""
        if not state.active:
            return False
        state.updated_ms = obs.now_ms
        if state.broker not in obs.brokers:
            # Its bundles are orphans now: the orphan rule places them (never on a cordoned broker).
            return self._finish(state, FAILED, f"{state.broker} left before the drain finished")
        if state.in_flight is not None and not self._resolve(state, obs):
            return False
        skip = set(state.given_up)
        step = plan(skip)
        state.remaining = len([b for b in owned if b not in step.stays and b not in skip])
        if not step.moves:
            if state.remaining == 0:
                left = f"; {len(state.given_up)} left in place" if state.given_up else ""
                return self._finish(state, DONE, f"{state.moved} bundle(s) moved{left}")
            if step.waiting is not None:
                message = f"{state.remaining} bundle(s) left; {step.waiting.message}"
            else:
                message = f"{state.remaining} bundle(s) left, no broker can take them now"
            if state.message != message:
                state.message = message
                self.persist(state)
                return True
            return False
        move = step.moves[0]
        for extra in step.moves[1:]:  # one in flight: the rest are chosen again next tick
            self._release(extra.bundle, extra.destination)
        # The bundle in flight goes into ZooKeeper before its move: a leader that takes over finds it.
        state.in_flight = InFlight(move.bundle, move.destination, obs.now_ms)
        state.message = f"moving {move.bundle} to {move.destination}"
        try:
            self.persist(state)
        except Exception:
            self._release(move.bundle, move.destination)  # not moved: nothing may count it there
            raise
        try:
            applied = self.submit([move])
        except ServiceError as e:
            applied, why = [], str(e)
        else:
            why = "" if applied else "not applied"
        if not applied:
            state.in_flight = None
            self._release(move.bundle, move.destination)
            self._attempt_failed(state, move.bundle, why)
            self.on_event("refused", state, move, why)
            self.persist(state)
            return True
        self.on_event("move", state, move, "")
        return True

    def _resolve(self, state: DrainState, obs: Observation) -> bool:
        """Settle the bundle in flight; False while it is still on its way."""
        f = state.in_flight
        assert f is not None
        outcome = in_flight_outcome(state, obs, self.served_timeout_ms, self.back_after_ms)
        if outcome == "waiting":
            return False
        state.in_flight = None
        if outcome != "served":
            self._release(f.bundle, f.destination)
        if outcome in ("served", "elsewhere", "unowned"):
            state.moved += 1
            state.recent = [*state.recent, f.bundle][-RECENT:]
            state.attempts.pop(f.bundle, None)
            state.message = f"{f.bundle} {outcome}" + (
                "" if outcome == "served" else f" (decided {f.destination})"
            )
        elif outcome == "stuck":
            self._attempt_failed(state, f.bundle, f"still owned by {state.broker} after the move")
        elif outcome == "back":
            self._attempt_failed(state, f.bundle, f"Pulsar placed it back on {state.broker}")
        self.on_event(outcome, state, None, f.bundle)
        self.persist(state)
        return True

    def _release(self, bundle: str, destination: str) -> None:
        if self.release is not None:
            self.release(bundle, destination)

    def _attempt_failed(self, state: DrainState, bundle: str, why: str) -> None:
        n = state.attempts.get(bundle, 0) + 1
        state.attempts[bundle] = n
        state.message = f"{bundle}: {why} (attempt {n} of {ATTEMPTS})"
        if n >= ATTEMPTS:
            state.given_up[bundle] = why
            state.attempts.pop(bundle, None)

    def _finish(self, state: DrainState, final: str, message: str) -> bool:
        state.state = final
        state.message = message
        if state.in_flight is not None:
            self._release(state.in_flight.bundle, state.in_flight.destination)
        state.in_flight = None
        self.persist(state)
        self.on_event(final, state, None, message)
        return True
