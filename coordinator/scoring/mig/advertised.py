"""MIG instances as the resources the NVIDIA device plugin advertises, and a pod's ask.

Following the k8s-device-plugin v0.17.4 (its README's "MIG Strategy" section, and
``internal/rm``: ``buildMigDeviceMap``, ``assertAllMigDevicesAreValid``):

* **mixed**: a GPU with MIG off is one ``nvidia.com/gpu``; each MIG instance of a
  MIG-enabled GPU is one ``nvidia.com/mig-<profile>``, ``+`` replaced by ``.``
  (``nvidia.com/mig-1g.10gb.me``). Instances whose compute instance is smaller than their
  GPU instance (``1c.2g.20gb``) are not advertised.
* **single**: every MIG instance is one ``nvidia.com/gpu``, which the plugin allows only
  when the node is uniform: every GPU MIG-enabled (or none), none of them without
  instances, and all instances of one profile. A node that is not is refused whole: the
  plugin advertises nothing there (it fails its start).

The strategy is a flag of the plugin, not something a node reports: the node's advertised
resources tell it (a ``nvidia.com/mig-*`` resource is the mixed strategy).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from common.podspec import GPU, MIG_PREFIX
from coordinator.scoring.mig.profiles import compute_of

MIXED: Final = "mixed"
SINGLE: Final = "single"
Strategy = Literal["mixed", "single"]


@dataclass(frozen=True, slots=True)
class MigGpu:
    """What placement needs of one reported GPU: whether MIG is on, and the profile of
    each instance (None where the agent could not name it)."""

    mig_enabled: bool
    instances: tuple[str | None, ...] = ()


def mixed_resource(profile: str) -> str | None:
    """The mixed strategy's resource for a profile; None for one it does not advertise
    (a compute-instance split such as ``1c.2g.20gb``, or not a profile name)."""
    if compute_of(profile) is None or profile.split("+", 1)[0].count(".") != 1:
        return None
    return MIG_PREFIX + profile.replace("+", ".")


def profile_of(resource: str) -> str | None:
    """The profile a mixed-strategy resource names (``nvidia.com/mig-1g.10gb.me`` →
    ``1g.10gb+me``); None for any other resource."""
    if not resource.startswith(MIG_PREFIX):
        return None
    parts = resource[len(MIG_PREFIX) :].split(".", 2)
    if len(parts) < 2:
        return None
    profile = f"{parts[0]}.{parts[1]}" + (f"+{parts[2]}" if len(parts) == 3 else "")
    return profile if mixed_resource(profile) == resource else None


@dataclass(frozen=True, slots=True)
class Advertised:
    """What the device plugin offers on a node: resource → count, or why nothing."""

    resources: Mapping[str, int] = field(default_factory=dict)
    invalid: str | None = None


def advertised(gpus: Sequence[MigGpu], strategy: Strategy) -> Advertised:
    """The resources the plugin advertises for these GPUs under ``strategy``."""
    enabled = [g for g in gpus if g.mig_enabled]
    plain = len(gpus) - len(enabled)
    if strategy == MIXED:
        counts: Counter[str] = Counter()
        if plain:
            counts[GPU] = plain
        for g in enabled:
            for profile in g.instances:
                resource = None if profile is None else mixed_resource(profile)
                if resource is not None:
                    counts[resource] += 1
        return Advertised(dict(counts))
    if not enabled:
        return Advertised({GPU: plain} if plain else {})
    if plain:
        return Advertised(invalid="single strategy: GPUs with MIG enabled and disabled")
    if any(not g.instances for g in enabled):
        return Advertised(invalid="single strategy: a MIG-enabled GPU has no instances")
    profiles = {p for g in enabled for p in g.instances}
    if len(profiles) != 1:
        named = ", ".join(sorted(str(p) for p in profiles))
        return Advertised(invalid=f"single strategy: more than one MIG profile ({named})")
    return Advertised({GPU: sum(len(g.instances) for g in enabled)})


def strategy_of(allocatable: Mapping[str, int]) -> Strategy:
    """The strategy a node's advertised resources show: mixed where any MIG resource is
    there, else single (with no MIG GPU the two advertise alike)."""
    return MIXED if any(r.startswith(MIG_PREFIX) for r in allocatable) else SINGLE


@dataclass(frozen=True, slots=True)
class MigAsk:
    """Instances of one profile a pod asks of a node."""

    resource: str
    profile: str | None
    """None in the single strategy where the node's instances are not uniform."""
    count: int


def asks_of(
    requests: Mapping[str, int], strategy: Strategy, gpus: Sequence[MigGpu]
) -> list[MigAsk]:
    """What a pod's requests ask of a node's MIG instances: each ``nvidia.com/mig-*``
    resource in the mixed strategy, ``nvidia.com/gpu`` on a node whose GPUs are all MIG in
    the single strategy; nothing for other pods."""
    if strategy == MIXED:
        return [
            MigAsk(resource, profile_of(resource), count)
            for resource, count in sorted(requests.items())
            if count > 0 and resource.startswith(MIG_PREFIX)
        ]
    count = requests.get(GPU, 0)
    if count <= 0 or not gpus or not all(g.mig_enabled for g in gpus):
        return []
    profiles = {p for g in gpus for p in g.instances}
    return [MigAsk(GPU, next(iter(profiles)) if len(profiles) == 1 else None, count)]


@dataclass(frozen=True, slots=True)
class MigRefusal:
    reason: str
    unresolvable: bool
    """The node has too few such instances at all: evicting pods would not help."""


def refusal(
    asks: Sequence[MigAsk], offered: Advertised, in_use: Mapping[str, int]
) -> MigRefusal | None:
    """Why the node cannot give the pod its instances (the first ask short of them), or
    None when every ask has enough free: ``in_use`` is what the node's pods request."""
    if asks and offered.invalid is not None:
        return MigRefusal(f"MIG: {offered.invalid}", unresolvable=True)
    for ask in asks:
        total = offered.resources.get(ask.resource, 0)
        free = total - in_use.get(ask.resource, 0)
        if free >= ask.count:
            continue
        what = ask.resource if ask.profile is None else f"{ask.resource} ({ask.profile})"
        if total < ask.count:
            return MigRefusal(
                f"MIG: {total} {what} on the node < {ask.count} requested", unresolvable=True
            )
        return MigRefusal(f"MIG: {max(free, 0)} {what} free < {ask.count} requested", False)
    return None
