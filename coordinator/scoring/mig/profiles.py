"""MIG profiles: how a GPU may be split, as NVIDIA's MIG user guide tables them.

An A100 or H100 has 7 compute slices over 8 memory slices. NVML places a GPU instance on
the memory slices — ``nvidia-smi mig -lgipp`` lists each profile's allowed starts and its
size — so a profile needs ``memory`` consecutive free memory slices beginning at one of
its ``starts``: a 4g takes slices 0–3 and nothing else, a 3g starts at 0 or 4, a 2g at 0,
2 or 4, a 1g anywhere from 0 to 6 (slice 7 is only reachable by the wider profiles). The
compute slices decide the share of the GPU a profile gives (``compute``/7).

Profile names are what the device plugin's library (go-nvlib) builds from NVML's numbers:
``<compute>g.<memory GB>gb``, ``+me`` for the media-extension variants, the memory being
the instance's share of the board rounded up to an eighth, times the board's GB.

The tables cover the GPUs the user guide lists them for that this project checks: A100
40 GB and 80 GB (SXM4 and PCIe), H100 80 GB (SXM5 and PCIe). Another MIG-capable GPU is
judged by the instances its agent reports (their names give their compute slices), not
by placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

MEMORY_SLICES: Final = 8
"""Memory slices of an A100/H100: NVML's placement positions are 0..7."""
COMPUTE_SLICES: Final = 7
"""Compute slices of an A100/H100: a 1g instance is a seventh of the GPU."""


@dataclass(frozen=True, slots=True)
class Profile:
    """One GPU-instance profile of one GPU model."""

    name: str
    """As the device plugin names it: ``3g.40gb``, ``1g.10gb+me``."""
    compute: int
    """Compute slices (the ``g``)."""
    memory: int
    """Memory slices it spans, out of :data:`MEMORY_SLICES`."""
    starts: tuple[int, ...]
    """Memory slices it may start at."""
    max_instances: int
    """Instances of it one GPU can hold at once (the user guide's "Number of Instances")."""

    @property
    def media(self) -> bool:
        """A media-extension profile (``+me``): the only one on its GPU holding the
        decoders, so one per GPU whatever the free slices say."""
        return self.name.endswith("+me")


@dataclass(frozen=True, slots=True)
class Geometry:
    """The MIG profiles of one GPU model."""

    model: str
    profiles: Mapping[str, Profile]

    def profile(self, name: str) -> Profile | None:
        return self.profiles.get(name)


def _geometry(model: str, gb: int) -> Geometry:
    """A100/H100 geometry for a board of ``gb`` GB: the profile set, starts and instance
    counts are the same on the three boards; only the memory in the names differs."""
    eighth = gb // MEMORY_SLICES
    rows = (
        # compute, memory slices, starts, max instances, suffix
        (1, 1, (0, 1, 2, 3, 4, 5, 6), 7, ""),
        (1, 1, (0, 1, 2, 3, 4, 5, 6), 1, "+me"),
        (1, 2, (0, 2, 4, 6), 4, ""),
        (2, 2, (0, 2, 4), 3, ""),
        (3, 4, (0, 4), 2, ""),
        (4, 4, (0,), 1, ""),
        (7, 8, (0,), 1, ""),
    )
    profiles = {}
    for compute, memory, starts, most, suffix in rows:
        name = f"{compute}g.{memory * eighth}gb{suffix}"
        profiles[name] = Profile(name, compute, memory, starts, most)
    return Geometry(model, profiles)


A100_40GB: Final = _geometry("A100-40GB", 40)
A100_80GB: Final = _geometry("A100-80GB", 80)
H100_80GB: Final = _geometry("H100-80GB", 80)
GEOMETRIES: Final = (A100_40GB, A100_80GB, H100_80GB)


def geometry_of(gpu_name: str) -> Geometry | None:
    """The geometry of a GPU by its NVML product name (``NVIDIA A100-SXM4-40GB``, ``NVIDIA
    A100 80GB PCIe``, ``NVIDIA H100 80GB HBM3``, ``NVIDIA H100 PCIe``) or the short model
    names above; None for a GPU without a table here (H100 NVL and H200 have other memory
    sizes, A30 four slices)."""
    name = gpu_name.upper()
    if "A100" in name:
        if "80GB" in name:
            return A100_80GB
        if "40GB" in name:
            return A100_40GB
        return None
    if "H100" in name and ("80GB" in name or name.endswith("H100 PCIE")):
        return H100_80GB
    return None


def compute_of(profile: str) -> int | None:
    """The compute slices a profile name gives (``3g.40gb`` → 3, ``1c.2g.20gb`` → 1),
    read from the name itself as go-nvlib parses it; None for a name that is not one."""
    fields = profile.split("+", 1)[0].split(".")
    if len(fields) not in (2, 3) or not fields[-1].endswith("gb"):
        return None
    first = fields[0]
    unit = "c" if len(fields) == 3 else "g"
    if not first.endswith(unit) or not first[:-1].isdigit() or not fields[-1][:-2].isdigit():
        return None
    if len(fields) == 3 and not (fields[1].endswith("g") and fields[1][:-1].isdigit()):
        return None
    return int(first[:-1])
