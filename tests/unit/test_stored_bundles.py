"""Stored bundle data packed in the watch cache comes back as the BundleData that was read (issue 49)."""

from __future__ import annotations

import pytest

from balancer.explain import explain
from balancer.models import BundleData
from service.leader.cluster_view import DecisionRecord
from service.leader.stored_bundles import StoredBundles, pack, unpack


def _data() -> BundleData:
    return BundleData.model_validate(
        {
            "shortTermData": {"maxSamples": 10, "numSamples": 7, "msgRateIn": 1.5, "msgThroughputOut": 9e9},
            "longTermData": {
                "maxSamples": 1000,
                "numSamples": 999,
                "msgRateOut": 0.25,
                "msgThroughputIn": 3.0,
            },
            "topics": 12,
        }
    )


def test_a_packed_bundle_data_unpacks_equal_and_serialises_the_same() -> None:
    data = _data()
    back = unpack(pack(data))
    assert back == data
    assert back.to_json_dict() == data.to_json_dict()


def test_each_lookup_is_a_fresh_object_so_a_caller_cannot_change_the_cache() -> None:
    stored = StoredBundles({"t/ns/0x00000000_0xffffffff": pack(_data())})
    first = stored["t/ns/0x00000000_0xffffffff"]
    first.long_term_data.msg_rate_in = 1e6
    assert stored["t/ns/0x00000000_0xffffffff"] == _data()
    assert "t/ns/0x00000000_0xffffffff" in stored and len(stored) == 1 and stored.get("x") is None


def test_a_decision_record_still_refuses_an_unknown_kind_or_state() -> None:
    why = explain("balance", "moved")
    ok = DecisionRecord.of(1, 0, "shedding", why, bundle="b", state="planned")
    assert ok.explanation["reason"] == "balance" and ok.state == "planned"
    with pytest.raises(ValueError, match="unknown"):
        DecisionRecord.of(2, 0, "nonsense", why)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown"):
        DecisionRecord.of(3, 0, "shedding", why, state="lost")
