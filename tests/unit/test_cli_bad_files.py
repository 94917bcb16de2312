"""Command lines given a bad file end in one line on stderr naming what is wrong and where: a
``broker.conf`` whose ``\\u`` escape Java would refuse (exit 2, the file, the line and the key, never
the exception's class name), and a history that is not there (exit 3, one line)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from service.commands.cli import main

BAD_CONF = "# a broker\nloadBalancerSheddingEnabled=true\n\nloadBalancerLoadSheddingStrategy = org.\\u12G4x\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", ["config", "serve"])
def test_a_bad_u_escape_in_broker_conf_names_the_file_line_and_key(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(BAD_CONF)
    monkeypatch.setenv("LOADMGR_API_TOKEN", "a-long-enough-admin-token-for-serve")
    argv = (
        ["config", "show", "--local", "--broker-conf", str(conf)]
        if command == "config"
        else ["serve", "--no-history", "--port", str(_free_port()), "--broker-conf", str(conf)]
    )
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    (line,) = err.strip().splitlines()
    assert str(conf) in line and "line 4" in line and "loadBalancerLoadSheddingStrategy" in line, line
    assert "\\u12G4" in line and "Error" not in line, line


def test_replay_of_a_missing_history_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-history"
    rc = main(["replay", "--history", str(missing)])
    err = capsys.readouterr().err
    assert rc == 3, err
    (line,) = err.strip().splitlines()
    assert f"no history at {missing}" in line, line
