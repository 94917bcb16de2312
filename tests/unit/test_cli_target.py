"""Issue 49, items 3 and 4: a verb without --url answers from the system this directory means, or
refuses naming the candidates; ``serve --mode pulsar`` registers itself the same way; a Pulsar-mode
history lives in a directory named by its cluster and never takes another cluster's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from balancer.config import LoadBalancerConfig
from balancer.errors import ConfigError
from service.commands import endpoints
from service.commands.cli import main
from service.commands.serve_history import check_history_owner, cluster_dir_name, history_location
from service.demo.state import AmbiguousTarget, DemoState, read_state, target, write_state
from service.settings import Settings


@pytest.fixture
def other_pid() -> Iterator[int]:
    """A live process that is not this one: another demo's pid."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "demo.json"
    monkeypatch.setenv("LOADMGR_DEMO_STATE", str(path))
    for var in ("LOADMGR_URL", "LOADMGR_ZK_HOSTS"):
        monkeypatch.delenv(var, raising=False)
    return path


def test_the_system_started_from_this_checkout_wins_over_a_newer_one_elsewhere(
    state: Path, tmp_path: Path, other_pid: int
) -> None:
    mine_dir, theirs_dir = tmp_path / "mine", tmp_path / "theirs"
    (mine_dir / "sub").mkdir(parents=True)
    theirs_dir.mkdir()
    mine = DemoState(
        other_pid, "http://127.0.0.1:8090", "127.0.0.1:2181", None, str(mine_dir), "pulsar", "pa"
    )
    theirs = DemoState(os.getpid(), "http://127.0.0.1:8080", "127.0.0.1:3000", None, str(theirs_dir))
    write_state(mine, state)
    write_state(theirs, state)  # newest: the one a verb used to take, whichever checkout it ran from
    assert target(state, str(mine_dir)) == mine
    assert target(state, str(mine_dir / "sub")) == mine  # anywhere in the checkout
    assert target(state, str(theirs_dir)) == theirs


def test_more_than_one_candidate_is_refused_naming_them(state: Path, tmp_path: Path, other_pid: int) -> None:
    a = DemoState(other_pid, "http://127.0.0.1:8090", "127.0.0.1:2181", None, "/srv/a", "pulsar", "pa")
    b = DemoState(os.getpid(), "http://127.0.0.1:8080", "127.0.0.1:3000", None, "/srv/b")
    write_state(a, state)
    write_state(b, state)
    with pytest.raises(AmbiguousTarget) as e:
        target(state, str(tmp_path))
    text = str(e.value)
    assert "http://127.0.0.1:8090" in text and "http://127.0.0.1:8080" in text and "--url" in text
    assert "Pulsar cluster 'pa'" in text and "/srv/b" in text
    # two started from this very directory: just as ambiguous
    write_state(DemoState(other_pid, a.url, a.zk_hosts, None, str(tmp_path), "pulsar", "pa"), state)
    write_state(DemoState(os.getpid(), b.url, b.zk_hosts, None, str(tmp_path)), state)
    with pytest.raises(AmbiguousTarget):
        target(state, str(tmp_path))


def test_one_system_running_is_found_from_anywhere_and_instances_of_one_cluster_count_once(
    state: Path, other_pid: int
) -> None:
    only = DemoState(os.getpid(), "http://127.0.0.1:8080", "127.0.0.1:3000", None, "/srv/b")
    write_state(only, state)
    assert target(state, "/elsewhere") == only
    # a second instance of the same cluster (same ZooKeeper) is not a second candidate
    write_state(DemoState(other_pid, "http://127.0.0.1:8081", "127.0.0.1:3000", None, "/srv/c"), state)
    assert target(state, "/elsewhere").url == "http://127.0.0.1:8081"  # type: ignore[union-attr]


def test_a_verb_without_url_refuses_with_exit_2_and_sends_nothing(
    state: Path, other_pid: int, capsys: pytest.CaptureFixture[str]
) -> None:
    a = DemoState(other_pid, "http://127.0.0.1:9", "127.0.0.1:2181", None, "/srv/a", "pulsar", "pa")
    write_state(a, state)
    write_state(DemoState(os.getpid(), "http://127.0.0.1:9", "127.0.0.1:3000", None, "/srv/b"), state)
    assert main(["unload", "public/default/0x00000000_0x40000000"]) == 2
    err = capsys.readouterr().err
    assert "which system?" in err and "cannot reach" not in err


def test_records_of_an_earlier_loadmgr_still_read(state: Path) -> None:
    state.write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:7", "zk_hosts": "127.0.0.1:8"}))
    assert target(state, "/x") == DemoState(os.getpid(), "http://127.0.0.1:7", "127.0.0.1:8")
    odd = {"pid": os.getpid(), "url": "http://x", "zk_hosts": "z", "kind": "?"}
    state.write_text(json.dumps({"demos": [odd]}))
    assert read_state(state) is None  # an unknown kind is not trusted


def test_serve_in_pulsar_mode_registers_itself_where_verbs_look(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings(
        mode="pulsar", zk_hosts="127.0.0.1:2999", http_port=8095, pulsar_admin_url="http://127.0.0.1:8080"
    )
    endpoints.register_serving(settings, "./var/history/pa", "pa")
    found = target(state, str(tmp_path))
    assert found is not None and found.kind == "pulsar" and found.cluster == "pa"
    assert found.url == "http://127.0.0.1:8095" and found.cwd == str(tmp_path)
    assert found.history == str(tmp_path / "var/history/pa")
    assert endpoints.rest_url(None) == "http://127.0.0.1:8095"


def test_serve_in_zookeeper_mode_does_not_register(state: Path) -> None:
    endpoints.register_serving(Settings(zk_hosts="127.0.0.1:2999", http_port=8095), None, None)
    assert not state.exists()


def test_a_pulsar_mode_history_is_named_by_its_cluster() -> None:
    settings = Settings(
        mode="pulsar",
        cluster="pulsar-a",
        history_uri="./var/history",
        pulsar_admin_url="http://127.0.0.1:8080",
    )
    assert history_location(settings) == ("./var/history/pulsar-a", "pulsar-a")
    plain = Settings(history_uri="./var/history")
    assert history_location(plain) == ("./var/history", None)  # the demo's and a ZooKeeper-mode serve's
    assert cluster_dir_name("cycles") == "cluster-cycles"  # never taken for one of the datasets
    assert cluster_dir_name("../x y") == "_x_y"


def test_a_history_recorded_for_another_cluster_is_refused(tmp_path: Path) -> None:
    from service.longterm.history_meta import read_meta, write_meta

    uri = str(tmp_path / "h")
    write_meta(uri, LoadBalancerConfig(), "demo")
    assert (read_meta(uri)[0] or {}).get("cluster") == "demo"
    check_history_owner(uri, "demo")  # its own: appended to
    check_history_owner(uri, None)  # unnamed: nothing to compare
    with pytest.raises(ConfigError, match="cluster 'demo'"):
        check_history_owner(uri, "pulsar-a")
