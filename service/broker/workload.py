"""A simulated workload: bundles with their own traffic, shared by every agent, keyed by bundle name.

Because the traffic belongs to the bundle and not to the broker, a bundle's load moves with the
bundle: whichever agent owns it reports it, and the simulated host usage (CPU, NIC) of an agent is
derived from the bundles it owns, so the shedders see load leave one broker and arrive at another.

The scenario is plain JSON (a file, or the node ``/loadmgr/workload``) and deterministic: the
jitter of a bundle at a time step comes from a ``random.Random`` seeded by (seed, bundle, step).
A bundle that is not listed but lies inside a listed one (a split child) gets the listed bundle's
traffic scaled by its share of the hash range, so a split divides the load instead of creating it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from balancer.bundles import NamespaceBundles, bundle_name, split_bundle_name
from balancer.errors import InvalidInput
from balancer.models import NamespaceBundleStats, ResourceUsage, SystemResourceUsage

MB = 1024.0 * 1024.0


class BundleLoad(BaseModel):
    """One bundle's steady traffic (messages/s and bytes/s) and client counts."""

    model_config = ConfigDict(extra="forbid")

    msg_rate_in: float = Field(100.0, ge=0)
    msg_rate_out: float = Field(100.0, ge=0)
    throughput_in: float = Field(100_000.0, ge=0, description="bytes/s")
    throughput_out: float = Field(100_000.0, ge=0, description="bytes/s")
    topics: int = Field(4, ge=0)
    producers: int = Field(4, ge=0)
    consumers: int = Field(4, ge=0)

    def scaled(self, f: float) -> BundleLoad:
        return BundleLoad(
            msg_rate_in=self.msg_rate_in * f,
            msg_rate_out=self.msg_rate_out * f,
            throughput_in=self.throughput_in * f,
            throughput_out=self.throughput_out * f,
            topics=self.topics,
            producers=self.producers,
            consumers=self.consumers,
        )


class Phase(BaseModel):
    """From ``at_s`` seconds after the scenario's start, multiply the traffic of matching bundles.

    Keys of ``factors`` are a bundle name, a namespace, or ``*``; the most specific key wins.
    """

    model_config = ConfigDict(extra="forbid")

    at_s: float = Field(ge=0)
    factors: dict[str, float]


class Wave(BaseModel):
    """A smooth daily rhythm: traffic times ``1 + amplitude * sin(2 pi (t / period_s + phase))``.

    ``phases`` (bundle, namespace or ``*``; the most specific wins) shifts each tenant's day, so the
    tenants peak at different times and the load moves between the brokers that serve them.
    """

    model_config = ConfigDict(extra="forbid")

    period_s: float = Field(600.0, gt=0)
    amplitude: float = Field(0.4, ge=0, lt=1)
    phases: dict[str, float] = Field(default_factory=dict)

    def factor(self, keys: tuple[str, ...], elapsed_s: float) -> float:
        phase = next((self.phases[k] for k in keys if k in self.phases), 0.0)
        return 1.0 + self.amplitude * math.sin(2 * math.pi * (elapsed_s / self.period_s + phase))


class Burst(BaseModel):
    """From ``at_s`` for ``duration_s`` seconds, the traffic of ``key`` (bundle, namespace, ``*``) times
    ``factor``: a tenant's batch job, a sale, a replay."""

    model_config = ConfigDict(extra="forbid")

    key: str
    at_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    factor: float = Field(gt=0)


