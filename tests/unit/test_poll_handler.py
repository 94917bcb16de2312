"""The kazoo handler every project session uses (``service.zookeeper.session.poll_handler``): its
``select`` answers as kazoo's own does (ready readers and writers, a wait that times out, refusals of
a closed socket or a negative timeout), with one ``poll`` instead of a fresh epoll selector a call."""

from __future__ import annotations

import socket
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
