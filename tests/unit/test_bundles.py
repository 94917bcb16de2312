"""Bundle naming, layouts, topic lookup (incl. hash 0xffffffff) and splitting in balancer/bundles.py."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from balancer.bundles import (
    FULL_UPPER,
    BundleRange,
    NamespaceBundles,
    bundle_name,
    is_system_bundle,
    namespace_of,
    split_bundle_name,
    topic_hash,
)
from balancer.errors import InvalidInput

HASH_DIR = Path(__file__).resolve().parents[1] / "vectors" / "hash"


def test_naming_round_trip() -> None:
    r = BundleRange(0x10, FULL_UPPER)
    name = bundle_name("pulsar/use/ns1", r)
    assert name == "pulsar/use/ns1/0x00000010_0xffffffff"
    assert split_bundle_name(name) == ("pulsar/use/ns1", r)
    assert namespace_of(name) == "pulsar/use/ns1"
    with pytest.raises(InvalidInput):
        split_bundle_name("no-range")


def test_initial_layout() -> None:
    assert NamespaceBundles.initial("t/ns", 4).boundaries == (
        0,
        0x40000000,
        0x80000000,
        0xC0000000,
        FULL_UPPER,
    )
    assert NamespaceBundles.initial("t/ns", 1).bundle_names == ["t/ns/0x00000000_0xffffffff"]
    with pytest.raises(InvalidInput):
        NamespaceBundles.initial("t/ns", 0)


def test_find_bundle_edges() -> None:
    layout = NamespaceBundles.initial("t/ns", 4)
    assert (
        layout.find_range(0x40000000).lower == 0x40000000
    )  # a boundary belongs to the bundle starting there
    assert layout.find_range(0x3FFFFFFF).upper == 0x40000000
    assert layout.find_range(FULL_UPPER) == BundleRange(0xC0000000, FULL_UPPER)  # the closed last bundle
    topic = "persistent://t/ns/my-topic"
    h = zlib.crc32(topic.encode()) & 0xFFFFFFFF
    assert layout.find_bundle("persistent://t/ns/my-topic") == bundle_name("t/ns", layout.find_range(h))
    with pytest.raises(InvalidInput, match="namespace"):
        layout.find_bundle("persistent://other/ns/x")


def test_short_topic_name_normalised() -> None:
    assert topic_hash("my-topic") == topic_hash("persistent://public/default/my-topic")


def test_split_and_policies() -> None:
    layout = NamespaceBundles.initial("t/ns", 2)
    new = layout.split(BundleRange(0x80000000, FULL_UPPER), [0xC0000000])
    assert new.to_policies() == {
        "boundaries": ["0x00000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 3,
    }
    assert NamespaceBundles.from_policies("t/ns", new.to_policies()) == new
    with pytest.raises(InvalidInput):
        layout.split(BundleRange(0, 0x80000000), [0x80000000])


def test_system_bundles() -> None:
    assert is_system_bundle("pulsar/system/0x00000000_0xffffffff")
    assert is_system_bundle("pulsar/use/broker-1:8080/0x00000000_0xffffffff")
    assert not is_system_bundle("public/default/0x00000000_0xffffffff")


def test_hash_vectors_facts() -> None:
    find = json.loads((HASH_DIR / "find_bundle_topic1.json").read_text())
    assert topic_hash(find["input"]["topic"]) == find["expected"]["hash"]
    layout = NamespaceBundles.from_texts(find["input"]["namespace"], find["input"]["boundaries"])
    assert layout.find_bundle(find["input"]["topic"]) == find["expected"]["bundle"]
    inc = json.loads((HASH_DIR / "bundle_includes.json").read_text())
    assert topic_hash(inc["input"]["topic"]) == inc["input"]["hash"]
    fmt = json.loads((HASH_DIR / "bundle_range_formatting.json").read_text())
    got = [bundle_name(c["namespace"], BundleRange(c["lower"], c["upper"])) for c in fmt["input"]["cases"]]
    assert got == fmt["expected"]["names"]


def test_a_layouts_bundle_names_are_built_once_and_handed_out_as_copies() -> None:
    """The leader lists every live bundle each reconcile (100,000 names at 100k bundles, issue 49 item
    13): a layout is immutable, so its names are formatted once; each caller gets its own list."""
    from balancer.bundles import NamespaceBundles

    layout = NamespaceBundles.initial("t/ns", 64)
    first = layout.bundle_names
    first.append("t/ns/not-a-bundle")
    again = layout.bundle_names
    assert len(again) == 64 and again[0] == "t/ns/0x00000000_0x04000000" and again is not first
    assert layout._names is layout._names  # the same tuple: built once
    assert again == [str(n) for n in again] == [f"t/ns/{r.text}" for r in layout.ranges]
