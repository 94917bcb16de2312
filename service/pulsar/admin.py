"""Pulsar's admin REST API, as ``pulsar-admin`` speaks it.

:class:`PulsarAdmin` is the HTTP client: one or more web service URLs (``http://b1:8080,b2:8080``,
tried in turn when one does not answer), a bearer token (Pulsar's token authentication) and the
TLS options Pulsar's admin client takes (trust certs, client certificate and key for mutual TLS,
allow insecure). Brokers answer redirects (307) to the owner or the leader broker; the client
follows them with the same method and body, as pulsar-admin does.

:class:`PulsarAdminExecutor` carries out the leader's decisions through it:
``PUT /admin/v2/namespaces/{tenant}/{ns}/{bundle}/unload?destinationBroker=<brokerId>`` and
``PUT …/{bundle}/split?unload=<bool>&splitAlgorithmName=<name>`` with the boundaries as a JSON list.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from balancer.bundles import BundleRange, split_bundle_name
from balancer.errors import ConfigError
from service.errors import ExecutorError, StaleWrite
from service.json_bounds import MAX_HTTP_BYTES, JsonRefused, loads
from service.pulsar.warm_up import Warmer

log = logging.getLogger(__name__)

SPECIFIED = "specified_positions_divide"
# Pulsar's supportedNamespaceBundleSplitAlgorithms (NamespaceBundleSplitAlgorithm's names).
SPLIT_ALGORITHMS = (
    "range_equally_divide",
    "topic_count_equally_divide",
    SPECIFIED,
    "flow_or_qps_equally_divide",
)


@dataclass(frozen=True)
class PulsarTls:
    """Pulsar admin client's TLS settings (``tlsTrustCertsFilePath``, ``tlsCertificateFilePath``,
    ``tlsKeyFilePath``, ``tlsAllowInsecureConnection``)."""

    trust_certs: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    allow_insecure: bool = False

    def verify(self) -> ssl.SSLContext | bool:
        if self.allow_insecure:
            return False
        ctx = ssl.create_default_context(cafile=str(self.trust_certs) if self.trust_certs else None)
        if self.cert_file is not None:
            if self.key_file is None:
                raise ConfigError("pulsar_tls_keyfile", None, "a client certificate needs its key")
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        return ctx


def parse_urls(value: str, field: str = "pulsar_admin_url") -> list[str]:
    """``http://h1:8080,h2:8080`` (pulsar-admin's multi-host form) -> one base URL per host."""
    urls: list[str] = []
    scheme = ""
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        if "://" in part:
            scheme, _, rest = part.partition("://")
        elif scheme:
            rest = part
        else:
            raise ConfigError(field, value, "each URL needs http:// or https://")
        if scheme not in ("http", "https") or not rest or "/" in rest.rstrip("/"):
            raise ConfigError(field, value, f"{part!r} is not an http(s)://host:port URL")
        urls.append(f"{scheme}://{rest.rstrip('/')}")
    if not urls:
        raise ConfigError(field, value, "no URL given")
    return urls


