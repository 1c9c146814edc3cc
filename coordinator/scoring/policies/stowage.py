"""``stowage``: Stowage's own placement policy.

First version: fragmentation gradient descent over a workload model learnt online from
the pods seen so far (never the future), with the rest to follow.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Final

from common.errors import ConfigError
from coordinator.scoring.base import PodRequest, Policy
from coordinator.scoring.fragmentation import Fragmentation, Shape, typical_shapes
from coordinator.scoring.policies.fgd import Fgd
from coordinator.state.cluster import ClusterState, Placement

NAME: Final = "stowage"


@dataclass(frozen=True, slots=True, kw_only=True)
class StowageArgs:
    """YAML: ``{coverage: 0.95, relearn_every: 256}``"""

    coverage: float = 0.95
    relearn_every: int = 256
    """Pods between two refreshes of the workload model (each refresh drops cached scores)."""

    def __post_init__(self) -> None:
        if not 0 < self.coverage <= 1:
            raise ConfigError("stowage.coverage: expected a fraction in (0, 1]")
        if self.relearn_every < 1:
            raise ConfigError("stowage.relearn_every: expected a positive integer")


class Stowage(Policy):
    name = NAME

    def __init__(self, args: StowageArgs) -> None:
        self.args = args
        self._seen: Counter[Shape] = Counter()
        self._since = 0
        self._inner = Fgd(Fragmentation([]))

    def shape_key(self, pod: PodRequest) -> Hashable:
        return self._inner.shape_key(pod)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return self._inner.score(state, i, pod)

    def devices(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, ...]:
        return self._inner.devices(state, i, pod)

    def explain(self, state: ClusterState, i: int, pod: PodRequest) -> Mapping[str, float]:
        return self._inner.explain(state, i, pod)

    def observe(self, state: ClusterState, pod: PodRequest, placement: Placement | None) -> None:
        self._seen[Shape.of(pod)] += 1
        self._since += 1
        if self._since >= self.args.relearn_every:
            self._since = 0
            pods = [
                PodRequest("seen", s.cpu_m, 0, s.gpus, s.gpu_milli, frozenset(s.models))
                for s, n in self._seen.items()
                for _ in range(n)
            ]
            self._inner = Fgd(Fragmentation(typical_shapes(pods, self.args.coverage)))
            self.epoch += 1
