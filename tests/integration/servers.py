"""HTTP helpers for the security tests: an app served by uvicorn in a thread, and a trap listener
that records every request it gets (to prove a forged leader address never receives one)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import uvicorn

MODULAR = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"


@contextlib.contextmanager
def served(app: Any, port: int, certfile: Path | None = None, keyfile: Path | None = None) -> Iterator[None]:
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Trap:
    """A listener posing as a leader: records method, path and Authorization of each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        trap = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                trap.requests.append((self.command, self.path, self.headers.get("Authorization")))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"decision": {"stolen": true}}')

            do_GET = do_POST = do_PUT = do_DELETE = _record

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Trap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class PulsarAdminStandIn:
    """Stands in for Pulsar's admin API where the real-broker tier is too heavy: records every
    request (method, path, Authorization) and answers a lookup with ``lookup_broker``, a broker's
    runtime configuration with its load manager off, anything else ``{}``."""

    def __init__(self, lookup_broker: str = "b9:8080", answer: bytes | None = None) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                stand_in.requests.append((self.command, self.path, self.headers.get("Authorization")))
                if stand_in.answer is not None:
                    body = stand_in.answer
                elif self.path.startswith("/lookup/"):
                    body = (
                        f'{{"brokerUrl": "pulsar://{lookup_broker}", "httpUrl": "http://{lookup_broker}"}}'
                    ).encode()
                elif self.path.endswith("/configuration/runtime"):
                    body = json.dumps(
                        {
                            "loadBalancerSheddingEnabled": "false",
                            "loadBalancerAutoBundleSplitEnabled": "false",
                            "loadManagerClassName": MODULAR,
                        }
                    ).encode()
                else:
                    body = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _record

            def log_message(self, *args: Any) -> None:
                pass

        self.answer = answer
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def lookups(self) -> list[tuple[str, str, str | None]]:
        return [r for r in self.requests if r[1].startswith("/lookup")]

    def __enter__(self) -> PulsarAdminStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
