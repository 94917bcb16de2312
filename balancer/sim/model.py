"""The simulated cluster: brokers with capacities and other-process CPU, bundles with time-varying traffic.

Everything is plain Python data and seeded randomness, so a run is a pure function of
(scenario, strategy pair, seed). Units: message rates in msg/s, throughput in bytes/s, CPU and
NIC usage in percent of the broker's own limit (a broker of capacity 2 has twice the cores and
twice the NIC of a standard one, so the same traffic costs it half the percentage points).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# A standard broker (capacity 1.0) spends these CPU percentage points per msg/s and per byte/s:
# 100k msg/s of 1 KiB messages cost about 70 points, the same order as a real 8-core broker.
CPU_POINTS_PER_MSG = 0.0006
CPU_POINTS_PER_BYTE = 1.0e-7
STANDARD_CORES = 8
STANDARD_NIC_BYTES = 1.25e9  # 10 Gbit/s


@dataclass
class SimBroker:
    """One broker: its strength relative to a standard one and the CPU other processes take."""

    name: str
    capacity: float = 1.0
    background: float = 3.0  # steady other-process CPU, percentage points
    spike: float = 0.0  # extra other-process CPU while a transient spike lasts
    alive: bool = True
    nic: float | None = None  # NIC strength relative to a standard one, when it differs from capacity

    @property
    def cores(self) -> float:
        return STANDARD_CORES * self.capacity

    @property
    def nic_bytes(self) -> float:
        return STANDARD_NIC_BYTES * (self.capacity if self.nic is None else self.nic)


@dataclass
class SimBundle:
    """A bundle's base traffic and the shape of its variation over time."""

    name: str
    rate: float  # base msg/s, in + out
    msg_size: float = 1024.0  # bytes per message
    out_share: float = 0.5  # fraction of the rate that is dispatched to consumers
    phase: float = 0.0  # of the periodic wave, radians
    paused_until: int = -1  # consumer stopped until this cycle (exclusive)
    catch_up_at: int = -1  # the cycle where a resumed consumer drains its backlog
    catch_up_factor: float = 1.0


@dataclass
class Traffic:
    """One bundle's traffic during one interval."""

    rate_in: float
    rate_out: float
    tp_in: float
    tp_out: float

    @property
    def rate(self) -> float:
        return self.rate_in + self.rate_out

    @property
    def throughput(self) -> float:
        return self.tp_in + self.tp_out

    @property
    def cpu_points(self) -> float:
        """CPU cost on a standard broker, percentage points."""
        return self.rate * CPU_POINTS_PER_MSG + self.throughput * CPU_POINTS_PER_BYTE


@dataclass
class Variation:
    """How bundle traffic moves over time: a shared wave with per-bundle phases, plus noise."""

    amplitude: float = 0.0  # of the periodic wave, fraction of the base rate
    period: float = 60.0  # cycles
    noise: float = 0.0  # per-cycle Gaussian noise, fraction of the base rate
    cpu_noise: float = 0.0  # per-cycle Gaussian noise of other-process CPU, points


def bundle_traffic(b: SimBundle, cycle: int, var: Variation, rng: random.Random) -> Traffic:
    """Traffic of ``b`` during ``cycle``; consumes exactly one Gaussian draw per bundle when noisy."""
    factor = 1.0 + var.amplitude * math.sin(2 * math.pi * cycle / var.period + b.phase)
    if var.noise > 0:
        factor += rng.gauss(0.0, var.noise)
    factor = max(0.0, factor)
    rate_in = b.rate * (1 - b.out_share) * factor
    rate_out = b.rate * b.out_share * factor
    if cycle < b.paused_until:
        rate_out = 0.0
    elif cycle == b.catch_up_at:
        rate_out *= b.catch_up_factor
    return Traffic(rate_in, rate_out, rate_in * b.msg_size, rate_out * b.msg_size)


@dataclass
class BrokerUsage:
    """What a broker's host measures over one interval, given what it owned during it."""

    cpu: float  # percent of its own cores
    bw_in: float  # percent of its own NIC
    bw_out: float
    msg_rate: float
    throughput: float

    @property
    def utilisation(self) -> float:
        """Pulsar's weighted max with default weights (cpu, NIC in, NIC out), percentage points."""
        return max(self.cpu, self.bw_in, self.bw_out)


@dataclass
class BrokerAccumulator:
    """Sums a broker's bundles' traffic; turned into :class:`BrokerUsage` by its capacity."""

    cpu_points: float = 0.0
    rate: float = 0.0
    tp_in: float = 0.0
    tp_out: float = 0.0
    bundles: list[str] = field(default_factory=list)

    def add(self, name: str, t: Traffic) -> None:
        self.cpu_points += t.cpu_points
        self.rate += t.rate
        self.tp_in += t.tp_in
        self.tp_out += t.tp_out
        self.bundles.append(name)

    def usage(self, broker: SimBroker, other_cpu: float) -> BrokerUsage:
        return BrokerUsage(
            cpu=other_cpu + self.cpu_points / broker.capacity,
            bw_in=self.tp_in / broker.nic_bytes * 100.0,
            bw_out=self.tp_out / broker.nic_bytes * 100.0,
            msg_rate=self.rate,
            throughput=self.tp_in + self.tp_out,
        )


def other_cpu(b: SimBroker, var: Variation, rng: random.Random) -> float:
    """Other-process CPU of ``b`` this interval; one Gaussian draw per broker when noisy."""
    noise = rng.gauss(0.0, var.cpu_noise) if var.cpu_noise > 0 else 0.0
    return max(0.0, b.background + b.spike + noise)
