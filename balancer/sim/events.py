"""Scenario events in the simulator: scheduling them per cycle (:func:`plan_events`) and applying
one to the cluster (:func:`apply_event`): brokers joining, leaving or restarting, consumers pausing,
other processes' CPU spiking and traffic stepping up or down."""

from __future__ import annotations

import random
from typing import Any

from balancer.sim.model import BrokerUsage
from balancer.sim.scenarios import Cluster, Scenario


def plan_events(
    cluster: Cluster,
    scenario: Scenario,
    with_jitter: bool,
    schedule: dict[int, list[dict[str, Any]]],
    jitter_cycles: set[int],
) -> None:
    """Fill ``schedule`` (cycle -> events) with the groups' joins and leaves and the scenario's events,
    rolling restarts expanded per broker, and ``jitter_cycles`` with the cycles jitter events affect;
    without ``with_jitter`` those events are left out (the counterfactual run)."""
    for name, g in cluster.groups.items():
        if g.join_at is not None:
            schedule.setdefault(g.join_at, []).append({"type": "_up", "broker": name})
        if g.leave_at is not None:
            schedule.setdefault(g.leave_at, []).append({"type": "_down", "broker": name})
    for ev in scenario.events:
        if ev.get("jitter") and not with_jitter:
            continue
        at, every, times = int(ev.get("at", 0)), int(ev.get("every", 1)), int(ev.get("times", 1))
        if ev["type"] == "rolling_restart":
            names = [n for n, b in cluster.brokers.items() if b.alive]
            down = int(ev.get("down_for", 1))
            for i, name in enumerate(names[: int(ev.get("count", len(names)))]):
                schedule.setdefault(at + i * every, []).append({"type": "_down", "broker": name})
                schedule.setdefault(at + i * every + down, []).append({"type": "_up", "broker": name})
            continue
        for t in range(times):
            schedule.setdefault(at + t * every, []).append(ev)
            if ev.get("jitter"):
                span = int(ev.get("duration", 1)) + 2  # the event, its catch-up and the report lag
                jitter_cycles.update(range(at + t * every, at + t * every + span))


def apply_event(
    ev: dict[str, Any],
    k: int,
    cluster: Cluster,
    schedule: dict[int, list[dict[str, Any]]],
    rng: random.Random,
    reported: dict[str, BrokerUsage],
    orphans: list[str],
) -> None:
    """Apply one event at cycle ``k`` to ``cluster``: a broker leaving adds its bundles to ``orphans``,
    one coming back drops its last ``reported`` usage, and timed events schedule their own end."""
    brokers = cluster.brokers
    kind = ev["type"]
    if kind == "_up":
        brokers[ev["broker"]].alive = True
        reported.pop(ev["broker"], None)
    elif kind == "_down":
        name = ev["broker"]
        brokers[name].alive = False
        orphans.extend(b for b, o in cluster.owners.items() if o == name)
    elif kind == "consumer_pause":
        alive = sorted(n for n, b in brokers.items() if b.alive)
        hit = set(rng.sample(alive, min(len(alive), int(ev.get("brokers", 1)))))
        for bname, owner in cluster.owners.items():
            if owner in hit and rng.random() < float(ev.get("fraction", 0.5)):
                b = cluster.bundles[bname]
                b.paused_until = k + int(ev.get("duration", 1))
                b.catch_up_at = b.paused_until
                b.catch_up_factor = float(ev.get("catch_up", 1.0))
    elif kind == "cpu_spike":
        alive = sorted(n for n, b in brokers.items() if b.alive)
        for name in rng.sample(alive, min(len(alive), int(ev.get("brokers", 1)))):
            brokers[name].spike = float(ev.get("points", 40.0))
            end = k + int(ev.get("duration", 1))
            schedule.setdefault(end, []).insert(0, {"type": "_spike_end", "broker": name})
    elif kind == "_spike_end":
        brokers[ev["broker"]].spike = 0.0
    elif kind == "traffic_step":
        factor, fraction = float(ev.get("factor", 2.0)), float(ev.get("fraction", 1.0))
        pool = list(cluster.bundles)
        if "broker_index" in ev:  # only bundles of these live brokers (by sorted name): the same each time
            alive = sorted(n for n, b in brokers.items() if b.alive)
            hit = {alive[int(i) % len(alive)] for i in ev["broker_index"]} if alive else set()
            pool = [n for n in pool if cluster.owners.get(n) in hit]
        elif "brokers" in ev:  # only bundles of this many randomly chosen live brokers
            alive = sorted(n for n, b in brokers.items() if b.alive)
            hit = set(rng.sample(alive, min(len(alive), int(ev["brokers"]))))
            pool = [n for n in pool if cluster.owners.get(n) in hit]
        chosen = [n for n in pool if rng.random() < fraction]
        for n in chosen:
            cluster.bundles[n].rate *= factor
        if "duration" in ev:
            end = k + int(ev["duration"])
            schedule.setdefault(end, []).insert(0, {"type": "_restore", "bundles": chosen, "factor": factor})
    elif kind == "_restore":
        for n in ev["bundles"]:
            cluster.bundles[n].rate /= ev["factor"]
    elif kind == "_assign":  # a recorded operator move, replayed as it happened (what-if replay)
        dest = brokers.get(ev["broker"])
        if dest is not None and dest.alive and ev["bundle"] in cluster.bundles:
            cluster.owners[ev["bundle"]] = ev["broker"]
