"""The one settings class of the service: process-level settings from environment or a .env file.

Load-balancer behaviour lives in :class:`balancer.config.LoadBalancerConfig` (Pulsar's keys);
these settings say where things are (ZooKeeper, HTTP, history) and who this process is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from balancer.config import LoadBalancerConfig, env_overrides


class Settings(BaseSettings):
    """``LOADMGR_*`` environment variables (e.g. ``LOADMGR_ZK_HOSTS``)."""

    model_config = SettingsConfigDict(env_prefix="LOADMGR_", env_file=".env", extra="ignore")

    zk_hosts: str = Field("127.0.0.1:2181", description="ZooKeeper connection string")
    zk_chroot: str = Field("", description="Optional chroot, e.g. /pulsar-cluster-a")
    zk_session_timeout_s: float = Field(
        10.0, gt=0, le=3600, allow_inf_nan=False, description="ZooKeeper session timeout, seconds"
    )
    instance_id: str = Field("", description="This instance's id (default host:http_port)")
    http_host: str = Field("127.0.0.1", description="REST bind address")
    http_port: int = Field(8080, ge=0, le=65535, description="REST port (0: any free one)")
    api_token: str | None = Field(None, description="Bearer token required for mutating REST calls")
    broker_conf: Path | None = Field(None, description="A Pulsar broker.conf to read load-balancer keys from")
    history_uri: str = Field("./var/history", description="Where the leader appends load history (Parquet)")
    history_enabled: bool = Field(True, description="Append history rows each cycle")
    decision_log_size: int = Field(
        500, ge=1, le=1_000_000, description="Decisions kept in memory for GET /decisions"
    )
    log_level: str = Field("INFO", description="Python log level")

    def load_balancer_config(
        self, environ: dict[str, str], extra: dict[str, Any] | None = None
    ) -> LoadBalancerConfig:
        """broker.conf (if any), then ``PULSAR_PREFIX_<key>``/``LOADMGR_<key>`` overrides, then ``extra``."""
        base: dict[str, Any] = {}
        if self.broker_conf is not None:
            from balancer.config import parse_properties

            known = set(LoadBalancerConfig.model_fields)
            base = {k: v for k, v in parse_properties(self.broker_conf.read_text()).items() if k in known}
        base.update(env_overrides(environ))
        base.update(extra or {})
        return LoadBalancerConfig.from_dict(base)