class PulsarAdmin:
    """A small pulsar-admin: the calls loadmgr, its checks and its tests make."""

    def __init__(
        self,
        urls: str | Sequence[str],
        token: str | None = None,
        tls: PulsarTls | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.urls = parse_urls(urls) if isinstance(urls, str) else list(urls)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._tls = tls or PulsarTls()
        verify = self._tls.verify() if any(u.startswith("https") for u in self.urls) else True
        self._client = httpx.Client(
            headers=headers, timeout=timeout_s, follow_redirects=True, verify=verify, transport=transport
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport --------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        base: str | None = None,
    ) -> httpx.Response:
        """One call; without ``base``, the first of ``urls`` that answers. HTTP errors raise
        :class:`ExecutorError` with the broker's own message and status."""
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if method in ("PUT", "POST") else {}
        last: Exception | None = None
        for url in [base] if base else self.urls:
            try:
                resp = self._client.request(
                    method, url + path, params=params, content=content or b"", headers=headers
                )
            except httpx.HTTPError as e:
                last = e
                continue
            if resp.status_code >= 300:
                raise ExecutorError(
                    f"{method} {path}: HTTP {resp.status_code}: {_reason(resp)}", resp.status_code
                )
            return resp
        raise ExecutorError(f"{method} {path}: no broker answered ({type(last).__name__}: {last})")

    def status(self, url: str, timeout_s: float) -> int:
        """The HTTP status ``url`` answers a GET with (httpx.HTTPError when it does not answer)."""
        return self._client.get(url, timeout=timeout_s).status_code

    def get_json(self, path: str, base: str | None = None, params: dict[str, str] | None = None) -> Any:
        resp = self.request("GET", path, base=base, params=params)
        try:
            return loads(resp.content, max_bytes=MAX_HTTP_BYTES)
        except JsonRefused:
            raise ExecutorError(f"GET {path}: the answer is not JSON: {resp.text[:200]!r}") from None

    # ---- reads ------------------------------------------------------------------------------------
    def clusters(self) -> list[str]:
        return [str(c) for c in self.get_json("/admin/v2/clusters")]

    def brokers(self, cluster: str) -> list[str]:
        return sorted(str(b) for b in self.get_json(f"/admin/v2/brokers/{quote(cluster)}"))

    def leader_broker(self) -> dict[str, Any]:
        return dict(self.get_json("/admin/v2/brokers/leaderBroker"))

    def runtime_config(self, base: str) -> dict[str, str]:
        """Every setting of the broker at ``base`` as it runs (broker.conf plus dynamic updates)."""
        return {
            str(k): str(v) for k, v in self.get_json("/admin/v2/brokers/configuration/runtime", base).items()
        }

    def dynamic_config(self) -> dict[str, str]:
        """The cluster's dynamic overrides (``/admin/configuration``), as pulsar-admin's
        ``brokers get-all-dynamic-config``."""
        return {str(k): str(v) for k, v in self.get_json("/admin/v2/brokers/configuration/values").items()}

    def update_dynamic_config(self, key: str, value: str) -> None:
        self.request("POST", f"/admin/v2/brokers/configuration/{quote(key)}/{quote(value, safe='')}")

    def delete_dynamic_config(self, key: str) -> None:
        self.request("DELETE", f"/admin/v2/brokers/configuration/{quote(key)}")

    def load_report(self, base: str) -> dict[str, Any]:
        return dict(self.get_json("/admin/v2/broker-stats/load-report", base))

    def bundles(self, namespace: str) -> list[str]:
        doc = self.get_json(f"/admin/v2/namespaces/{namespace}/bundles")
        b = [str(x) for x in doc["boundaries"]]
        return [f"{b[i]}_{b[i + 1]}" for i in range(len(b) - 1)]

    def lookup(self, topic: str) -> str:
        """The broker id (``host:port`` of its web service) serving ``topic``
        (``persistent://tenant/ns/name``); the lookup assigns the bundle if nobody owns it."""
        domain, _, rest = topic.partition("://")
        doc = self.get_json(f"/lookup/v2/topic/{domain}/{rest}")
        url = doc.get("httpUrl") or doc.get("httpUrlTls") or ""
        return str(url).split("://", 1)[-1].rstrip("/")

    def owned_bundles(self, cluster: str, broker: str) -> list[str]:
        doc = self.get_json(f"/admin/v2/brokers/{quote(cluster)}/{quote(broker)}/ownedNamespaces")
        return sorted(str(k) for k in doc)

    # ---- writes -----------------------------------------------------------------------------------
    @staticmethod
    def bundle_path(bundle: str, action: str) -> str:
        ns, rng = split_bundle_name(bundle)
        parts = ns.split("/")
        # v1 namespaces (tenant/cluster/ns) live under the unversioned resource.
        prefix = "/admin/v2/namespaces" if len(parts) == 2 else "/admin/namespaces"
        return f"{prefix}/{ns}/{rng.text}/{action}"

    def unload(self, bundle: str, destination: str | None = None) -> None:
        params = {"destinationBroker": destination} if destination else {}
        self.request("PUT", self.bundle_path(bundle, "unload"), params=params)

    def shutdown_broker(
        self, base: str, max_concurrent_unload_per_sec: int | None = None, forced_terminate_topic: bool = True
    ) -> str:
        """Pulsar's graceful shutdown of the broker at ``base`` (``/admin/v2/brokers/shutdown``): it
        unloads what it still owns (at most ``max_concurrent_unload_per_sec`` a second) and exits.

        Pulsar answers only once the broker has closed, and a broker that closes its web server
        first may never answer: a request sent whose answer timed out or was cut off counts as
        requested (``"requested (no answer: …)"``). Refused or not sent: ExecutorError."""
        params = {"forcedTerminateTopic": "true" if forced_terminate_topic else "false"}
        if max_concurrent_unload_per_sec is not None:
            params["maxConcurrentUnloadPerSec"] = str(int(max_concurrent_unload_per_sec))
        try:
            resp = self._client.request("POST", base + "/admin/v2/brokers/shutdown", params=params)
        except (httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError) as e:
            return f"requested (no answer: {type(e).__name__})"
        except httpx.HTTPError as e:
            raise ExecutorError(
                f"POST /admin/v2/brokers/shutdown: {base} not reached ({type(e).__name__}: {e})"
            ) from None
        if resp.status_code >= 300:
            raise ExecutorError(
                f"POST /admin/v2/brokers/shutdown: HTTP {resp.status_code}: {_reason(resp)}", resp.status_code
            )
        return "requested"

    def split(
        self, bundle: str, algorithm: str | None, boundaries: Sequence[int] | None, unload: bool = False
    ) -> None:
        params = {"unload": "true" if unload else "false"}
        if algorithm:
            params["splitAlgorithmName"] = algorithm
        body = [int(p) for p in boundaries] if boundaries else None
        self.request("PUT", self.bundle_path(bundle, "split"), params=params, body=body)


def _reason(resp: httpx.Response) -> str:
    """Pulsar's error body is ``{"reason": "..."}``; anything else is shown cut short."""
    try:
        doc = loads(resp.content)
    except JsonRefused:
        return resp.text[:300]
    if isinstance(doc, dict) and isinstance(doc.get("reason"), str):
        return str(doc["reason"])[:300]
    return resp.text[:300]


class PulsarAdminExecutor:
    """The leader's executor in Pulsar mode: Pulsar's brokers own and move bundles themselves.

    ``remote_split``: Pulsar computes the children from the algorithm (or takes the boundaries
    given with ``specified_positions_divide``) and assigns them; the children are read back from
    Pulsar's bundle list after the split."""

    name = "pulsar-admin"
    remote_split = True

    def __init__(
        self,
        admin: PulsarAdmin,
        split_seen_within_s: float = 10.0,
        warmer: Warmer | None = None,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        self.admin = admin
        self.warmer = warmer
        # Asked again after a warm-up, which may take seconds: a leader that lost its lease
        # meanwhile must not unload.
        self.may_write = may_write
        # A broker other than the one that split may serve the bundle list from a cache that the
        # metadata store's notification refreshes a moment later: wait that long for the children.
        self._split_seen_within_s = split_seen_within_s

    def close(self) -> None:
        self.admin.close()

    bundle_path = staticmethod(PulsarAdmin.bundle_path)

    def prepare(self, bundle: str, destination: str | None) -> None:
        """Warm ``destination`` before ``bundle`` moves there, if it is due (:mod:`service.pulsar.warm_up`);
        StaleWrite when this instance stopped leading meanwhile."""
        warmed = destination and self.warmer is not None and self.warmer.warm(destination) is not None
        if warmed and self.may_write is not None and not self.may_write():
            raise StaleWrite(f"not the leader any more after warming {destination}: {bundle} not unloaded")

    def unload(self, bundle: str, source: str | None, destination: str | None, reason: str = "") -> None:
        self.prepare(bundle, destination)
        self.admin.unload(bundle, destination)
        log.info("pulsar admin: unloaded %s from %s to %s (%s)", bundle, source, destination or "any", reason)

    def split(
        self, bundle: str, algorithm: str | None, positions: Sequence[int] | None, unload: bool = False
    ) -> list[str]:
        if positions and not algorithm:
            algorithm = SPECIFIED
        self.admin.split(bundle, algorithm, positions, unload)
        log.info(
            "pulsar admin: split %s (%s, boundaries %s, unload=%s)", bundle, algorithm, positions, unload
        )
        return self._children(bundle, algorithm)

    def _children(self, bundle: str, algorithm: str | None) -> list[str]:
        """The children Pulsar made, read from its bundle list; ExecutorError (409) when the bundle
        is still listed: Pulsar answers 204 to a split it did not make (its topic-based algorithms,
        ``specified_positions_divide`` included, split only a bundle whose owner has loaded more
        than one of its topics)."""
        ns, rng = split_bundle_name(bundle)
        deadline = time.monotonic() + self._split_seen_within_s
        while True:
            ranges = self.admin.bundles(ns)
            if rng.text not in ranges:
                inside = [BundleRange.parse(r) for r in ranges]
                return [f"{ns}/{r.text}" for r in inside if rng.lower <= r.lower and r.upper <= rng.upper]
            if time.monotonic() >= deadline:
                raise ExecutorError(
                    f"Pulsar answered the split of {bundle} ({algorithm or 'its default algorithm'}) but "
                    f"its bundles still include {rng.text} {self._split_seen_within_s:.0f} s later: not "
                    "split (Pulsar's topic-based algorithms, specified_positions_divide included, split "
                    "only a bundle whose owner has loaded more than one of its topics)",
                    status=409,
                )
            time.sleep(0.2)
