"""``DecisionRecord.of`` builds a record without pydantic's per-field walk (a whole-plan cycle records
21,000 planned moves): what it leaves must be what ``model_construct`` leaves, field for field, set
fields included, and it must refuse what it cannot hold."""

from __future__ import annotations

from typing import Any

import pytest

from balancer.explain import explain
from service.leader.cluster_view import DecisionLog, DecisionRecord

WHY = explain(
    "overloaded", "shed to the least loaded", subject="t/n/0x0_0x1", ratio=1.25, nested={"a": [1, 2]}
)


def _constructed(**move: Any) -> DecisionRecord:
    return DecisionRecord.model_construct(
        **move,
        id=7,
        time_ms=11,
        kind="shedding",
        bundle="t/n/0x0_0x1",
        source="b1",
        destination="b2",
        applied=False,
        principal=None,
        explanation=WHY.model_dump(mode="json"),
    )


@pytest.mark.parametrize(
    "move",
    [
        {},
        {"state": "planned", "planned_ms": 5},
        {"state": "in_flight", "released_ms": 9, "note": {"reason": "x"}},
    ],
)
def test_same_record_as_model_construct(move: dict[str, Any]) -> None:
    got = DecisionRecord.of(7, 11, "shedding", WHY, "t/n/0x0_0x1", "b1", "b2", False, **move)
    want = _constructed(**move)
    assert got == want
    assert got.model_fields_set == want.model_fields_set
    assert got.model_dump(mode="json") == want.model_dump(mode="json")
    assert got.model_dump(exclude_unset=True) == want.model_dump(exclude_unset=True)
    assert got.__pydantic_extra__ is None and got.__pydantic_private__ is None
    assert DecisionRecord.model_validate(got.model_dump()) == got


def test_records_share_nothing_mutable() -> None:
    log = DecisionLog(10)
    a = log.add(1, "shedding", WHY, bundle="x", state="planned")
    b = log.add(2, "shedding", WHY, bundle="y", state="planned")
    log.update(a, state="in_flight", note={"reason": "r"})
    assert b.state == "planned" and b.note is None
    a.explanation["numbers"]["ratio"] = 9
    assert b.explanation["numbers"]["ratio"] == 1.25


def test_refuses_a_field_it_does_not_have() -> None:
    with pytest.raises(ValueError, match="no field"):
        DecisionRecord.of(1, 0, "shedding", WHY, stat="planned")
