"""Issue 49, items 5-7: exit codes as the README promises, errors that name the real mistake, and a
command with nothing to talk to that says so at once, in one line."""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from balancer.errors import InvalidInput
from service.commands import client
from service.commands.bundle_args import bundle_of
from service.commands.cli import build_parser, main

Handler = Callable[[httpx.Request], httpx.Response]
BROKERS = [{"broker": "broker-1:8081"}, {"broker": "broker-2:8082"}]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], list[httpx.Request]]:
    """Answers the CLI's REST calls with ``handler``; returns the requests it saw."""

    def install(handler: Handler) -> list[httpx.Request]:
        seen: list[httpx.Request] = []

        def record(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return handler(request)

        monkeypatch.setattr(
            client,
            "_client",
            lambda _a: httpx.Client(base_url="http://t", transport=httpx.MockTransport(record)),
        )
        return seen

    return install


def _error(status: int, name: str, detail: object) -> httpx.Response:
    return httpx.Response(status, json={"error": name, "detail": detail})


# ---- item 5: exit codes ---------------------------------------------------------------------------
def test_config_set_exits_2_on_a_4xx_and_1_when_the_server_fails(
    server: Callable[[Handler], list[httpx.Request]], capsys: pytest.CaptureFixture[str]
) -> None:
    server(lambda _r: _error(422, "ConfigError", [{"field": "nosuchKey", "reason": "unknown key"}]))
    assert main(["config", "set", "nosuchKey=1", "--url", "http://t"]) == 2
    assert "HTTP 422" in capsys.readouterr().err
    server(lambda _r: _error(503, "StoreUnavailable", "ZooKeeper away"))
    assert main(["config", "set", "loadBalancerSheddingIntervalMinutes=2", "--url", "http://t"]) == 1


# ---- item 6: errors that name the real mistake ----------------------------------------------------
def _bundle(bundle: str, rng: str | None = None) -> str:
    return bundle_of(argparse.Namespace(bundle=bundle, bundle_range=rng))


@pytest.mark.parametrize(
    ("bundle", "rng", "field", "says"),
    [
        ("public/default", None, "--bundle", "public/default is a namespace"),
        ("public/default/my-topic", None, "bundle", "topics lookup persistent://public/default/my-topic"),
        ("public/default", "my-topic", "--bundle", "looks like a topic"),
        ("persistent://public/default/t", None, "bundle", "is a topic, not a bundle"),
        ("public/default", "00000000_10000000", "--bundle", "0x00000000_0x10000000"),
        ("public/default", "0x0_0x1", "--bundle", "eight hex digits"),
        ("public", None, "bundle", "tenant/namespace/0xLOWER_0xUPPER"),
    ],
)
def test_what_is_not_a_bundle_is_said_for_what_it_is(
    bundle: str, rng: str | None, field: str, says: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        _bundle(bundle, rng)
    assert e.value.field == field and says in str(e.value)
    assert "bundle range='default'" not in str(e.value)


def test_a_bundle_in_either_form_is_read() -> None:
    assert _bundle("public/default/0x00000000_0x40000000") == "public/default/0x00000000_0x40000000"
    assert _bundle("public/default", "0x00000000_0x40000000") == "public/default/0x00000000_0x40000000"
    assert _bundle("pulsar/c/h:1/0x00000000_0xFFFFFFFF") == "pulsar/c/h:1/0x00000000_0xffffffff"


def test_a_bad_bundle_never_reaches_the_server(
    server: Callable[[Handler], list[httpx.Request]], capsys: pytest.CaptureFixture[str]
) -> None:
    seen = server(lambda _r: httpx.Response(404, json={"error": "UnknownBundle"}))
    argv = ["namespaces", "unload", "public/default", "--bundle", "00000000_10000000", "--url", "http://t"]
    assert main(argv) == 2
    assert seen == [] and "0x00000000_0x10000000" in capsys.readouterr().err


@pytest.mark.parametrize("destination", ["127.0.0.1", "http://broker-1:8081", "broker-9:8089"])
def test_a_destination_that_is_not_a_live_broker_lists_the_live_ones(
    destination: str, server: Callable[[Handler], list[httpx.Request]], capsys: pytest.CaptureFixture[str]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/brokers":
            return httpx.Response(200, json=BROKERS)
        return _error(404, "UnknownBroker", {"broker": destination, "reason": "not among the live brokers"})

    server(handler)
    argv = ["unload", "public/default/0x00000000_0x40000000", "-d", destination, "--url", "http://t"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--destination" in err and "broker-1:8081, broker-2:8082" in err


def test_specified_positions_divide_without_positions_names_the_flag(
    server: Callable[[Handler], list[httpx.Request]], capsys: pytest.CaptureFixture[str]
) -> None:
    seen = server(lambda _r: httpx.Response(200, json={}))
    argv = ["split", "public/default/0x00000000_0x40000000", "--algorithm", "specified_positions_divide"]
    assert main([*argv, "--url", "http://t"]) == 2
    err = capsys.readouterr().err
    assert "--positions" in err and "value=None" not in err and seen == []


# ---- item 7: flags where the operator types them, and nothing to talk to said at once --------------
def test_namespaces_takes_zk_after_the_action_too() -> None:
    args = build_parser().parse_args(["namespaces", "list", "--zk", "127.0.0.1:2999", "--chroot", "/c"])
    assert args.zk == "127.0.0.1:2999" and args.chroot == "/c"
    args = build_parser().parse_args(["namespaces", "--zk", "127.0.0.1:2998", "list"])
    assert args.zk == "127.0.0.1:2998"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_namespaces_with_nothing_running_says_so_without_a_zookeeper_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.zookeeper.metadata.store import ZkStore

    monkeypatch.setenv("LOADMGR_DEMO_STATE", str(tmp_path / "none.json"))
    monkeypatch.setenv("LOADMGR_ZK_HOSTS", f"127.0.0.1:{_closed_port()}")
    monkeypatch.delenv("LOADMGR_URL", raising=False)

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("no ZooKeeper client when nothing listens")

    monkeypatch.setattr(ZkStore, "start", never)
    assert main(["namespaces", "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no ZooKeeper answers" in err
    monkeypatch.delenv("LOADMGR_ZK_HOSTS")
    monkeypatch.setenv("LOADMGR_ZK_CHROOT", "")
    assert main(["namespaces", "list", "--zk", f"127.0.0.1:{_closed_port()}"]) == 1
    assert "no ZooKeeper answers" in capsys.readouterr().err


def test_the_connect_failure_names_the_transport_once() -> None:
    from service.settings import Settings
    from service.zookeeper.metadata.store import ZkStore

    store = ZkStore.from_settings(Settings(zk_hosts=f"127.0.0.1:{_closed_port()}"))
    with pytest.raises(Exception) as e:
        store.start(timeout_s=0.5)
    assert str(e.value).count("TCP") == 1, str(e.value)


def test_serve_with_zookeeper_down_is_one_line_before_any_client(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from service.leader.service import LoadManagerService

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("the service must not start without a ZooKeeper")

    monkeypatch.setattr(LoadManagerService, "start", never)
    assert main(["serve", "--no-history", "--port", "0", "--zk", f"127.0.0.1:{_closed_port()}"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("loadmgr: no ZooKeeper answers at 127.0.0.1:")
    assert json.dumps(err).count("kazoo") == 0
