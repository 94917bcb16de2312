"""When a broker measures its host again (Pulsar's ``loadBalancerHostUsageCheckIntervalMinutes``).

Pulsar measures host usage on its own schedule (``ModularLoadManagerImpl`` schedules
``calculateBrokerHostUsage`` every ``loadBalancerHostUsageCheckIntervalMinutes``), and every load
report in between reuses the last measurement. So a broker reporting every 5 s still takes one
CPU/NIC measurement a minute by default, and its rates are one-minute averages.
"""

from __future__ import annotations

from balancer.config import LoadBalancerConfig


def host_usage_due(last_sample_ms: int | None, now_ms: int, config: LoadBalancerConfig) -> bool:
    """True when the host must be measured for the report at ``now_ms`` (None: never measured)."""
    if last_sample_ms is None:
        return True
    return now_ms - last_sample_ms >= config.loadBalancerHostUsageCheckIntervalMinutes * 60_000
