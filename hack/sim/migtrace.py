"""A MIG trace derived from openb's GPU-share pods.

openb's GPUs (G2, G3, T4, P100, V100) have no MIG, and its pods ask for a share of a GPU
(``gpu_milli``), not for a profile. The derivation:

* **nodes**: the openb GPU node list as it is (CPU, memory, GPU count), every GPU an
  H100-80GB in MIG mode under the device plugin's mixed strategy;
* **pods**: a pod sharing one GPU with ``gpu_milli`` m asks for one instance of the
  smallest profile (fewest compute slices, then fewest memory slices) whose compute share
  (slices/7) and memory share (slices/8) are both at least m/1000 — openb gives no GPU
  memory, so a pod is taken to need memory in proportion to its share; a pod asking n
  whole GPUs asks for n × ``7g.80gb``; CPU-only pods stay CPU-only. ``gpu_spec`` (the GPU
  models a pod accepts) is dropped: every GPU is the same model.

Media-extension profiles are never asked for. The shares of openb's default pods become,
for example, 110 → 1g.10gb, 140 → 1g.20gb, 230 → 2g.20gb, 320 → 3g.40gb, 470 → 4g.40gb
and anything above 500 → 7g.80gb (a 4g holds half the memory): rounding up to a profile
asks for more than the share did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from coordinator.scoring.mig.profiles import (
    COMPUTE_SLICES,
    H100_80GB,
    MEMORY_SLICES,
    Geometry,
    Profile,
)
from coordinator.state.cluster import MILLI_PER_GPU
from coordinator.state.podrequest import PodRequest

GEOMETRY: Final = H100_80GB
WHOLE: Final = "7g.80gb"


@dataclass(frozen=True, slots=True)
class MigPod:
    """A pod of the MIG trace: CPU, memory and ``count`` instances of ``profile``."""

    name: str
    cpu_m: int
    mem_b: int
    profile: Profile | None = None
    count: int = 0
    share_milli: int = 0
    """The GPU share the openb pod asked for, in all (what the share view allocates)."""


def profile_for(milli: int, geometry: Geometry = GEOMETRY) -> Profile:
    """The smallest profile giving at least ``milli``/1000 of the compute and the memory."""
    fitting = [
        p
        for p in geometry.profiles.values()
        if not p.media
        and p.compute * MILLI_PER_GPU >= milli * COMPUTE_SLICES
        and p.memory * MILLI_PER_GPU >= milli * MEMORY_SLICES
    ]
    return min(fitting, key=lambda p: (p.compute, p.memory))


def mig_pod(pod: PodRequest, geometry: Geometry = GEOMETRY) -> MigPod:
    """The MIG form of one openb pod."""
    base = MigPod(pod.name, pod.cpu_m, pod.mem_b, share_milli=pod.gpu_total_milli)
    if not pod.gpus:
        return base
    if pod.sharing:
        return dataclasses.replace(base, profile=profile_for(pod.gpu_milli, geometry), count=1)
    whole = geometry.profiles[WHOLE]
    return dataclasses.replace(base, profile=whole, count=pod.gpus)


def mig_pods(pods: Sequence[PodRequest], geometry: Geometry = GEOMETRY) -> list[MigPod]:
    return [mig_pod(p, geometry) for p in pods]
