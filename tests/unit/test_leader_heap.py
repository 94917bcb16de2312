"""The leader's heap (service/leader/heap.py): what the term's first full sync built is frozen out of
the collector's full passes while the term lasts, and given back when it ends (issue 49, item 13:
a full pass over a 30,000-bundle view cost 0.6-1.0 s, one or two a shedding cycle)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from service.leader import heap


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_the_view_is_frozen_while_leading_and_given_back_after() -> None:
    view = [{"bundle": i, "owner": str(i)} for i in range(10_000)]  # long-lived, as the view is
    heap.settle_after_sync()
    assert gc.get_freeze_count() >= len(view)
    assert gc.get_threshold() == heap.LEADING_THRESHOLDS
    heap.term_ended()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == heap.DEFAULT_THRESHOLDS


def test_a_frozen_object_let_go_is_still_freed() -> None:
    import weakref

    class Node:
        pass

    held = Node()
    ref = weakref.ref(held)
    heap.settle_after_sync()
    del held  # no cycle: reference counting frees it at once, frozen or not
    assert ref() is None
