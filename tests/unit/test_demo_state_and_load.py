"""Issue 34: a demo every verb finds (its state file), a banner that says what to type, and a load that
lives (a diurnal wave, tenant bursts, a broker leaving and returning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.broker.workload import Scenario, living_scenario
from service.commands import endpoints
from service.demo.cluster import TENANTS, Demo, DemoOptions, cli_hint
from service.demo.state import DemoState, read_state, remove_state, write_state

NAMESPACES = {"public/default": 16, **TENANTS}


def test_state_round_trip_and_only_while_the_demo_lives(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    mine = DemoState(os.getpid(), "http://127.0.0.1:1", "127.0.0.1:2", "/h")
    assert write_state(mine, path) == path
    assert read_state(path) == mine
    remove_state(os.getpid(), path)
    assert not path.exists()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    write_state(DemoState(int(dead.stdout), "http://127.0.0.1:1", "127.0.0.1:2"), path)
    assert read_state(path) is None  # a demo killed with -9 leaves a record naming a dead pid
    assert read_state(path, check_alive=False) == DemoState(
        int(dead.stdout), "http://127.0.0.1:1", "127.0.0.1:2"
    )
    remove_state(os.getpid(), path)
    assert path.exists()  # not ours: left alone
    remove_state(int(dead.stdout), path)
    assert not path.exists()


def test_two_demos_each_keep_a_record_and_verbs_find_the_newest_then_the_other(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        first = DemoState(other.pid, "http://127.0.0.1:1", "127.0.0.1:2")
        second = DemoState(os.getpid(), "http://127.0.0.1:3", "127.0.0.1:4")
        write_state(first, path)
        write_state(second, path)
        assert read_state(path) == second
        remove_state(os.getpid(), path)  # the second demo stops
        assert read_state(path) == first  # the first, still running, is found again
        write_state(second, path)
        other.kill()
        other.wait()
        assert read_state(path) == second
        remove_state(os.getpid(), path)
        assert not path.exists()  # the dead demo's record goes with the last live one
    finally:
        other.kill()
        other.wait()


def test_the_single_record_file_of_an_earlier_loadmgr_is_read(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:7", "zk_hosts": "127.0.0.1:8"}))
    assert read_state(path) == DemoState(os.getpid(), "http://127.0.0.1:7", "127.0.0.1:8")
    write_state(DemoState(os.getpid(), "http://127.0.0.1:9", "127.0.0.1:8"), path)
    assert json.loads(path.read_text())["demos"][0]["url"] == "http://127.0.0.1:9"  # replaced, not doubled
    assert len(json.loads(path.read_text())["demos"]) == 1


@pytest.mark.parametrize(
    "text",
    ["", "[]", "{", '{"pid": "1", "url": "http://x", "zk_hosts": "z"}',
     '{"pid": 1, "url": "ftp://x", "zk_hosts": "z"}', '{"pid": 1, "url": "http://x", "zk_hosts": ""}',
     '{"pid": -3, "url": "http://x", "zk_hosts": "z"}', '{"pid": true, "url": "http://x", "zk_hosts": "z"}',
     '{"demos": 3}', '{"demos": [1, "x", null]}', '{"demos": []}'],
)  # fmt: skip
def test_a_malformed_state_file_is_ignored(tmp_path: Path, text: str) -> None:
    path = tmp_path / "demo.json"
    path.write_text(text)
    assert read_state(path, check_alive=False) is None


def test_flags_then_env_then_the_demo_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "demo.json"
    monkeypatch.setenv("LOADMGR_DEMO_STATE", str(path))
    monkeypatch.delenv("LOADMGR_URL", raising=False)
    monkeypatch.delenv("LOADMGR_ZK_HOSTS", raising=False)
    assert endpoints.rest_url(None) == endpoints.DEFAULT_URL and endpoints.zk_hosts(None) is None
    write_state(DemoState(os.getpid(), "http://127.0.0.1:5555", "127.0.0.1:6666"), path)
    assert endpoints.rest_url(None) == "http://127.0.0.1:5555"
    assert endpoints.zk_hosts(None) == "127.0.0.1:6666"
    assert endpoints.rest_url("http://flag") == "http://flag"
    monkeypatch.setenv("LOADMGR_URL", "http://env")
    assert endpoints.rest_url(None) == "http://env" and endpoints.demo_url() is None
    monkeypatch.setenv("LOADMGR_ZK_HOSTS", "zk:2181")
    assert endpoints.zk_hosts(None) is None  # Settings reads the environment itself


def test_the_banner_says_what_to_type() -> None:
    assert cli_hint("/usr/local/bin/loadmgr", "/x/.venv/bin/loadmgr") == "loadmgr"
    assert cli_hint(None, "/x/.venv/bin/loadmgr") == "/x/.venv/bin/loadmgr"
    assert cli_hint(None, "-c") == "python -m service.commands.cli"


def _cluster_rate(s: Scenario, t_s: float) -> dict[str, float]:
    now = s.start_ms + int(t_s * 1000)
    out: dict[str, float] = {}
    for b in s.bundles:
        ns = b.rsplit("/", 1)[0]
        out[ns] = out.get(ns, 0.0) + s.load_of(b, now).msg_rate_in
    return out


def test_the_living_load_waves_bursts_and_is_seeded() -> None:
    s = living_scenario(NAMESPACES, seed=7, msg_rate=4000.0, period_s=600.0, start_ms=1_000_000)
    again = living_scenario(NAMESPACES, seed=7, msg_rate=4000.0, period_s=600.0, start_ms=1_000_000)
    assert s == again and s != living_scenario(NAMESPACES, seed=8, msg_rate=4000.0, start_ms=1_000_000)
    samples = [_cluster_rate(s, t) for t in range(0, 1800, 15)]
    for ns in NAMESPACES:
        series = [x[ns] for x in samples]
        assert max(series) > 1.5 * min(series), ns  # the tenant's day is not flat
    # The tenants peak at different times: the load moves between the brokers serving them.
    peaks = {ns: max(range(40), key=lambda i: samples[i][ns]) for ns in NAMESPACES}
    assert len(set(peaks.values())) == len(NAMESPACES)
    # Bursts every few minutes for the first 30 minutes, each on one tenant.
    early = [b for b in s.bursts if b.at_s < 1800]
    assert 6 <= len(early) <= 14 and {b.key for b in early} <= set(NAMESPACES)
    b = early[0]
    mid = s.start_ms + int((b.at_s + b.duration_s / 2) * 1000)
    before = s.start_ms + int((b.at_s - 1) * 1000)
    bundle = next(x for x in s.bundles if x.startswith(b.key + "/"))
    assert s.load_of(bundle, mid).msg_rate_in > 1.8 * s.load_of(bundle, before).msg_rate_in


class _Agent:
    def __init__(self, broker_id: str, stopped: list[str]) -> None:
        self.broker_id = broker_id
        self.stopped = stopped
        self.store = self

    def stop(self, release: bool = True) -> None:
        self.stopped.append(self.broker_id)


def test_a_broker_leaves_and_returns_in_a_living_demo() -> None:
    demo = Demo(
        DemoOptions(brokers=4, living=True, churn_period_s=600, churn_down_s=120, publish_state=False)
    )
    stopped: list[str] = []
    started: list[str] = []
    demo.agents = [_Agent(b, stopped) for b in demo.broker_ids]
    demo._start_agent = started.append  # type: ignore[method-assign]
    demo.started_at = 1000.0
    assert demo.churn(1000.0 + 200) is None  # not in the first 4 minutes
    left = demo.churn(1000.0 + 250)
    assert left is not None and "broker-2:8082 leaves" in left and demo.away == "broker-2:8082"
    assert stopped == ["broker-2:8082", "broker-2:8082"]  # the agent, then its ZooKeeper session
    assert demo.present() == ["broker-1:8081", "broker-3:8083", "broker-4:8084"]
    assert demo.churn(1000.0 + 300) is None
    back = demo.churn(1000.0 + 240 + 121)
    assert back is not None and "returns" in back and started == ["broker-2:8082"] and demo.away is None
    assert demo.churn(1000.0 + 240 + 600 + 1) is not None and demo.away == "broker-3:8083"  # the next one
    steady = Demo(DemoOptions(brokers=4, living=False, publish_state=False))
    steady.started_at = 1000.0
    assert steady.churn(1000.0 + 250) is None


def test_the_demo_prints_splits_and_config_updates_without_none() -> None:
    from service.demo.cluster import decision_line

    children = {"children": ["ns/a/0x10_0x18", "ns/a/0x18_0x20"]}
    why = {"reason": "manual_split", "message": "operator split", "numbers": children}
    split = decision_line("manual", "ns/a/0x10_0x20", "b1", None, why)
    assert split.startswith("manual: split ns/a/0x10_0x20 on b1 into ns/a/0x10_0x18, ns/a/0x18_0x20")
    assert "placement decides" not in split
    config = decision_line("manual", None, None, None, {"reason": "config_update", "message": "changed"})
    assert config == "manual: [config_update] changed" and "None" not in config
    move = decision_line("shedding", "ns/a/0x0_0x1", "b1", None, {"reason": "balance", "message": "m"})
    assert move == "shedding: ns/a/0x0_0x1 b1 -> (placement decides)  [balance] m"
