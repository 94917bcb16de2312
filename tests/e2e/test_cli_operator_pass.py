"""Issue 49 against the running demo: what an operator types, answered as the README promises."""

from __future__ import annotations

import json

import pytest

from service.commands.cli import main
from service.demo.cluster import Demo

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("namespace", ["nosuch/ns", "public"])
def test_an_unknown_or_malformed_namespace_exits_2_not_an_empty_table(
    demo: Demo, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bundles", "--namespace", namespace, "--url", demo.url]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and namespace in captured.err
    assert main(["bundles", "--namespace", "public/default", "--json", "--url", demo.url]) == 0
    assert json.loads(capsys.readouterr().out)


def test_config_set_of_an_unknown_key_exits_2(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["config", "set", "noSuchKey=1", "--token", demo.opts.token or "", "--url", demo.url]
    assert main(argv) == 2
    assert "HTTP 4" in capsys.readouterr().err
