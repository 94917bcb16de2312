"""The leader's heap and Python's cyclic garbage collector.

A leader at 100,000 bundles holds millions of objects for as long as it leads: the watch cache and
the load view its first full sync builds. The collector's full passes walk every one of them: 0.6 s
a pass at 30,000 bundles, one or two a shedding cycle (a cycle's moves create hundreds of thousands
of objects, which is what sets a full pass off). Freezing what the first sync built moves it out of
the collector's reach (``gc.freeze``, no pass of its own): it is still freed by reference counting
when let go (the view's models and maps hold no reference cycles), and the term's end unfreezes it,
so any reference cycle among it (garbage of the sync included) is collected by the next full pass.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

DEFAULT_THRESHOLDS = gc.get_threshold()
# While leading: a young-generation pass every 20,000 allocations rather than 700, a full pass after
# 50 middle ones rather than 10.
LEADING_THRESHOLDS = (20_000, 10, 50)


def settle_after_sync() -> None:
    """The term's first full sync is done: freeze what the process holds (the term's view)."""
    gc.freeze()
    gc.set_threshold(*LEADING_THRESHOLDS)
    log.info("heap: %d objects frozen after the first full sync", gc.get_freeze_count())


def term_ended() -> None:
    """Give the collector back what the ended term froze (its view is dropped for a fresh read)."""
    gc.unfreeze()
    gc.set_threshold(*DEFAULT_THRESHOLDS)
