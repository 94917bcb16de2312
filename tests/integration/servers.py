"""HTTP helpers for the security tests: an app served by uvicorn in a thread, and a trap listener
that records every request it gets (to prove a forged leader address never receives one)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import uvicorn


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
