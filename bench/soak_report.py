"""The soak's report (``bench/soak.py``): the audit of the ensemble's transaction logs and the figures
BENCHMARKS.md quotes (steps and faults by kind, failover times, unowned episodes against their bound,
double owners, violations)."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from service.zookeeper.forensics.audit import audit
from service.zookeeper.forensics.txnlog import cross_check, merged_history

if TYPE_CHECKING:
    from soak import Soak


def build_report(
    soak: Soak, since_ms: int, end_ms: int, settled: bool, final_bundles: int, bound_ms: int
) -> dict[str, Any]:
    """Audit the stopped ensemble's logs and gather the run's figures; ``bound_ms`` is the unowned bound."""
    files = soak.ensemble.txn_log_files()
    toolkit = [p for f in files for p in cross_check(f)]
    history = merged_history(files)
    rep = audit(history.txns, since_ms=since_ms, end_ms=end_ms)
    episodes = rep.unowned_episodes_ms
    fo = sorted(soak.failovers)
    steps = sum(
        v for k, v in soak.steps.items() if not k.startswith("heal_") and k != "pause_without_failover"
    )
    return {
        "minutes": soak.args.minutes,
        "seed": soak.args.seed,
        "steps": steps,
        "stepsByKind": dict(sorted(soak.steps.items())),
        "faults": dict(sorted(soak.faults.items())),
        "restCalls": dict(sorted(soak.rest.items())),
        "failoverSeconds": {
            "count": len(fo),
            "min": round(fo[0], 2) if fo else None,
            "median": round(statistics.median(fo), 2) if fo else None,
            "max": round(fo[-1], 2) if fo else None,
        },
        "unownedBoundMs": bound_ms,
        "unownedEpisodes": len(episodes),
        "unownedOverBound": sum(1 for e in episodes if e > bound_ms),
        "unownedMedianMs": int(statistics.median(episodes)) if episodes else 0,
        "longestUnownedMs": rep.longest_unowned[0],
        "longestUnownedBundle": rep.longest_unowned[1],
        "doubleOwnersAudit": len(rep.double_owners),
        "doubleOwnersLiveSamples": len(soak.live_double),
        "auditViolations": len(rep.violations),
        "audit": rep.summary(),
        "txnLogFiles": len(files),
        "toolkitDisagreements": toolkit,
        "zxidConflicts": history.conflicts,
        "uncommittedProposals": len(history.uncommitted),
        "settledAfter": settled,
        "finalBundles": final_bundles,
        "overBound": [
            {
                "startMs": start - since_ms,
                "lengthMs": length,
                "bundle": bundle,
                "faultsAround": [
                    f"{t - since_ms}: {w}" for t, w in soak.timeline if start - 12_000 <= t <= start + length
                ],
            }
            for start, length, bundle in rep.unowned_episodes
            if length > bound_ms
        ][:20],
        "examples": {
            "violations": rep.violations[:10],
            "doubleOwners": rep.double_owners[:10],
            "liveDouble": soak.live_double[:10],
        },
        "workDir": str(soak.work),
    }
