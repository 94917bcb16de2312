"""Issue 34: one output convention (-o table|json|yaml), REST errors as one readable line, and
pulsar-admin's ``NAMESPACE --bundle RANGE`` form, checked without a server."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import yaml

from balancer.errors import InvalidInput
from service.commands.cli import main
from service.commands.client import ApiError, bundle_of, error_line, leader_line


def test_vectors_print_json_and_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vectors", "run", "tests/vectors/hash", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] == 0 and doc["passed"] == len(doc["rounds"]) > 0
    assert main(["vectors", "run", "tests/vectors/hash", "-q", "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["rounds"] == []


def test_rest_errors_are_one_line_and_say_whose_they_are() -> None:
    body = {"error": "UnknownBundle", "detail": {"bundle": "public/default/0x0_0x1", "reason": "no layout"}}
    line = error_line(404, body)
    assert line == "HTTP 404 UnknownBundle: bundle=public/default/0x0_0x1; reason=no layout"
    assert ApiError(404, body).exit_code == 2  # the caller's mistake, as argparse's
    assert ApiError(401, {"error": "Unauthorized", "detail": "token"}).exit_code == 2
    assert ApiError(503, {"error": "StoreUnavailable", "detail": "zk"}).exit_code == 1
    assert ApiError(0, "cannot reach").exit_code == 1
    multi = error_line(422, {"error": "Invalid", "detail": [{"msg": "bad\nvalue", "loc": ["body", "x"]}]})
    assert "\n" not in multi and "bad value" in multi


def _ns(bundle: str, rng: str | None) -> argparse.Namespace:
    return argparse.Namespace(bundle=bundle, bundle_range=rng)


def test_both_bundle_forms() -> None:
    full = "public/default/0x00000000_0x10000000"
    assert bundle_of(_ns(full, None)) == full
    assert bundle_of(_ns("public/default", "0x00000000_0x10000000")) == full
    with pytest.raises(InvalidInput, match="bundle"):
        bundle_of(_ns("public/default", "zz"))
    with pytest.raises(InvalidInput, match="bundle"):
        bundle_of(_ns("public/default", None))


def test_the_leader_is_named_not_dumped() -> None:
    info = {"leader": {"brokerId": "leader-8080", "serviceUrl": "http://h:8080"}, "isLeader": True}
    assert leader_line(info) == "leader: leader-8080 at http://h:8080 (the instance answering)"
    assert leader_line({"leader": None, "isLeader": False}).startswith("leader: none elected")


def test_replay_comparison_is_valid_json_and_yaml() -> None:
    from service.commands.output import dump
    from service.commands.replay_output import finite

    c = {"a": math.inf, "b": [1.0, math.nan], "c": {"d": 2.0}}
    assert json.loads(json.dumps(finite(c), allow_nan=False)) == {
        "a": None,
        "b": [1.0, None],
        "c": {"d": 2.0},
    }
    assert yaml.safe_load(dump(finite(c), "yaml")) == {"a": None, "b": [1.0, None], "c": {"d": 2.0}}
