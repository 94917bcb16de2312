"""The agent measures host usage once per loadBalancerHostUsageCheckIntervalMinutes, not per report."""

from __future__ import annotations

from typing import Any, cast

from balancer.config import LoadBalancerConfig
from balancer.models import NamespaceBundleStats, ResourceUsage, SystemResourceUsage
from service.broker.agent import BrokerAgent, agent_version
from service.broker.host_usage import HostUsage
from service.zookeeper.metadata.store import ZkStore


class CountingHost:
    def __init__(self) -> None:
        self.samples = 0

    def sample(self) -> SystemResourceUsage:
        self.samples += 1
        return SystemResourceUsage(cpu=ResourceUsage(usage=float(self.samples), limit=100.0))


class NoHostSource:
    manages_ownership = False

    def bundle_stats(self, owned: Any, now_ms: int) -> dict[str, NamespaceBundleStats]:
        return {}

    def host_usage(self, stats: Any) -> SystemResourceUsage | None:
        return None  # a real broker: the host is measured


def agent(minutes: float) -> tuple[BrokerAgent, CountingHost]:
    host = CountingHost()
    config = LoadBalancerConfig(loadBalancerHostUsageCheckIntervalMinutes=minutes)
    a = BrokerAgent(cast(ZkStore, object()), "b1:8080", config, NoHostSource(), host=cast(HostUsage, host))
    return a, host


def test_reports_every_five_seconds_reuse_one_measurement_per_interval() -> None:
    a, host = agent(1.0)
    seen = [a._host_usage(t).cpu.usage for t in range(0, 180_001, 5_000)]  # 37 reports over 3 minutes
    assert host.samples == 4  # at 0, 60 s, 120 s and 180 s
    assert seen[:12] == [1.0] * 12 and seen[12] == 2.0 and seen[-1] == 4.0


def test_a_changed_interval_applies_at_once_and_copies_are_independent() -> None:
    a, host = agent(1.0)
    first = a._host_usage(0)
    first.cpu.usage = 99.0  # the report's copy; the cached measurement is untouched
    assert a._host_usage(1_000).cpu.usage == 1.0
    a.config = a.config.with_updates({"loadBalancerHostUsageCheckIntervalMinutes": 0.01}, dynamic_only=True)
    a._host_usage(1_600)
    assert host.samples == 2


def test_broker_version_is_semver() -> None:
    from balancer.placement.filters import Version

    assert str(Version.parse(agent_version())) == agent_version()
