"""A broker report that nears ZooKeeper's jute.maxbuffer is warned about before writes start failing."""

from __future__ import annotations

from balancer.models import LocalBrokerData, NamespaceBundleStats
from service.zookeeper.metadata.records import JUTE_MAXBUFFER, report_size_warning
from service.zookeeper.session.wire import json_bytes


def _report(bundles: int) -> bytes:
    stats = {
        f"tenant/ns{i % 50:03d}/0x{i:08x}_0x{i + 1:08x}": NamespaceBundleStats(
            msg_rate_in=123.456, msg_rate_out=246.912, msg_throughput_in=126418.9, topics=4
        )
        for i in range(bundles)
    }
    local = LocalBrokerData()
    local.update(local.usages(), stats)
    return json_bytes(local.to_json_dict())


def test_reports_of_ordinary_brokers_pass_and_thousands_of_bundles_warn() -> None:
    small = _report(200)
    assert report_size_warning("b1:8080", len(small), 200) is None
    per_bundle = len(small) / 200
    near = int(0.85 * JUTE_MAXBUFFER / per_bundle)  # the bundle count that nears the limit
    big = _report(near)
    warning = report_size_warning("b1:8080", len(big), near)
    assert warning is not None and "b1:8080" in warning and str(len(big)) in warning
    assert "jute.maxbuffer" in warning and 2000 < near < 5000
