"""The one settings class of the service: process-level settings from environment or a .env file.

Load-balancer behaviour lives in :class:`balancer.config.LoadBalancerConfig` (Pulsar's keys);
these settings say where things are (ZooKeeper, HTTP, history) and who this process is.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from balancer.config import LoadBalancerConfig, env_overrides
from balancer.errors import ConfigError


class Settings(BaseSettings):
    """``LOADMGR_*`` environment variables (e.g. ``LOADMGR_ZK_HOSTS``)."""

    model_config = SettingsConfigDict(env_prefix="LOADMGR_", env_file=".env", extra="ignore")

    zk_hosts: str = Field("127.0.0.1:2181", description="ZooKeeper connection string")
    zk_chroot: str = Field("", description="Optional chroot, e.g. /pulsar-cluster-a")
    zk_session_timeout_s: float = Field(
        10.0, gt=0, le=3600, allow_inf_nan=False, description="ZooKeeper session timeout, seconds"
    )
    # About 4 znodes per bundle (layout share, assignment, ownership, bundle data) plus the watches
    # a leader keeps on them: 1 GiB holds 100,000 bundles with room (README, "Sizing").
    zk_heap_mb: int = Field(
        1024, ge=64, description="Heap of the embedded ZooKeeper (`loadmgr zookeeper`), MiB"
    )
    instance_id: str = Field("", description="This instance's id (default host:http_port)")
    cluster: str = Field(
        "",
        description="Pulsar's clusterName: whose /admin/clusters/<cluster> isolation policies and failure "
        "domains apply, and the metrics' cluster label (empty: the only cluster in ZooKeeper)",
    )
    http_host: str = Field("127.0.0.1", description="REST bind address")
    http_port: int = Field(8080, ge=0, le=65535, description="REST port (0: any free one)")
    api_token: str | None = Field(None, description="Admin bearer token: every mutation needs it")
    api_token_file: Path | None = Field(None, description="File holding the admin token (a mounted secret)")
    api_read_token: str | None = Field(None, description="Read-only bearer token (GET routes, dry-run)")
    api_read_token_file: Path | None = Field(None, description="File holding the read-only token")
    api_reads_open: bool = Field(False, description="Serve reads without any token (mutations need admin)")
    api_metrics_open: bool = Field(True, description="Serve /metrics without a token (Pulsar's default)")
    insecure: bool = Field(False, description="Allow an open API (no admin token) beyond loopback")
    advertised_url: str = Field("", description="URL followers forward to (default scheme://host:port)")
    leader_urls: str = Field("", description="Comma-separated service URLs a follower may forward to")
    http_tls_certfile: Path | None = Field(None, description="PEM certificate: serve HTTPS")
    http_tls_keyfile: Path | None = Field(None, description="PEM private key for http_tls_certfile")
    http_tls_ca: Path | None = Field(None, description="CA that verifies the leader's HTTPS on forward")
    max_request_bytes: int = Field(
        1 << 20, ge=1024, le=1 << 30, description="Largest request body accepted, bytes (1 KiB-1 GiB)"
    )
    allowed_origins: str = Field("", description="Comma-separated extra Origins allowed to mutate")
    allowed_hosts: str = Field("", description="Host names served; '': loopback names on loopback, '*': any")
    zk_auth: str | None = Field(None, description="ZooKeeper credentials user:password")
    zk_auth_scheme: str = Field(
        "digest", description="How zk_auth authenticates: digest, or sasl (DIGEST-MD5)"
    )
    zk_auth_file: Path | None = Field(None, description="File holding zk_auth's user:password")
    zk_acl: str = Field("", description="ACL of created nodes, e.g. 'auth::cdrwa,world:anyone:r'")
    zk_tls: bool = Field(False, description="Connect to ZooKeeper's secureClientPort over TLS")
    zk_tls_ca: Path | None = Field(None, description="CA bundle that verifies ZooKeeper's certificate")
    zk_tls_certfile: Path | None = Field(None, description="Client certificate for ZooKeeper mutual TLS")
    zk_tls_keyfile: Path | None = Field(None, description="Client key for zk_tls_certfile")
    zk_tls_verify: bool = Field(True, description="Verify ZooKeeper's certificate (keep on)")
    broker_conf: Path | None = Field(None, description="A Pulsar broker.conf to read load-balancer keys from")
    # ---- Pulsar mode (docs/pulsar-mode.md) ----
    mode: Literal["zookeeper", "pulsar"] = Field(
        "zookeeper",
        description="zookeeper: loadmgr's agents own bundles; pulsar: decide for Pulsar's own brokers "
        "through their admin API",
    )
    pulsar_admin_url: str = Field(
        "",
        description="Pulsar mode: the brokers' web service URL(s), http://b1:8080,b2:8080 (pulsar-admin's)",
    )
    pulsar_admin_token: str | None = Field(None, description="Pulsar mode: token for Pulsar's admin API")
    pulsar_admin_token_file: Path | None = Field(None, description="File holding pulsar_admin_token")
    pulsar_tls_trust_certs: Path | None = Field(None, description="CA file that verifies the brokers' HTTPS")
    pulsar_tls_certfile: Path | None = Field(None, description="Client certificate for the admin API (mTLS)")
    pulsar_tls_keyfile: Path | None = Field(None, description="Client key for pulsar_tls_certfile")
    pulsar_tls_allow_insecure: bool = Field(
        False, description="Accept any broker certificate (never in production)"
    )
    pulsar_beside_brokers: bool = Field(
        False,
        description="Pulsar mode: run beside the brokers' own shedding or auto-split in dry-run (decide and "
        "explain, never unload or split) instead of refusing",
    )
    pulsar_check_interval_s: float = Field(
        30.0, gt=0, le=3600, allow_inf_nan=False, description="How often the brokers' settings are re-read"
    )
    pulsar_warm_up_timeout_s: float = Field(
        10.0,
        ge=0,
        le=120,
        allow_inf_nan=False,
        description="Pulsar mode: before the first move into a broker (and every 5 minutes after), run "
        "Pulsar's broker health check on it, waiting at most this long, so that the broker's first topic "
        "is not loaded while clients wait (0: off)",
    )
    configuration_store: str = Field(
        "",
        description="Pulsar's configuration store (isolation policies, failure domains, namespace policies) "
        "when it is not the local ZooKeeper: host:port[,host:port][/chroot]",
    )
    history_uri: str = Field("./var/history", description="Where the leader appends load history (Parquet)")
    history_enabled: bool = Field(True, description="Append history rows each cycle")
    decision_log_size: int = Field(
        500, ge=1, le=1_000_000, description="Decisions kept in memory for GET /decisions"
    )
    log_level: str = Field("INFO", description="Python log level: DEBUG, INFO, WARNING, ERROR or CRITICAL")

    @field_validator("zk_heap_mb")
    @classmethod
    def _heap(cls, value: int) -> int:
        total = total_memory_mb()
        if total is not None and value > total:
            raise ValueError(f"more than this machine's {total} MiB of memory")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: str) -> str:
        # a path segment under /admin/clusters: Pulsar's NamedEntity characters, never "." or ".."
        if value and not NAMED_ENTITY.match(value):
            raise ValueError("expected a cluster name of letters, digits and -_=:. (not . or ..)")
        return value

    @field_validator("advertised_url", "leader_urls")
    @classmethod
    def _urls(cls, value: str) -> str:
        # what the leader node advertises and what followers may forward to: http(s) URLs only
        for url in (u.strip() for u in value.split(",")):
            if url and not is_http_url(url):
                raise ValueError(f"{url!r} is not an http(s) URL")
        return value

    @field_validator("http_host")
    @classmethod
    def _http_host(cls, value: str) -> str:
        host = value.strip()
        if not check_host(host):
            raise ValueError("expected an IP address or a host name")
        return host

    def admin_token(self) -> str | None:
        """The admin token from ``api_token`` or ``api_token_file`` (ConfigError naming the field)."""
        return secret(self.api_token, self.api_token_file, "api_token_file")

    def read_token(self) -> str | None:
        return secret(self.api_read_token, self.api_read_token_file, "api_read_token_file")

    def pulsar_token(self) -> str | None:
        return secret(self.pulsar_admin_token, self.pulsar_admin_token_file, "pulsar_admin_token_file")

    @property
    def pulsar_mode(self) -> bool:
        return self.mode == "pulsar"

    def zk_credentials(self) -> str | None:
        return secret(self.zk_auth, self.zk_auth_file, "zk_auth_file")

    @property
    def http_scheme(self) -> str:
        return "https" if self.http_tls_certfile is not None else "http"

    def service_url(self) -> str:
        """The URL other instances reach this one at: what the leader node advertises."""
        return (self.advertised_url or f"{self.http_scheme}://{self.http_host}:{self.http_port}").rstrip("/")

    def load_balancer_config(
        self, environ: dict[str, str], extra: dict[str, Any] | None = None
    ) -> LoadBalancerConfig:
        """broker.conf (if any), then ``PULSAR_PREFIX_<key>``/``LOADMGR_<key>`` overrides, then ``extra``."""
        base: dict[str, Any] = {}
        if self.broker_conf is not None:
            from balancer.config import parse_properties

            known = set(LoadBalancerConfig.model_fields)
            found = parse_properties(self.broker_conf.read_text(), str(self.broker_conf))
            base = {k: v for k, v in found.items() if k in known}
        base.update(env_overrides(environ))
        base.update(extra or {})
        return LoadBalancerConfig.from_dict(base)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Pulsar's NamedEntity (Java's \w is ASCII-only), minus "." and "..", which ZooKeeper reads as relative
NAMED_ENTITY = re.compile(r"^(?!\.\.?$)[-=:.\w]{1,256}$", re.ASCII)
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, an unclosed [
        return False


def check_host(host: str) -> bool:
    """An IP literal, or a DNS name whose labels are valid and which does not look like a broken IPv4
    literal (``999.1.1.1`` is neither: it must not reach the resolver, or the election, at all)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if not host or len(host) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        return False
    return not labels[-1].isdigit()  # a numeric last label is an IPv4 attempt, and this one failed


def total_memory_mb() -> int | None:
    """Physical memory of this machine, MiB (None where the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20))
    except (ValueError, OSError, AttributeError):
        return None


def secret(value: str | None, file: Path | None, field: str) -> str | None:
    """A secret given inline (env) or as a file; a file wins, so a mounted secret overrides a default.

    Surrounding whitespace is dropped: secret files usually end with a newline.
    """
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(field, str(file), f"cannot read the secret file: {e}") from None
        if not text:
            raise ConfigError(field, str(file), "the secret file is empty")
        return text
    return value.strip() if value and value.strip() else None
