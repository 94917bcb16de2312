"""The project's transaction builder skips kazoo's path normalisation only where it would change
nothing: for every path and argument, the operations it queues are kazoo's own (or it raises what
kazoo raises)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import TransactionRequest
from kazoo.security import make_digest_acl

from service.zookeeper.session.client import Client, Transaction, plain_path

_paths = st.text(alphabet="/.ab-0_", max_size=14) | st.sampled_from(
    ["/", "/a", "/a/", "//a", "/a/./b", "/a/../b", "/a/.", "/a/..", "a/b", "", "/loadmgr/hints/b-1/t%2Fn-"]
)
_values = st.sampled_from([b"", b"{}", b"x" * 10, "text", None])
_versions = st.sampled_from([-1, 0, 7, "1", None, True])
_acls = st.sampled_from([None, [], [make_digest_acl("u", "p", all=True)], "acl"])
_flags = st.sampled_from([False, True, 0, 1])


def _ops(tx: Any, call: str, *args: Any) -> tuple[str, Any]:
    try:
        getattr(tx, call)(*args)
    except Exception as e:
        return "raised", type(e)
    return "queued", [(type(op), tuple(op)) for op in tx.operations]


@pytest.fixture(scope="module", params=["127.0.0.1:2181", "127.0.0.1:2181/chroot/x"])
def client(request: pytest.FixtureRequest) -> Client:
    return Client(hosts=request.param)  # never started: building requests needs no connection


@settings(max_examples=300, deadline=None)
@given(path=_paths, value=_values, acl=_acls, ephemeral=_flags, sequence=_flags, version=_versions)
def test_same_operations_as_kazoo(
    client: Client, path: str, value: Any, acl: Any, ephemeral: Any, sequence: Any, version: Any
) -> None:
    for call, args in (
        ("create", (path, value, acl, ephemeral, sequence)),
        ("set_data", (path, value, version)),
        ("delete", (path, version)),
        ("check", (path, version)),
    ):
        assert _ops(Transaction(client), call, *args) == _ops(TransactionRequest(client), call, *args)


def test_a_default_acl_is_used_as_kazoo_uses_it() -> None:
    acl = [make_digest_acl("u", "p", all=True)]
    client = Client(hosts="127.0.0.1:2181", default_acl=acl)
    ours, theirs = Transaction(client), TransactionRequest(client)
    ours.create("/a/b", b"v", sequence=True)
    theirs.create("/a/b", b"v", sequence=True)
    assert list(ours.operations) == list(theirs.operations) and ours.operations[0].acl == acl


def test_the_client_builds_ours() -> None:
    assert isinstance(Client(hosts="127.0.0.1:2181").transaction(), Transaction)


@pytest.mark.parametrize(
    ("path", "plain"),
    [
        ("/a", True),
        ("/a/b-", True),
        ("/", False),
        ("/a/", False),
        ("//a", False),
        ("/a/./b", False),
        ("a", False),
    ],
)
def test_plain_path(path: str, plain: bool) -> None:
    assert plain_path(path) is plain
