"""What the load manager reports to (``MetricsSink``) and the sink that reports nowhere.

:class:`service.api.metrics.PrometheusMetrics` implements the protocol; the runtime and the leader's jobs
depend only on it, so tests and embedded uses need no Prometheus registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

# The label values of ``malformed_node``: re-exported so the API layer need not reach into zookeeper/.
from service.zookeeper.session.validate import PATH_KINDS

# The leader's jobs, the label values of ``job_failed`` (service.leader.schedule runs them).
JOB_NAMES = ("shedding", "reconcile", "bundle-data", "split", "moves")
# The label values of ``move_served``: where a move was carried out, and whose move it was.
MOVE_MODES = ("zookeeper", "pulsar")
MOVE_KINDS = ("shedding", "manual", "drain")
# The label values of ``warm_up``: what Pulsar's health check on a destination answered.
WARM_UP_RESULTS = ("ok", "failed", "refused")
# What the scheduler did with a due run of a job, the label values of ``job_run``.
RUN_OUTCOMES = ("started", "executed", "error", "missed", "max_instances")

__all__ = ["JOB_NAMES", "MOVE_KINDS", "MOVE_MODES", "PATH_KINDS", "RUN_OUTCOMES", "MetricsSink", "NoMetrics"]

if TYPE_CHECKING:
    from service.leader.cluster_view import ClusterView


class MetricsSink(Protocol):
    """What the service reports to; :class:`service.api.metrics.PrometheusMetrics` implements it."""

    def cycle_finished(self, seconds: float, moves: int) -> None: ...
    def planner_time(self, seconds: float) -> None: ...
    def unloaded(self, reason: str) -> None: ...
    def split_done(self, reason: str) -> None: ...
    def shedding_unloads(self, brokers: int, bundles: int) -> None: ...
    def auto_splits(self, bundles: int) -> None: ...
    def leader_changed(self, is_leader: bool) -> None: ...
    def zk_error(self, kind: str) -> None: ...
    def stepped_down(self, reason: str) -> None: ...
    def malformed_node(self, kind: str) -> None: ...
    def job_failed(self, job: str) -> None: ...
    def job_run(self, job: str, outcome: str) -> None: ...
    def job_wall_time(self, job: str, seconds: float) -> None: ...
    def view_updated(self, view: ClusterView, scores: dict[str, dict[str, float]]) -> None: ...
    def pulsar_settings(self, problems: int, acting: bool) -> None: ...
    def move_served(self, mode: str, kind: str, seconds: float) -> None: ...
    def warm_up(self, result: str, seconds: float) -> None: ...


class NoMetrics:
    """The default sink: does nothing."""

    def cycle_finished(self, seconds: float, moves: int) -> None:
        pass

    def planner_time(self, seconds: float) -> None:
        pass

    def unloaded(self, reason: str) -> None:
        pass

    def split_done(self, reason: str) -> None:
        pass

    def shedding_unloads(self, brokers: int, bundles: int) -> None:
        pass

    def auto_splits(self, bundles: int) -> None:
        pass

    def leader_changed(self, is_leader: bool) -> None:
        pass

    def zk_error(self, kind: str) -> None:
        pass

    def stepped_down(self, reason: str) -> None:
        pass

    def malformed_node(self, kind: str) -> None:
        pass

    def job_failed(self, job: str) -> None:
        pass

    def job_run(self, job: str, outcome: str) -> None:
        pass

    def job_wall_time(self, job: str, seconds: float) -> None:
        pass

    def view_updated(self, view: ClusterView, scores: dict[str, dict[str, float]]) -> None:
        pass

    def pulsar_settings(self, problems: int, acting: bool) -> None:
        pass

    def move_served(self, mode: str, kind: str, seconds: float) -> None:
        pass

    def warm_up(self, result: str, seconds: float) -> None:
        pass
