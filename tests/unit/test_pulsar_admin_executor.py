"""The Pulsar admin executor sends exactly the requests Pulsar's admin API expects, checked by a
local HTTP server: PUT .../{bundle}/unload?destinationBroker=... and PUT .../{bundle}/split?unload=
...&splitAlgorithmName=... with the boundaries as a JSON list of longs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from service.broker.pulsar_source import PulsarBrokerSource, sum_topics_per_bundle
from service.errors import ExecutorError
from service.pulsar.admin import PulsarAdmin, PulsarAdminExecutor


class Recorder(ThreadingHTTPServer):
    requests: list[dict[str, Any]]
    status: int = 204
    reply: bytes = b""
    routes: dict[str, bytes]  # GET path -> 200 with this body (a namespace's bundle list)


class Handler(BaseHTTPRequestHandler):
    server: Recorder

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        url = urlsplit(self.path)
        self.server.requests.append(
            {
                "method": self.command,
                "path": url.path,
                "query": parse_qs(url.query),
                "body": self.rfile.read(length),
                "headers": dict(self.headers),
            }
        )
        routed = self.server.routes.get(url.path) if self.command == "GET" else None
        status, reply = (200, routed) if routed is not None else (self.server.status, self.server.reply)
        self.send_response(status)
        self.send_header("Content-Length", str(len(reply)))
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply)

    do_PUT = do_GET = _record

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Recorder]:
    srv = Recorder(("127.0.0.1", 0), Handler)
    srv.requests = []
    srv.routes = {}
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv: Recorder) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def executor(srv: Recorder, token: str | None = None) -> PulsarAdminExecutor:
    return PulsarAdminExecutor(PulsarAdmin(url(srv), token=token), split_seen_within_s=0.5)


DEFAULT_BUNDLES = "/admin/v2/namespaces/public/default/bundles"


def _boundaries(*cuts: int) -> bytes:
    return json.dumps({"boundaries": [f"0x{c:08x}" for c in cuts], "numBundles": len(cuts) - 1}).encode()


def test_unload_to_a_destination(server: Recorder) -> None:
    ex = executor(server, token="s3cret")
    ex.unload("public/default/0x00000000_0x40000000", "b1:8080", "b2:8080")
    (req,) = server.requests
    assert req["method"] == "PUT"
    assert req["path"] == "/admin/v2/namespaces/public/default/0x00000000_0x40000000/unload"
    assert req["query"] == {"destinationBroker": ["b2:8080"]}
    assert req["body"] == b""
    assert req["headers"]["Authorization"] == "Bearer s3cret"


def test_unload_without_destination_lets_pulsar_place(server: Recorder) -> None:
    executor(server).unload("t/ns/0x80000000_0xffffffff", "b1:8080", None)
    (req,) = server.requests
    assert req["path"] == "/admin/v2/namespaces/t/ns/0x80000000_0xffffffff/unload"
    assert req["query"] == {}
    assert "Authorization" not in req["headers"]


def test_split_with_algorithm_and_positions(server: Recorder) -> None:
    ex = executor(server)
    server.routes[DEFAULT_BUNDLES] = _boundaries(0, 0x10000000, 0x20000000, 0x40000000, 0xFFFFFFFF)
    children = ex.split(
        "public/default/0x00000000_0x40000000",
        "specified_positions_divide",
        [0x10000000, 0x20000000],
        unload=True,
    )
    # The children, read back from Pulsar's bundle list after the split.
    assert children == [
        "public/default/0x00000000_0x10000000",
        "public/default/0x10000000_0x20000000",
        "public/default/0x20000000_0x40000000",
    ]
    req, listed = server.requests
    assert listed["method"] == "GET" and listed["path"] == DEFAULT_BUNDLES
    assert req["path"] == "/admin/v2/namespaces/public/default/0x00000000_0x40000000/split"
    assert req["query"] == {"unload": ["true"], "splitAlgorithmName": ["specified_positions_divide"]}
    assert json.loads(req["body"]) == [268435456, 536870912]
    assert req["headers"]["Content-Type"] == "application/json"


def test_split_with_the_brokers_default_algorithm(server: Recorder) -> None:
    server.routes[DEFAULT_BUNDLES] = _boundaries(0, 0x20000000, 0x40000000, 0xFFFFFFFF)
    executor(server).split("public/default/0x00000000_0x40000000", None, None)
    req = server.requests[0]
    assert req["query"] == {"unload": ["false"]}
    assert req["body"] == b""


def test_a_split_pulsar_answers_but_does_not_make_is_a_409_naming_the_bundle(server: Recorder) -> None:
    # Pulsar answers 204 to specified_positions_divide on a bundle with one loaded topic, and does
    # nothing: the bundle list still holds it after the wait.
    server.routes[DEFAULT_BUNDLES] = _boundaries(0, 0x40000000, 0xFFFFFFFF)
    with pytest.raises(ExecutorError) as e:
        executor(server).split("public/default/0x00000000_0x40000000", None, [0x10000000])
    assert e.value.status == 409
    assert "0x00000000_0x40000000" in str(e.value) and "not split" in str(e.value)
    assert [r["method"] for r in server.requests][:2] == ["PUT", "GET"]


def test_v1_namespace_uses_the_unversioned_resource(server: Recorder) -> None:
    executor(server).unload("prop/us-west/ns/0x00000000_0xffffffff", None, None)
    assert server.requests[0]["path"] == "/admin/namespaces/prop/us-west/ns/0x00000000_0xffffffff/unload"


def test_refusal_is_an_executor_error_with_the_status(server: Recorder) -> None:
    server.status = 412
    server.reply = b'{"reason":"bundle not owned"}'
    with pytest.raises(ExecutorError) as e:
        executor(server).unload("public/default/0x00000000_0x40000000", None, "b2:8080")
    assert e.value.status == 412 and "bundle not owned" in str(e.value)


def test_broker_stats_topics_are_summed_per_bundle(server: Recorder) -> None:
    doc = {
        "public/default": {
            "0x00000000_0x40000000": {
                "persistent": {
                    "persistent://public/default/a": {
                        "msgRateIn": 10.0,
                        "msgRateOut": 20.0,
                        "msgThroughputIn": 1000.0,
                        "msgThroughputOut": 2000.0,
                        "producerCount": 2,
                        "subscriptions": {"s": {"consumers": [{}, {}, {}]}},
                    },
                    "persistent://public/default/b": {"msgRateIn": 5.0, "publishers": [{}]},
                },
                "non-persistent": {"non-persistent://public/default/c": {"msgRateOut": 1.5}},
            }
        }
    }
    server.reply = json.dumps(doc).encode()
    server.status = 200
    source = PulsarBrokerSource(url(server))
    stats = source.bundle_stats((), 0)
    # The topics document is no load report: the source falls back to summing topics.
    paths = [r["path"] for r in server.requests]
    assert paths == ["/admin/v2/broker-stats/load-report", "/admin/v2/broker-stats/topics"]
    assert source.host_usage(stats) is None  # measured locally then
    s = stats["public/default/0x00000000_0x40000000"]
    assert (s.msg_rate_in, s.msg_rate_out) == (15.0, 21.5)
    assert (s.msg_throughput_in, s.msg_throughput_out) == (1000.0, 2000.0)
    assert (s.topics, s.producer_count, s.consumer_count) == (3, 3, 3)
    assert sum_topics_per_bundle({"ns/x": "junk"}) == {}


def test_the_brokers_own_load_report_is_used_when_served(server: Recorder) -> None:
    report = {
        "loadReportType": "LocalBrokerData",
        "cpu": {"usage": 150.0, "limit": 400.0},
        "memory": {"usage": 512.0, "limit": 2048.0},  # JVM heap, MB
        "directMemory": {"usage": 256.0, "limit": 4096.0},
        "bandwidthIn": {"usage": 100.0, "limit": 1000.0},
        "bandwidthOut": {"usage": 50.0, "limit": 1000.0},
        "lastStats": {"public/default/0x00000000_0xffffffff": {"msgRateIn": 7.0, "topics": 2}},
    }
    server.reply = json.dumps(report).encode()
    server.status = 200
    source = PulsarBrokerSource(url(server))
    stats = source.bundle_stats((), 0)
    assert [r["path"] for r in server.requests] == ["/admin/v2/broker-stats/load-report"]
    assert stats["public/default/0x00000000_0xffffffff"].msg_rate_in == 7.0
    usage = source.host_usage(stats)
    assert usage is not None
    assert usage.memory.percent_usage() == 25.0 and usage.direct_memory.limit == 4096.0
