"""Every policy by name, with its arguments and how to build it — one explicit map.

``build_policy(name, raw_args, context)`` is strict: an unknown policy, an unknown
argument, a wrong type or an out-of-range value is a :class:`ConfigError` naming it.
A test checks these names against the modules in ``coordinator/scoring/policies``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from common import config
from common.errors import ConfigError
from coordinator.scoring.base import Policy
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from coordinator.scoring.policies import (
    best_fit,
    dot_product,
    fgd,
    gpu_clustering,
    gpu_packing,
    least_allocated,
    most_allocated,
    random,
    stowage,
    volcano_binpack,
)
from coordinator.scoring.resources import ResourceWeights
from coordinator.state.podrequest import PodRequest


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """What a policy may know when it is built: the workload it will see as far as known
    (the trace's pods in the simulator, the pods seen so far in a cluster) and a seed."""

    workload: Sequence[PodRequest] = ()
    seed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class NoArgs:
    """The policy takes no arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceArgs:
    """YAML: ``{resources: {cpu: 1, memory: 1, nvidia.com/gpu: 0}}``"""

    resources: dict[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})


@dataclass(frozen=True, slots=True, kw_only=True)
class VolcanoBinpackArgs:
    """YAML: ``{weight: 10, resources: {cpu: 5, memory: 1, nvidia.com/gpu: 2}}`` — Volcano's
    ``binpack.weight``, ``binpack.cpu``, ``binpack.memory``, ``binpack.resources.*``."""

    weight: int = 1
    resources: dict[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})

    def __post_init__(self) -> None:
        if not 0 <= self.weight <= 100:
            raise ConfigError("volcano-binpack.weight: expected an integer 0..100")


@dataclass(frozen=True, slots=True, kw_only=True)
class FgdArgs:
    """YAML: ``{coverage: 0.95}`` — share of pods the typical shapes must cover."""

    coverage: float = 0.95

    def __post_init__(self) -> None:
        if not 0 < self.coverage <= 1:
            raise ConfigError("fgd.coverage: expected a fraction in (0, 1]")


@dataclass(frozen=True, slots=True)
class PolicySpec:
    args: type
    build: Callable[[Any, PolicyContext], Policy]


def _fragmentation(ctx: PolicyContext, coverage: float) -> Fragmentation:
    return Fragmentation(typical_shapes(ctx.workload, coverage))


POLICIES: Final[Mapping[str, PolicySpec]] = {
    least_allocated.NAME: PolicySpec(
        ResourceArgs, lambda a, c: least_allocated.LeastAllocated(ResourceWeights(a.resources))
    ),
    most_allocated.NAME: PolicySpec(
        ResourceArgs, lambda a, c: most_allocated.MostAllocated(ResourceWeights(a.resources))
    ),
    volcano_binpack.NAME: PolicySpec(
        VolcanoBinpackArgs,
        lambda a, c: volcano_binpack.VolcanoBinpack(ResourceWeights(a.resources), a.weight),
    ),
    random.NAME: PolicySpec(NoArgs, lambda a, c: random.RandomFit(c.seed)),
    dot_product.NAME: PolicySpec(NoArgs, lambda a, c: dot_product.DotProduct()),
    gpu_clustering.NAME: PolicySpec(NoArgs, lambda a, c: gpu_clustering.GpuClustering()),
    gpu_packing.NAME: PolicySpec(NoArgs, lambda a, c: gpu_packing.GpuPacking()),
    best_fit.NAME: PolicySpec(NoArgs, lambda a, c: best_fit.BestFit()),
    fgd.NAME: PolicySpec(FgdArgs, lambda a, c: fgd.Fgd(_fragmentation(c, a.coverage))),
    stowage.NAME: PolicySpec(stowage.StowageArgs, lambda a, c: stowage.Stowage(a)),
}


def build_policy(
    name: str, raw: Mapping[str, Any] | None = None, context: PolicyContext | None = None
) -> Policy:
    """A policy by name, its arguments checked strictly."""
    spec = POLICIES.get(name)
    if spec is None:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
    return spec.build(parse_args(name, spec.args, raw or {}), context or PolicyContext())


def parse_args(policy: str, args_type: type, raw: Mapping[str, Any]) -> Any:
    """Build an arguments dataclass from a mapping with the settings loader: unknown keys
    and wrong types are refused, named ``policy.key``."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{policy}: arguments must be a mapping")
    return config.build(args_type, raw, where=policy)
