"""Hint paths (``docs/ownership.md``) quote names exactly as ``urllib.parse.quote(name, safe="")``
does: agents find their hints by these names, so the quick path for plain names must not change one."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from balancer.errors import InvalidInput
from service.zookeeper import paths as P

NAMES = [
    "public/default/0x00000000_0x40000000",
    "10.20.3.7:8080",
    "broker-1.example.com:8081",
    "tenant with space/ns/0x00000000_0xffffffff",
    "ténant/ns/0x0_0x1",
    "a%2Fb",
    "a+b=c&d?e#f",
    "~_.-",
    "",
    "日本/ns",
    "line\nbreak",
]


@pytest.mark.parametrize("name", NAMES)
def test_quote_all_is_urllibs(name: str) -> None:
    assert P.quote_all(name) == quote(name, safe="")


@given(st.text())
def test_quote_all_is_urllibs_for_any_text(name: str) -> None:
    assert P.quote_all(name) == quote(name, safe="")


def test_hint_prefix_names_broker_directory_and_bundle() -> None:
    prefix = P.hint_prefix("10.20.3.7:8080", "public/default/0x00000000_0x40000000")
    assert prefix == f"{P.BROKER_ASSIGNMENTS}/10.20.3.7%3A8080/public%2Fdefault%2F0x00000000_0x40000000#"
    assert P.hint_bundle(prefix.rsplit("/", 1)[1] + "0000000042") == "public/default/0x00000000_0x40000000"
    assert unquote(P.hint_dir("10.20.3.7:8080").rsplit("/", 1)[1]) == "10.20.3.7:8080"


def test_a_refused_broker_name_is_refused_every_time() -> None:
    for _ in range(2):  # the directory cache keeps answers, never a refusal
        with pytest.raises(InvalidInput):
            P.hint_dir("..")
