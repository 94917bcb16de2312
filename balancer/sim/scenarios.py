"""Named, parameterised scenarios parsed from plain dicts (no I/O here).

A scenario describes broker groups (count, capacity, target load, when they join or leave),
bundle size distributions, traffic variation, timed events and config overrides. ``parse_scenario``
checks a dict (the JSON files ``balancer/sim/scenario_data/*.json`` are read by the adapter
``service.scenario_files``); ``build`` turns it into an initial cluster with a seeded
``random.Random``; the engine replays the events. The format is documented in ``docs/strategy.md``
(section "Simulator").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from balancer.errors import InvalidInput
from balancer.sim.model import CPU_POINTS_PER_BYTE, CPU_POINTS_PER_MSG, SimBroker, SimBundle, Variation

EVENT_TYPES = ("rolling_restart", "consumer_pause", "cpu_spike", "traffic_step")


@dataclass
class BrokerGroup:
    prefix: str
    count: int
    capacity: float = 1.0
    load: float = 50.0  # traffic CPU points on its own capacity at start
    load_spread: float = 0.0  # each broker's load is load * (1 +- spread), uniform
    bundles: int = 50  # bundles per broker at start
    background: float = 3.0
    join_at: int | None = None  # the group starts empty and joins at this cycle
    leave_at: int | None = None  # the group leaves at this cycle; its bundles are orphaned
    scalable: bool = True
    # Every bundle of the group rides the shared wave at this phase (radians) instead of a random one:
    # groups half a period apart swing in opposite phase, all at 0 swing in phase.
    phase: float | None = None
    msg_size: tuple[float, float] | None = None  # this group's message sizes, else the scenario's
    nic: float | None = None  # NIC strength, when not that of ``capacity`` (NIC-bound brokers)


@dataclass
class Scenario:
    name: str
    description: str
    cycles: int
    groups: list[BrokerGroup]
    variation: Variation = field(default_factory=Variation)
    size_sigma: float = 0.6  # lognormal sigma of bundle sizes
    msg_size_range: tuple[float, float] = (512.0, 2048.0)
    hot_bundles: list[dict[str, float]] = field(default_factory=list)  # {"load": points} on broker i
    events: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    disturbance_at: int = 0  # metrics such as "cycles until balanced" count from here
    bench_cycles: int | None = None  # fewer cycles for the benchmark run (large scenarios)

    @classmethod
    def from_dict(cls, d: dict[str, Any], scale: float = 1.0, cycles: int | None = None) -> Scenario:
        name = str(d.get("name", "?"))
        if not 0 < scale <= 10:
            raise InvalidInput("scale", scale, "must be in (0, 10]")
        groups = []
        for i, g in enumerate(d.get("groups", [])):
            try:
                group = BrokerGroup(**g)
            except TypeError as e:
                raise InvalidInput(f"{name}.groups[{i}]", g, str(e)) from None
            if group.scalable and scale != 1.0:
                group.count = max(1, round(group.count * scale))
            if group.count < 1 or group.capacity <= 0 or group.bundles < 0:
                raise InvalidInput(
                    f"{name}.groups[{i}]", g, "count >= 1, capacity > 0, bundles >= 0 required"
                )
            groups.append(group)
        if not groups:
            raise InvalidInput(f"{name}.groups", [], "a scenario needs at least one broker group")
        for i, ev in enumerate(d.get("events", [])):
            if ev.get("type") not in EVENT_TYPES:
                raise InvalidInput(f"{name}.events[{i}].type", ev.get("type"), f"one of {EVENT_TYPES}")
        n = int(cycles if cycles is not None else d.get("cycles", 30))
        if n < 1:
            raise InvalidInput("cycles", n, "must be >= 1")
        lo, hi = d.get("msg_size_range", (512.0, 2048.0))
        return cls(
            name=name,
            description=str(d.get("description", "")),
            cycles=n,
            groups=groups,
            variation=Variation(**d.get("variation", {})),
            size_sigma=float(d.get("size_sigma", 0.6)),
            msg_size_range=(float(lo), float(hi)),
            hot_bundles=list(d.get("hot_bundles", [])),
            events=list(d.get("events", [])),
            config=dict(d.get("config", {})),
            disturbance_at=int(d.get("disturbance_at", 0)),
            bench_cycles=d.get("bench_cycles"),
        )


def parse_scenario(d: dict[str, Any], scale: float = 1.0, cycles: int | None = None) -> Scenario:
    """A scenario from its dict; ``scale`` multiplies broker counts (small/medium versions for tests)."""
    if not isinstance(d, dict):
        raise InvalidInput("scenario", type(d).__name__, "must be a JSON object")
    return Scenario.from_dict(d, scale=scale, cycles=cycles)


@dataclass
class Cluster:
    """The initial state ``build`` produces: brokers by name, bundles by name and who owns what."""

    brokers: dict[str, SimBroker]
    bundles: dict[str, SimBundle]
    owners: dict[str, str]  # bundle -> broker
    groups: dict[str, BrokerGroup]  # broker -> its group


def _bundle_name(broker_index: int, j: int) -> str:
    # One namespace per 64 bundles; ranges need not tile the hash space for balancing purposes.
    ns, k = divmod(broker_index * 100_000 + j, 64)
    lo = k * (0x100000000 // 64)
    hi = lo + 0x100000000 // 64
    return f"sim/ns{ns}/0x{lo:08x}_0x{min(hi, 0xFFFFFFFF):08x}"


def build(s: Scenario, rng: random.Random) -> Cluster:
    """Create brokers and bundles; each starting broker gets bundles summing to its target load."""
    brokers: dict[str, SimBroker] = {}
    bundles: dict[str, SimBundle] = {}
    owners: dict[str, str] = {}
    groups: dict[str, BrokerGroup] = {}
    index = 0
    for g in s.groups:
        lo_size, hi_size = g.msg_size or s.msg_size_range
        for i in range(g.count):
            name = f"{g.prefix}-{i:04d}:8080"
            b = SimBroker(
                name=name, capacity=g.capacity, background=g.background, alive=g.join_at is None, nic=g.nic
            )
            brokers[name] = b
            groups[name] = g
            index += 1
            if g.join_at is not None or g.bundles == 0:
                continue
            load = g.load * (1 + rng.uniform(-g.load_spread, g.load_spread)) * g.capacity
            weights = [rng.lognormvariate(0.0, s.size_sigma) for _ in range(g.bundles)]
            total_w = sum(weights)
            for j, w in enumerate(weights):
                size = math.exp(rng.uniform(math.log(lo_size), math.log(hi_size)))
                points_per_msg = CPU_POINTS_PER_MSG + size * CPU_POINTS_PER_BYTE
                bname = _bundle_name(index, j)
                bundles[bname] = SimBundle(
                    name=bname,
                    rate=load * w / total_w / points_per_msg,
                    msg_size=size,
                    phase=rng.uniform(0, 2 * math.pi) if g.phase is None else g.phase,
                )
                owners[bname] = name
    alive = [n for n, b in brokers.items() if b.alive]
    for k, hot in enumerate(s.hot_bundles):
        target = alive[int(hot.get("broker", k)) % len(alive)]
        size = 1024.0
        bname = f"sim/hot/0x{k:08x}_0x{k + 1:08x}"
        bundles[bname] = SimBundle(
            name=bname,
            rate=float(hot["load"]) / (CPU_POINTS_PER_MSG + size * CPU_POINTS_PER_BYTE),
            msg_size=size,
        )
        owners[bname] = target
    return Cluster(brokers=brokers, bundles=bundles, owners=owners, groups=groups)
