"""Load-shedding strategies (Pulsar's Overload, Threshold, Uniform and Avg shedders) and the
leader rules around them. Every call returns the unloads plus an explanation of each decision."""

from balancer.shedding.avg import AvgShedder
from balancer.shedding.base import LoadSheddingStrategy, SheddingResult
from balancer.shedding.leader_rules import shed
from balancer.shedding.overload import OverloadShedder
from balancer.shedding.registry import create_shedder, register_shedder
from balancer.shedding.threshold import ThresholdShedder
from balancer.shedding.uniform import UniformLoadShedder

__all__ = [
    "AvgShedder",
    "LoadSheddingStrategy",
    "OverloadShedder",
    "SheddingResult",
    "ThresholdShedder",
    "UniformLoadShedder",
    "create_shedder",
    "register_shedder",
    "shed",
]
