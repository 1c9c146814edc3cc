"""A MIG GPU's slices: which are taken, where a profile may still start, and taking them.

A GPU is ``(mask, compute)``: bit k of ``mask`` set when memory slice k is held by an
instance, ``compute`` the compute slices its instances hold. Both are needed: a 1g.20gb
and a 2g.20gb both span two memory slices but give one and two sevenths of the GPU. Plain
ints in a tuple, because the simulator and the fragmentation memo hash millions of them.

Placement is the alignment rule of :mod:`coordinator.scoring.mig.profiles`: a profile
fits where all ``memory`` slices from one of its ``starts`` are free. Its starts are
multiples of its width, so two placements of one profile never overlap: the free starts
are how many more instances of it the GPU can hold, together (a test pins this for every
table). The
memory rule alone keeps an A100/H100 within its seven compute slices (4g+3g, 3×2g+1g, 7×1g
are the fullest splits), so compute is counted, not checked. Media
profiles (``+me``, one per GPU) are not modelled here: free slices cannot tell whether
the GPU's one media instance is taken.
"""

from __future__ import annotations

from typing import Final

from coordinator.scoring.mig.profiles import COMPUTE_SLICES, Profile

Gpu = tuple[int, int]
"""``(mask of memory slices taken, compute slices taken)``."""
EMPTY: Final[Gpu] = (0, 0)


def span(profile: Profile, start: int) -> int:
    """The memory slices a profile placed at ``start`` takes, as a mask."""
    return ((1 << profile.memory) - 1) << start


def free_starts(profile: Profile, gpu: Gpu) -> list[int]:
    """Where the profile can be placed on the GPU now (each start on its own)."""
    if profile.media:
        return []
    return [s for s in profile.starts if not gpu[0] & span(profile, s)]


def take(profile: Profile, gpu: Gpu, start: int) -> Gpu:
    """The GPU once an instance of the profile is created at ``start``."""
    bits = span(profile, start)
    mask, compute = gpu
    if profile.media or start not in profile.starts or mask & bits:
        raise ValueError(f"{profile.name} cannot start at slice {start} of mask {mask:08b}")
    return (mask | bits, compute + profile.compute)


def free_compute(gpu: Gpu) -> int:
    return COMPUTE_SLICES - gpu[1]