class Scenario(BaseModel):
    """The whole simulated workload and how it turns into host usage."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    namespaces: dict[str, int] = Field(default_factory=dict, description="namespace -> initial bundle count")
    bundles: dict[str, BundleLoad] = Field(default_factory=dict)
    default: BundleLoad = Field(default_factory=BundleLoad)
    noise: float = Field(0.0, ge=0, le=1, description="relative jitter of each sample")
    step_ms: int = Field(1000, gt=0, description="jitter changes once per step")
    start_ms: int = 0
    phases: list[Phase] = Field(default_factory=list)
    wave: Wave | None = None
    bursts: list[Burst] = Field(default_factory=list)
    bursts_repeat_s: float | None = Field(None, gt=0, description="the bursts start over after this long")
    base_cpu_percent: float = Field(5.0, ge=0)
    cpu_percent_per_kmsg: float = Field(1.0, ge=0, description="CPU percent per 1000 msg/s")
    nic_limit_bytes: float = Field(125_000_000.0, gt=0, description="simulated NIC capacity, bytes/s")
    memory_limit_mb: float = Field(8192.0, gt=0)
    memory_base_mb: float = Field(1024.0, ge=0)

    @classmethod
    def parse(cls, doc: Mapping[str, Any]) -> Scenario:
        try:
            return cls.model_validate(doc)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "scenario"
            raise InvalidInput(f"workload.{field}", err.get("input"), err["msg"]) from None

    # ---- per-bundle traffic --------------------------------------------------------------------
    def load_of(self, bundle: str, now_ms: int) -> BundleLoad:
        base = self._base(bundle)
        f = self._phase_factor(bundle, now_ms)
        if self.noise > 0:
            step = (now_ms - self.start_ms) // self.step_ms
            jitter = random.Random(f"{self.seed}:{bundle}:{step}").uniform(-self.noise, self.noise)
            f *= 1.0 + jitter
        return base.scaled(f) if f != 1.0 else base

    def _base(self, bundle: str) -> BundleLoad:
        exact = self.bundles.get(bundle)
        if exact is not None:
            return exact
        ns, rng = split_bundle_name(bundle)
        for name, load in self.bundles.items():
            other_ns, other = split_bundle_name(name)
            if other_ns == ns and other.lower <= rng.lower and rng.upper <= other.upper and other.width > 0:
                return load.scaled(rng.width / other.width)
        return self.default

    def _phase_factor(self, bundle: str, now_ms: int) -> float:
        elapsed_s = (now_ms - self.start_ms) / 1000.0
        keys = (bundle, split_bundle_name(bundle)[0], "*")
        f = 1.0
        if self.wave is not None:
            f *= self.wave.factor(keys, elapsed_s)
        if self.bursts:
            t = elapsed_s % self.bursts_repeat_s if self.bursts_repeat_s else elapsed_s
            for b in self.bursts:
                if b.key in keys and b.at_s <= t < b.at_s + b.duration_s:
                    f *= b.factor
        current = [p for p in self.phases if p.at_s <= elapsed_s]
        if not current:
            return f
        factors = max(current, key=lambda p: p.at_s).factors
        for key in keys:
            if key in factors:
                return f * factors[key]
        return f

    def bundle_stats(self, owned: Collection[str], now_ms: int) -> dict[str, NamespaceBundleStats]:
        out = {}
        for b in sorted(owned):
            load = self.load_of(b, now_ms)
            out[b] = NamespaceBundleStats(
                msg_rate_in=load.msg_rate_in,
                msg_rate_out=load.msg_rate_out,
                msg_throughput_in=load.throughput_in,
                msg_throughput_out=load.throughput_out,
                topics=load.topics,
                producer_count=load.producers,
                consumer_count=load.consumers,
            )
        return out

    # ---- host usage derived from owned bundles -----------------------------------------------------
    def host_usage(self, stats: Mapping[str, NamespaceBundleStats]) -> SystemResourceUsage:
        """CPU in percent of one core's worth (limit 100), NIC in Kbit/s as Pulsar reports it."""
        rate = sum(s.msg_rate for s in stats.values())
        tp_in = sum(s.msg_throughput_in for s in stats.values())
        tp_out = sum(s.msg_throughput_out for s in stats.values())
        topics = sum(s.topics for s in stats.values())
        nic_kbps = self.nic_limit_bytes * 8 / 1000
        cpu = self.base_cpu_percent + rate / 1000 * self.cpu_percent_per_kmsg
        return SystemResourceUsage(
            cpu=ResourceUsage(usage=cpu, limit=100.0),
            memory=ResourceUsage(usage=self.memory_base_mb + topics * 0.5, limit=self.memory_limit_mb),
            direct_memory=ResourceUsage(usage=0.0, limit=self.memory_limit_mb),
            bandwidth_in=ResourceUsage(usage=tp_in * 8 / 1000, limit=nic_kbps),
            bandwidth_out=ResourceUsage(usage=tp_out * 8 / 1000, limit=nic_kbps),
        )


def skewed_scenario(
    namespace: str,
    num_bundles: int,
    seed: int,
    msg_rate: float = 2000.0,
    throughput: float = 2 * MB,
    spread: float = 0.5,
    **overrides: Any,
) -> Scenario:
    """Bundles of one namespace with traffic drawn around ``msg_rate``/``throughput`` (seeded)."""
    rnd = random.Random(seed)
    layout = NamespaceBundles.initial(namespace, num_bundles)
    bundles = {}
    for rng in layout.ranges:
        f = 1.0 + rnd.uniform(-spread, spread)
        bundles[bundle_name(namespace, rng)] = BundleLoad(
            msg_rate_in=msg_rate * f / 2,
            msg_rate_out=msg_rate * f / 2,
            throughput_in=throughput * f / 2,
            throughput_out=throughput * f / 2,
        )
    return Scenario(seed=seed, namespaces={namespace: num_bundles}, bundles=bundles, **overrides)


def living_scenario(
    namespaces: Mapping[str, int],
    seed: int,
    msg_rate: float = 2000.0,
    throughput: float = 2 * MB,
    period_s: float = 600.0,
    start_ms: int = 0,
) -> Scenario:
    """The demo's load that lives: each namespace's bundles around ``msg_rate`` (as
    :func:`skewed_scenario`), a diurnal wave of ``period_s`` whose peak each tenant reaches at its own
    (seeded) time, and seeded tenant bursts (x2-x3.5 for 45-90 s, one every 2.5-4 minutes), repeating
    every hour. Deterministic for a seed: the same demo twice shows the same day."""
    rnd = random.Random(f"living:{seed}")
    bundles: dict[str, BundleLoad] = {}
    for ns, count in namespaces.items():
        bundles.update(skewed_scenario(ns, count, rnd.randrange(1 << 30), msg_rate, throughput).bundles)
    phases = {ns: i / max(1, len(namespaces)) + rnd.uniform(-0.05, 0.05) for i, ns in enumerate(namespaces)}
    bursts: list[Burst] = []
    repeat_s = 3600.0
    t = rnd.uniform(60.0, 120.0)
    names = sorted(namespaces)
    while t < repeat_s - 90.0:
        bursts.append(
            Burst(
                key=rnd.choice(names),
                at_s=round(t, 1),
                duration_s=round(rnd.uniform(45.0, 90.0), 1),
                factor=round(rnd.uniform(2.0, 3.5), 2),
            )
        )
        t += rnd.uniform(150.0, 240.0)
    return Scenario(
        seed=seed,
        namespaces=dict(namespaces),
        bundles=bundles,
        noise=0.05,
        step_ms=5000,
        start_ms=start_ms,
        wave=Wave(period_s=period_s, amplitude=0.35, phases=phases),
        bursts=bursts,
        bursts_repeat_s=repeat_s,
    )
