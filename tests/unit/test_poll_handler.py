"""The kazoo handler every project session uses (``service.zookeeper.session.poll_handler``): its
``select`` answers as kazoo's own does (ready readers and writers, a wait that times out, refusals of
a closed socket or a negative timeout), with one ``poll`` instead of a fresh epoll selector a call."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kazoo.handlers.utils import selector_select

from service.zookeeper.session.client import new_client
from service.zookeeper.session.poll_handler import PollHandler, poll_select
from service.zookeeper.session.security import ZkSecurity


@pytest.fixture
def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("select", [poll_select, selector_select], ids=["poll", "kazoo"])
def test_readable_only_once_data_is_there(select, pair) -> None:  # type: ignore[no-untyped-def]
    a, b = pair
    assert select([a], [], [], 0) == ([], [], [])
    b.send(b"x")
    r, w, x = select([a, b], [], [], 1.0)
    assert r == [a] and w == [] and x == []


def test_writable_and_readable_in_one_call(pair) -> None:  # type: ignore[no-untyped-def]
    # (kazoo's reports a descriptor ready both ways as readable only; kazoo never asks for writers)
    a, b = pair
    b.send(b"x")
    r, w, _ = poll_select([a], [a, b], [], 1.0)
    assert r == [a]
    assert sorted(w, key=id) == sorted([a, b], key=id)


def test_descriptors_as_ints_come_back_as_given(pair) -> None:  # type: ignore[no-untyped-def]
    a, b = pair
    b.send(b"x")
    assert poll_select([a.fileno()], [], [], 1.0)[0] == [a.fileno()]


def test_a_short_wait_waits_instead_of_spinning(pair) -> None:  # type: ignore[no-untyped-def]
    a, _ = pair
    t = time.monotonic()
    assert poll_select([a], [], [], 0.0004) == ([], [], [])
    assert time.monotonic() - t >= 0.0009  # rounded up to 1 ms, not down to a busy 0


def test_peer_closed_is_readable(pair) -> None:  # type: ignore[no-untyped-def]
    a, b = pair
    b.close()
    assert poll_select([a], [], [], 1.0)[0] == [a]  # kazoo then reads the EOF and drops the connection


@pytest.mark.parametrize("select", [poll_select, selector_select], ids=["poll", "kazoo"])
def test_refusals_match_kazoos(select, pair) -> None:  # type: ignore[no-untyped-def]
    a, _ = pair
    with pytest.raises(ValueError, match="non-negative"):
        select([a], [], [], -1)
    with pytest.raises(TypeError, match="number"):
        select([a], [], [], "1")
    a.close()
    with pytest.raises(TypeError, match="Invalid file descriptor"):
        select([a], [], [], 0)


def test_every_project_session_uses_it() -> None:
    client = new_client("127.0.0.1:1", ZkSecurity(), 5.0)
    assert isinstance(client.handler, PollHandler)


def test_buffered_socket_returns_the_stream_unchanged(pair) -> None:  # type: ignore[no-untyped-def]
    """Read in kazoo's pieces (a 4-byte length, then the body), the bytes come out as sent, and
    ``pending`` says what is held, so kazoo reads those without a select."""
    from service.zookeeper.session.poll_handler import BufferedSocket

    a, b = pair
    packets = [bytes([i % 256]) * (i * 7 % 300 + 1) for i in range(2_000)]
    stream = b"".join(len(p).to_bytes(4, "big") + p for p in packets)  # more than the socket holds
    sender = threading.Thread(target=b.sendall, args=(stream,), daemon=True)
    sender.start()
    buffered = BufferedSocket(a)
    got = []
    for _ in packets:
        head = _read(buffered, 4)
        got.append(_read(buffered, int.from_bytes(head, "big")))
    sender.join(10)
    assert got == packets and buffered.pending() == 0
    b.close()
    assert buffered.recv(10) == b""  # the peer closed: as the socket says it


def _read(sock, n: int) -> bytes:  # type: ignore[no-untyped-def]
    """kazoo's ``_read``: a select only when nothing is pending."""
    parts, left = [], n
    while left:
        if not sock.pending():
            assert PollHandler().select([sock], [], [], 2.0)[0] == [sock]
        chunk = sock.recv(left)
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def test_select_finds_a_buffered_socket_ready_and_still_sees_the_others(pair) -> None:  # type: ignore[no-untyped-def]
    from service.zookeeper.session.poll_handler import BufferedSocket

    a, b = pair
    c, d = socket.socketpair()
    try:
        buffered = BufferedSocket(a)
        b.sendall(b"0123456789")
        assert buffered.recv(3) == b"012" and buffered.pending() == 7
        started = time.monotonic()
        assert PollHandler().select([buffered, c], [], [], 5.0)[0] == [buffered]  # at once: not the 5 s
        assert time.monotonic() - started < 1.0
        d.send(b"x")  # a request to send (kazoo's wake-up pipe) is seen beside it
        r = PollHandler().select([buffered, c], [], [], 5.0)[0]
        assert set(map(id, r)) == {id(buffered), id(c)}
        assert buffered.recv(100) == b"3456789" and buffered.pending() == 0
        assert PollHandler().select([buffered], [], [], 0)[0] == []  # empty again: the socket decides
    finally:
        c.close()
        d.close()


def test_sessions_read_through_the_buffer_and_tls_is_left_alone() -> None:
    import ssl

    from service.zookeeper.session.poll_handler import BufferedSocket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        conn = PollHandler().create_connection(srv.getsockname(), timeout=5)
        assert type(conn) is BufferedSocket and conn.fileno() >= 0
        conn.close()
    finally:
        srv.close()
    assert issubclass(ssl.SSLSocket, socket.socket)  # create_connection returns an SSLSocket as is
