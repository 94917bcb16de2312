"""Pacing a plan's moves by a disruption budget: which unloads go now, and why the others wait.

A shedding cycle decides a whole plan at once; carried out at once (four unloads from one broker in
a second) every client of that broker reconnects together, and publish p99 around the moves reached
1,471 ms on real brokers against ThresholdShedder's 59 ms (BENCHMARKS, issue 30). So a plan is
queued and released by :func:`pace`, called by the leader every second or so:

* at most ``per_broker`` unloads in flight from one source broker, ``per_destination`` to one
  destination broker (a move without a decided destination counts for none), and ``cluster`` in the
  cluster;
  a move is *in flight* from its unload until the bundle is served at its destination, so with
  ``per_broker`` 1 a broker's next unload waits until its previous bundle is served where it was sent;
* a move in flight longer than ``served_timeout_ms`` stops holding its slot (a bundle no client looks
  up is never served in Pulsar mode; pacing must not stall on it), and its bundle may be moved again;
* a shedding plan sheds at most ``brokers_per_cycle`` source brokers
  (``loadBalancerMaxNumberOfBrokerSheddingPerCycle``); the others' moves wait for the next cycle;
* cooldown (``loadBalanceSheddingDelayInSeconds``, Extensible's key): a broker that unloaded at time
  t is not shed again before t + the delay, by the clock. Pulsar's TransferShedder compares the
  broker's load report time and skips the whole cycle, deciding again on the next report; here only
  that broker's moves wait, and a queued move goes once the delay has run out. Judged on the time
  the plan was made instead, a move planned 178 s after its source's last unload could never go
  (the plan's time does not move) and sat in the queue until a later plan replaced it, which a
  strategy that confirms over several cycles may not make for minutes: on real Extensible brokers
  the join's last move from the busiest broker waited 3 and 4 cycles and the joins of seeds 1 and 3
  ended at msg-rate max/min 2.16 and 2.07 (BENCHMARKS, fifth session). The moves of the plan that
  unloaded it, and of a re-plan that carries on a shedding still queued for it, are that same
  shedding and do not wait.

* spacing (``spacing_ms``): a shedding or drain unload starts at least this long after the last
  unload its source broker or its destination broker took part in (any kind). Paced by "served"
  alone, a plan's four moves from one broker still went within two seconds on Modular brokers (each
  served in 0.4-1.2 s) and their clients' reconnections piled into the same seconds: p99 publish
  latency around them 1,608 ms, where moves that happened to be 30 s apart cost 75 ms (head-to-head
  seed 1, BENCHMARKS). Per broker, not per cluster, so a large cluster still moves many bundles at
  once, each broker's clients one bundle at a time.

Operator (``manual``) moves obey the in-flight caps only; ``drain`` moves the caps and the spacing;
both go before shedding ones.
Pure: no clock (``now_ms`` is passed), no I/O; every waiting move carries its explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from balancer.config import LoadBalancerConfig
from balancer.explain import Explanation, explain

KINDS = ("manual", "drain", "shedding")  # release priority, first first

# The disruption budget's keys; each set to 0 turns the budget off (a plan goes at once, as before issue 46).
BUDGET_KEYS = (
    "loadBalancerMaxUnloadsInFlightPerBroker",
    "loadBalancerMaxUnloadsInFlightPerDestination",
    "loadBalancerMaxUnloadsInFlight",
    "loadBalancerMaxNumberOfBrokerSheddingPerCycle",
    "loadBalanceSheddingDelayInSeconds",
    "loadBalancerUnloadSpacingSeconds",
)


@dataclass(frozen=True)
class QueuedMove:
    """A move waiting to be released. ``plan`` names its submission (a shedding cycle's plan)."""

    bundle: str
    source: str | None
    destination: str | None
    kind: str = "shedding"
    plan: int = 0


@dataclass(frozen=True)
class MoveInFlight:
    """A released move not yet served at its destination; ``since_ms`` is its (last) unload."""

    bundle: str
    source: str | None
    destination: str | None
    kind: str
    plan: int
    since_ms: int


@dataclass(frozen=True)
class BrokerHistory:
    """A source broker's last unload (``last_unload_ms``) and the plan whose shedding it belongs to."""

    last_unload_ms: int | None = None
    plan: int | None = None


@dataclass(frozen=True)
class PacingLimits:
    """The budget; a cap <= 0 means no cap (the plan goes at once, as before issue 46)."""

    per_broker: int = 1
    cluster: int = 3
    brokers_per_cycle: int = 3
    cooldown_ms: int = 180_000
    served_timeout_ms: int = 30_000
    per_destination: int = 0  # last: the fields above keep their positions
    spacing_ms: int = 0

    @classmethod
    def of(cls, config: LoadBalancerConfig) -> PacingLimits:
        """The budget ``config``'s keys set."""
        return cls(
            per_broker=config.loadBalancerMaxUnloadsInFlightPerBroker,
            per_destination=config.loadBalancerMaxUnloadsInFlightPerDestination,
            cluster=config.loadBalancerMaxUnloadsInFlight,
            brokers_per_cycle=config.loadBalancerMaxNumberOfBrokerSheddingPerCycle,
            cooldown_ms=int(config.loadBalanceSheddingDelayInSeconds * 1000),
            served_timeout_ms=int(config.loadBalancerUnloadServedTimeoutSeconds * 1000),
            spacing_ms=int(config.loadBalancerUnloadSpacingSeconds * 1000),
        )


class _Wait:
    """Why a move waits, as decided: its reason, and the values its explanation is made of, taken
    when it was decided (the counts go on changing as the rest of the queue is paced)."""

    __slots__ = ("args", "build", "reason")

    def __init__(self, reason: str, build: Callable[..., Explanation], *args: Any) -> None:
        self.reason, self.build, self.args = reason, build, args

    def explanation(self) -> Explanation:
        return self.build(*self.args)


class Schedule:
    """What :func:`pace` decided: ``release`` in order; ``waiting`` each with why; ``holding``: the
    moves in flight that hold a slot (not past the served timeout).

    A waiting move's explanation is built when first asked for: after a whole plan tens of
    thousands of moves wait, a tick paces them all every second, and building one ``Explanation``
    each (~10-15 us, most of the tick) was for nothing unless a reason changed or someone reads the
    queue. :meth:`reasons` gives the reason codes alone."""

    def __init__(
        self,
        release: list[QueuedMove] | None = None,
        waiting: list[tuple[QueuedMove, Explanation]] | None = None,
        holding: list[MoveInFlight] | None = None,
    ) -> None:
        self.release: list[QueuedMove] = release if release is not None else []
        self.holding: list[MoveInFlight] = holding if holding is not None else []
        self._decided: list[tuple[QueuedMove, _Wait]] = []
        self._waiting = waiting

    @property
    def waiting(self) -> list[tuple[QueuedMove, Explanation]]:
        got = self._waiting
        if got is None:  # two threads may both build it: the same list either way
            got = self._waiting = [(m, w.explanation()) for m, w in self._decided]
        return got

    def reasons(self) -> list[tuple[QueuedMove, str]]:
        """Each waiting move with its reason code, without building the explanations."""
        if self._waiting is not None:
            return [(m, w.reason) for m, w in self._waiting]
        return [(m, w.reason) for m, w in self._decided]

    def explain_waiting(self, index: int) -> Explanation:
        """The explanation of the ``index``-th waiting move (the order of :meth:`reasons`)."""
        if self._waiting is not None:
            return self._waiting[index][1]
        return self._decided[index][1].explanation()


def _capped(limit: int) -> bool:
    return limit > 0


def admitted_sources(
    queue: Sequence[QueuedMove], in_flight: Sequence[MoveInFlight], limit: int
) -> dict[int, list[str]]:
    """Per shedding plan, the first ``limit`` source brokers in plan order (already released first)."""
    seen: dict[int, list[str]] = {}
    ordered = [
        (m.plan, m.source) for m in sorted(in_flight, key=lambda f: f.since_ms) if m.kind == "shedding"
    ]
    ordered += [(m.plan, m.source) for m in queue if m.kind == "shedding"]
    for plan, source in ordered:
        brokers = seen.setdefault(plan, [])
        if source is not None and source not in brokers and (not _capped(limit) or len(brokers) < limit):
            brokers.append(source)
    return seen


def pace(
    queue: Sequence[QueuedMove],
    in_flight: Sequence[MoveInFlight],
    history: Mapping[str, BrokerHistory],
    now_ms: int,
    limits: PacingLimits,
    started: Mapping[str, int] | None = None,
) -> Schedule:
    """Which of ``queue`` (in plan order) to release now, given the moves ``in_flight`` and, per
    broker, when the last unload it was the source or destination of started (``started``)."""
    last = dict(started or {})
    out = Schedule()
    timeout = limits.served_timeout_ms
    out.holding = [f for f in in_flight if timeout <= 0 or now_ms - f.since_ms < timeout]
    per_source: dict[str | None, list[MoveInFlight | QueuedMove]] = {}
    per_dest: dict[str | None, list[MoveInFlight | QueuedMove]] = {}
    for f in out.holding:
        per_source.setdefault(f.source, []).append(f)
        per_dest.setdefault(f.destination, []).append(f)
    busy_bundles = {f.bundle for f in out.holding}
    admitted = admitted_sources(queue, in_flight, limits.brokers_per_cycle)
    total = len(out.holding)
    order = sorted(
        range(len(queue)), key=lambda i: (KINDS.index(queue[i].kind) if queue[i].kind in KINDS else 0, i)
    )
    for i in order:
        move = queue[i]
        why = _why_wait(move, per_source, busy_bundles, admitted, history, total, now_ms, limits)
        if why is None:
            why = _destination_busy(move, per_dest, limits)
        if why is None:
            why = _too_soon(move, last, now_ms, limits)
        if why is not None:
            out._decided.append((move, why))
            continue
        out.release.append(move)
        per_source.setdefault(move.source, []).append(move)
        per_dest.setdefault(move.destination, []).append(move)
        busy_bundles.add(move.bundle)
        total += 1
        for broker in (move.source, move.destination):
            if broker is not None:
                last[broker] = now_ms
    return out


def _too_soon(move: QueuedMove, last: Mapping[str, int], now_ms: int, limits: PacingLimits) -> _Wait | None:
    if move.kind == "manual" or limits.spacing_ms <= 0:
        return None
    for end, broker in (("source", move.source), ("destination", move.destination)):
        at = last.get(broker) if broker is not None else None
        if at is None or now_ms - at >= limits.spacing_ms:
            continue
        return _Wait("spacing", _spacing, move.bundle, end, broker, now_ms - at, limits.spacing_ms)
    return None


def _spacing(bundle: str, end: str, broker: str, since: int, spacing_ms: int) -> Explanation:
    return explain(
        "spacing",
        f"an unload involving {broker} (this move's {end}) started {max(since, 0) / 1000:.1f} s ago; "
        f"loadBalancerUnloadSpacingSeconds asks for {spacing_ms / 1000:g} s between two, so "
        "that their clients do not reconnect in the same seconds",
        subject=bundle,
        broker=broker,
        sinceMs=since,
        spacingMs=spacing_ms,
    )


def _why_wait(
    move: QueuedMove,
    per_source: Mapping[str | None, list[MoveInFlight | QueuedMove]],
    busy_bundles: set[str],
    admitted: Mapping[int, list[str]],
    history: Mapping[str, BrokerHistory],
    total: int,
    now_ms: int,
    limits: PacingLimits,
) -> _Wait | None:
    b, src = move.bundle, move.source
    if b in busy_bundles:
        return _Wait("bundle_in_flight", _bundle_in_flight, b)
    if move.kind == "shedding" and src is not None:
        if _capped(limits.brokers_per_cycle) and src not in admitted.get(move.plan, []):
            brokers = tuple(admitted.get(move.plan, []))
            return _Wait("broker_cap", _broker_cap, b, src, brokers, limits.brokers_per_cycle)
        h = history.get(src)
        if limits.cooldown_ms > 0 and h is not None and h.last_unload_ms is not None and h.plan != move.plan:
            ago = now_ms - h.last_unload_ms
            if ago < limits.cooldown_ms:
                return _Wait("cooldown", _cooldown, b, src, ago, limits.cooldown_ms)
    mine = per_source.get(src, [])
    if src is not None and _capped(limits.per_broker) and len(mine) >= limits.per_broker:
        prev = mine[-1]
        since = getattr(prev, "since_ms", None)
        return _Wait(
            "source_busy",
            _source_busy,
            b,
            src,
            len(mine),
            prev.bundle,
            prev.destination,
            None if since is None else now_ms - since,
            limits.per_broker,
        )
    if _capped(limits.cluster) and total >= limits.cluster:
        return _Wait("cluster_busy", _cluster_busy, b, total, limits.cluster)
    return None


def _bundle_in_flight(bundle: str) -> Explanation:
    return explain("bundle_in_flight", "an earlier move of this bundle is not served yet", subject=bundle)


def _broker_cap(bundle: str, src: str, brokers: tuple[str, ...], max_brokers: int) -> Explanation:
    return explain(
        "broker_cap",
        f"this cycle already sheds {len(brokers)} broker(s) ({', '.join(brokers)}), the most "
        "loadBalancerMaxNumberOfBrokerSheddingPerCycle allows; the next cycle re-plans",
        subject=bundle,
        source=src,
        maxBrokers=max_brokers,
    )


def _cooldown(bundle: str, src: str, ago: int, delay_ms: int) -> Explanation:
    return explain(
        "cooldown",
        f"{src} unloaded a bundle {max(ago, 0) / 1000:.0f} s ago; loadBalanceSheddingDelayInSeconds "
        f"asks for {delay_ms / 1000:g} s before it is shed again",
        subject=bundle,
        source=src,
        elapsedMs=ago,
        delayMs=delay_ms,
    )


def _source_busy(
    bundle: str, src: str, n: int, prev: str, prev_dest: str | None, waited_ms: int | None, max_per: int
) -> Explanation:
    waited = f" for {waited_ms / 1000:.1f} s" if waited_ms is not None else " (released just now)"
    return explain(
        "source_busy",
        f"{src} has {n} unload(s) in flight, the most loadBalancerMaxUnloadsInFlightPerBroker "
        f"allows: waiting until {prev} is served at {prev_dest or 'its new owner'}"
        f" (in flight{waited})",
        subject=bundle,
        source=src,
        inFlight=n,
        maxPerBroker=max_per,
        waitingFor=prev,
    )


def _cluster_busy(bundle: str, total: int, max_in_flight: int) -> Explanation:
    return explain(
        "cluster_busy",
        f"{total} unload(s) in flight in the cluster, the most loadBalancerMaxUnloadsInFlight allows",
        subject=bundle,
        inFlight=total,
        maxInFlight=max_in_flight,
    )


def _destination_busy(
    move: QueuedMove, per_dest: Mapping[str | None, list[MoveInFlight | QueuedMove]], limits: PacingLimits
) -> _Wait | None:
    dest = move.destination
    theirs = per_dest.get(dest, []) if dest is not None else []
    if not _capped(limits.per_destination) or len(theirs) < limits.per_destination:
        return None
    return _Wait(
        "destination_busy",
        _dest_busy,
        move.bundle,
        dest,
        len(theirs),
        theirs[-1].bundle,
        limits.per_destination,
    )


def _dest_busy(bundle: str, dest: str, n: int, prev: str, max_per: int) -> Explanation:
    return explain(
        "destination_busy",
        f"{dest} is receiving {n} bundle(s) not yet served there, the most "
        f"loadBalancerMaxUnloadsInFlightPerDestination allows: waiting until {prev} is served",
        subject=bundle,
        destination=dest,
        inFlight=n,
        maxPerDestination=max_per,
        waitingFor=prev,
    )
