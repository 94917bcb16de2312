"""The one JSON parse boundary (service/json_bounds.py): size and depth are refused before any parser
runs, brackets inside strings do not count, and every failure is JsonRefused with one line."""

from __future__ import annotations

import pytest

from service.json_bounds import MAX_DEPTH, JsonRefused, loads
from service.zookeeper.session.validate import BadNode, decode


def test_nesting_past_the_limit_is_refused_without_recursion() -> None:
    for deep in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000):
        with pytest.raises(JsonRefused, match="nested deeper"):
            loads(deep)
        with pytest.raises(BadNode, match="nested deeper"):  # ZooKeeper's reader shares the bound
            decode(deep)
    at_limit = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert loads(at_limit) is not None


def test_brackets_inside_strings_do_not_count() -> None:
    text = '{"s": "' + "[" * 5000 + '\\"[["}'
    assert loads(text) == {"s": "[" * 5000 + '"[['}


def test_size_utf8_and_syntax_are_one_line_reasons() -> None:
    with pytest.raises(JsonRefused, match="byte limit"):
        loads(b" " * 11, max_bytes=10)
    with pytest.raises(JsonRefused, match="not UTF-8"):
        loads(b'"\xff"')
    with pytest.raises(JsonRefused, match="not JSON"):
        loads(b'{"values": {not json')
    assert loads(b"") is None and loads(None) is None
