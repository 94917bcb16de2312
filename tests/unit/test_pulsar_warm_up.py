"""Before the first move into a broker, Pulsar mode runs Pulsar's broker health check on that broker
(``GET /admin/v2/brokers/health``) and only then unloads: checked request by request on a local HTTP
server that plays both the admin endpoint and the destination broker."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from service.errors import StaleWrite
from service.pulsar.admin import PulsarAdmin, PulsarAdminExecutor
from service.pulsar.warm_up import HEALTH, Warmer

BUNDLE = "public/default/0x00000000_0x40000000"
UNLOAD = f"/admin/v2/namespaces/{BUNDLE}/unload"


class Server(ThreadingHTTPServer):
    seen: list[tuple[str, str]]
    status: dict[str, int]


class Handler(BaseHTTPRequestHandler):
    server: Server

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.seen.append((self.command, path))
        status = self.server.status.get(path, 204)
        body = b"ok" if status == 200 else b""
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(("127.0.0.1", 0), Handler)
    srv.seen, srv.status = [], {HEALTH: 200}
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(
    srv: Server, timeout_s: float = 5.0, may_write: Any = None
) -> tuple[PulsarAdminExecutor, str, Clock, list[str]]:
    broker = f"127.0.0.1:{srv.server_address[1]}"
    admin = PulsarAdmin(f"http://{broker}")
    clock, results = Clock(), []
    warmer = Warmer(
        admin.status, "http", timeout_s, every_s=300, clock=clock, on_result=lambda r, s: results.append(r)
    )
    return PulsarAdminExecutor(admin, warmer=warmer, may_write=may_write), broker, clock, results


def test_health_check_on_the_destination_before_its_first_move_and_again_after_five_minutes(
    server: Server,
) -> None:
    ex, broker, clock, results = make(server)
    ex.unload(BUNDLE, "b1:8080", broker)
    assert server.seen == [("GET", HEALTH), ("PUT", UNLOAD)]
    ex.unload(BUNDLE, "b1:8080", broker)  # warm: straight to the unload
    assert server.seen[2:] == [("PUT", UNLOAD)]
    clock.t += 300  # a broker may have restarted since: cold again
    ex.unload(BUNDLE, "b1:8080", broker)
    assert server.seen[3:] == [("GET", HEALTH), ("PUT", UNLOAD)]
    assert results == ["ok", "ok"]


def test_no_destination_no_check_and_zero_timeout_turns_it_off(server: Server) -> None:
    ex, broker, _, _ = make(server)
    ex.unload(BUNDLE, "b1:8080", None)
    assert server.seen == [("PUT", UNLOAD)]
    off, broker, _, results = make(server, timeout_s=0)
    off.unload(BUNDLE, "b1:8080", broker)
    assert server.seen[1:] == [("PUT", UNLOAD)]
    assert results == []


def test_a_refused_check_turns_warming_off_and_the_move_still_goes(server: Server) -> None:
    server.status[HEALTH] = 403
    ex, broker, clock, results = make(server)
    ex.unload(BUNDLE, "b1:8080", broker)
    clock.t += 1000
    ex.unload(BUNDLE, "b1:8080", broker)
    assert server.seen == [("GET", HEALTH), ("PUT", UNLOAD), ("PUT", UNLOAD)]
    assert results == ["refused"]
    assert ex.warmer is not None and ex.warmer.disabled is not None and "403" in ex.warmer.disabled


def test_a_failed_check_is_counted_and_the_move_still_goes(server: Server) -> None:
    server.status[HEALTH] = 500
    ex, broker, _, results = make(server)
    ex.unload(BUNDLE, "b1:8080", broker)
    assert server.seen == [("GET", HEALTH), ("PUT", UNLOAD)]
    assert results == ["failed"]


def test_an_unreachable_destination_is_a_failed_check_not_an_error(server: Server) -> None:
    ex, _, _, results = make(server)
    dead = "127.0.0.1:9"  # discard port: nothing listens
    ex.unload(BUNDLE, "b1:8080", dead)
    assert server.seen == [("PUT", UNLOAD)]
    assert results == ["failed"]


def test_a_leader_that_lost_its_lease_while_warming_does_not_unload(server: Server) -> None:
    leading = threading.Event()  # never set: the lease is gone once the check answers
    ex, broker, _, _ = make(server, may_write=leading.is_set)
    with pytest.raises(StaleWrite, match="not the leader"):
        ex.unload(BUNDLE, "b1:8080", broker)
    assert server.seen == [("GET", HEALTH)]


def test_two_threads_moving_into_one_broker_at_once_run_one_check() -> None:
    calls: list[str] = []
    gate = threading.Event()

    def slow_get(url: str, timeout: float) -> int:
        calls.append(url)
        gate.wait(5)
        return 200

    warmer = Warmer(slow_get, "http", 5.0)
    results: list[str | None] = []
    threads = [threading.Thread(target=lambda: results.append(warmer.warm("b2:8080"))) for _ in range(2)]
    for t in threads:
        t.start()
    while not calls:
        threading.Event().wait(0.01)
    gate.set()
    for t in threads:
        t.join(5)
    assert len(calls) == 1  # the second caller waited for the first and found the broker warm
    assert len(results) == 2 and results.count(None) == 1
