"""A real Pulsar broker's load figures, from its own admin API.

First ``GET /admin/v2/broker-stats/load-report``: the broker's LocalBrokerData as its load manager
builds it (``lastStats`` per bundle, and the JVM's heap and direct memory, CPU and NIC usage as the
broker measures them), so the agent reports Pulsar's own figures. Where that is not a
LocalBrokerData (another load manager, an older broker, an error), the per-bundle stats come from
``GET /admin/v2/broker-stats/topics`` (``{namespace: {bundleRange: {"persistent"|"non-persistent":
{topic: stats}}}}``), summed per bundle as the broker builds ``lastStats``, and host usage is
measured locally.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

import httpx

from balancer.models import LocalBrokerData, NamespaceBundleStats, SystemResourceUsage
from balancer.topic_stats import sum_topics_per_bundle
from service.errors import ExecutorError
from service.json_bounds import MAX_HTTP_BYTES, JsonRefused, loads

log = logging.getLogger(__name__)

TOPICS_STATS_PATH = "/admin/v2/broker-stats/topics"
LOAD_REPORT_PATH = "/admin/v2/broker-stats/load-report"


class PulsarBrokerSource:
    """Reads one broker's topic stats over its admin API; host usage is measured locally."""

    manages_ownership = False

    def __init__(
        self,
        web_url: str,
        token: str | None = None,
        timeout_s: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = client or httpx.Client(
            base_url=web_url.rstrip("/"), headers=headers, timeout=timeout_s
        )
        self._report: LocalBrokerData | None = None

    def load_report(self) -> LocalBrokerData | None:
        """The broker's own LocalBrokerData, or None when it does not serve one we can use."""
        try:
            resp = self._client.get(LOAD_REPORT_PATH)
            if resp.status_code != 200:
                return None
            doc = loads(resp.content, max_bytes=MAX_HTTP_BYTES)
        except (httpx.HTTPError, JsonRefused):
            return None
        if not isinstance(doc, dict) or (
            "lastStats" not in doc and doc.get("loadReportType") != "LocalBrokerData"
        ):
            return None  # e.g. the SimpleLoadManager's LoadReport
        try:
            return LocalBrokerData.model_validate(doc)
        except ValueError as e:  # pydantic's ValidationError is a ValueError
            log.info("load report of %s not usable: %s", self._client.base_url, e)
            return None

    def bundle_stats(self, owned: Collection[str], now_ms: int) -> dict[str, NamespaceBundleStats]:
        self._report = self.load_report()
        if self._report is not None:
            return dict(self._report.last_stats)
        try:
            resp = self._client.get(TOPICS_STATS_PATH)
            resp.raise_for_status()
            doc = loads(resp.content, max_bytes=MAX_HTTP_BYTES)
        except (httpx.HTTPError, JsonRefused) as e:
            raise ExecutorError(f"GET {TOPICS_STATS_PATH}: {e}") from None
        if not isinstance(doc, dict):
            raise ExecutorError(f"GET {TOPICS_STATS_PATH}: expected a JSON object")
        return sum_topics_per_bundle(doc)

    def host_usage(self, stats: dict[str, NamespaceBundleStats]) -> SystemResourceUsage | None:
        """The broker's own figures (JVM heap as memory, direct memory) when it sent a load report."""
        return self._report.usages() if self._report is not None else None

    def close(self) -> None:
        self._client.close()
