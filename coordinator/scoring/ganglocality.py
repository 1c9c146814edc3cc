"""Gang locality: the members of one gang prefer one topology domain, scored across the
gang rather than pod by pod.

A gang is a Volcano PodGroup or the pods of one namespace with the same ``stowage.io/gang``
label (:func:`coordinator.state.kubeobjects.gang_of`); its size is the PodGroup's
``spec.minMember``, else the pods' ``stowage.io/gang-min-member``. Members that *landed*
(bound, assumed after an earlier answer, or nominated) say where the gang is; the
*remaining* members are the size less those, this pod included (at least this pod), and
are taken to be shaped like it.

The domains, widest first: the configured node-label levels (``gang.topology_keys``, as
Kueue's Topology levels are listed: block, then subblock, …), the node, and for GPU pods
the NVLink island within the node (the devices one NVLink path joins, from the agent's
link matrix). At every level each domain is valued over the whole gang, 0 … 1:

* a domain with **room for every remaining member** (:func:`members_fit`, summed over its
  nodes) is worth ½, and ¾ … 1 when members landed there already, the more the higher:
  the domain holding most of the gang wins *while it still has room for the rest*;
* a domain without that room is worth a quarter of the share of the remaining members it
  can hold (0 … ¼): a gang that fits no single domain goes where the fewest domains will
  hold it, the roomiest first. Landed members count in nothing here: where the gang is
  already split, the next member goes where most of the rest fit.

Island level: which devices kubelet gave the landed members is not known (the device
plugin picks them), so an island is valued by its room alone; a node whose links are not
known is one island (neutral: it scores as its node does).

A node's *term* is the sum of its domains' values, the island level's as it is and
each wider one's :data:`LEVEL_BASE` times the next narrower one's (crossing a block
costs more than crossing a node); the node level weighs :data:`LEVEL_BASE` for every
pod, with or without GPUs. Prioritize adds ``gang.weight`` × term to the policy's
scores scaled onto 0 … 1 (:func:`ranked`): at the default weight (2) a landed member,
and room for the whole rest (each at least ¼ at the node level, × 4), are worth twice the
policy's whole range, so the gang gathers; room on one NVLink island, the narrowest level,
is worth half as much as the policy's range.
The term only reorders the nodes that passed the filter for this pod.

**Why a pod's owner may steer this.** Membership and size are the pod owner's words (its
labels, annotations, its namespace's PodGroups). They steer only the owner's own pods,
and only towards each other: a gang is always within one namespace; the term reorders
the nodes the pod itself may take and refuses none; no room is held for the members yet
to come (the room check reads free room, it takes none), so no other pod finds less
room; and nothing here touches priority or preemption. A member count as large as the
schema allows changes nothing in the work done.

**Bounded work** per call, whatever the gang's size (a PodGroup's ``minMember`` is an
int32): a few numpy passes over every node per level, O(nodes × levels), the island
level O(nodes × GPUs per node), and one pass over the landed members, which the caller
bounds (:data:`MAX_MEMBERS_COUNTED`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring.base import unit_interval
from coordinator.scoring.capacity import models_allowed
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import Links

LEVEL_BASE: Final = 4.0
"""How much more a level weighs than the next narrower one."""
FITS: Final = 0.5
"""A domain's worth with room for every remaining member (and none of them there yet)."""
PARTIAL: Final = 0.25
"""The most a domain without that room is worth (a share of it, by the members it holds):
a quarter below :data:`FITS`, so that at the node level (× 4) and the default weight (2)
room for the whole rest outweighs the policy's whole range."""
MAX_MEMBERS_COUNTED: Final = 10_000
"""Most landed members of one gang a call counts. The largest training jobs run a few
thousand pods (16,384 GPUs are 2,048 pods of 8); past this a gang is told where its first
10,000 members went, which is already where it is."""
MAX_DOMAINS_SHOWN: Final = 8
"""Domains per level ``/debug/explain`` lists for the gang (those holding most members)."""


@dataclass(frozen=True, slots=True)
class Domains:
    """The node-label levels over a state's rows, widest first; a level whose key no node
    carries is left out (a default key of another cloud's labels costs nothing)."""

    keys: tuple[str, ...]
    ids: tuple[npt.NDArray[np.int64], ...]
    """Per level, each row's domain: nodes with the same label value share one; a node
    without the label is a domain of its own."""
    values: tuple[tuple[str | None, ...], ...]
    """Per level, each row's label value (None: the node has none)."""


def domains_of(labels: Sequence[Mapping[str, str]], keys: Sequence[str]) -> Domains:
    """The :class:`Domains` of rows whose node labels are ``labels``, for ``keys``
    (widest first)."""
    found_keys, found_ids, found_values = [], [], []
    n = len(labels)
    for key in keys:
        values = tuple(row.get(key) for row in labels)
        if all(v is None for v in values):
            continue
        numbered: dict[str, int] = {}
        ids = np.empty(n, dtype=np.int64)
        for i, value in enumerate(values):
            ids[i] = numbered.setdefault(value, len(numbered)) if value is not None else -1
        alone = np.flatnonzero(ids < 0)
        ids[alone] = len(numbered) + np.arange(len(alone))
        found_keys.append(key)
        found_ids.append(ids)
        found_values.append(values)
    return Domains(tuple(found_keys), tuple(found_ids), tuple(found_values))


@dataclass(frozen=True, slots=True)
class Gang:
    """A gang as one member's scoring sees it."""

    name: str
    size: int
    """Members in all (the PodGroup's ``minMember`` or the pods' count); at least the
    landed ones and this pod."""
    landed: npt.NDArray[np.int64]
    """The rows members were placed on (bound, assumed or nominated), one per member,
    this pod not among them."""

    @property
    def remaining(self) -> int:
        """Members still to place, this pod included."""
        return max(self.size - len(self.landed), 1)


@dataclass(frozen=True, slots=True)
class Level:
    """One level's view of every row."""

    name: str
    value: npt.NDArray[np.float64]
    """The row's domain's worth, 0 … 1."""
    landed: npt.NDArray[np.int64]
    """Members landed in the row's domain."""
    room: npt.NDArray[np.int64]
    """Remaining members the row's domain can hold (at most the remaining)."""


@dataclass(frozen=True, slots=True)
class Locality:
    """The gang's term over every row, and how each level came to it."""

    gang: Gang
    levels: tuple[Level, ...]
    term: npt.NDArray[np.float64]
    """Per row: the levels' worth, each weighing :data:`LEVEL_BASE` times the next
    narrower one's (the island level 1, the node level :data:`LEVEL_BASE`)."""


def locality(state: ClusterState, pod: PodRequest, gang: Gang, domains: Domains) -> Locality:
    """Every row's gang locality term for ``pod``, a member of ``gang`` (see the module)."""
    n = len(state)
    remaining = gang.remaining
    size = max(gang.size, len(gang.landed) + 1)
    slots = _device_slots(state, pod)
    room = members_fit(state, pod, remaining, slots)
    levels = [
        _level(key, ids, room, gang.landed, remaining, size)
        for key, ids in zip(domains.keys, domains.ids, strict=True)
    ]
    levels.append(_level("node", np.arange(n, dtype=np.int64), room, gang.landed, remaining, size))
    if slots is not None:
        held = np.minimum(np.minimum(island_room(state, slots) // pod.gpus, room), remaining)
        value = np.where(held >= remaining, FITS, PARTIAL * held / remaining)
        levels.append(Level("nvlink-island", value, np.zeros(n, dtype=np.int64), held))
    depth = len(levels) if slots is None else len(levels) - 1  # the node's: 1
    weights = LEVEL_BASE ** np.arange(depth, depth - len(levels), -1, dtype=np.float64)
    total = sum(w * level.value for w, level in zip(weights, levels, strict=True))
    term = np.asarray(total, dtype=np.float64)
    return Locality(gang, tuple(levels), term)


def _level(
    name: str,
    ids: npt.NDArray[np.int64],
    room: npt.NDArray[np.int64],
    landed_rows: npt.NDArray[np.int64],
    remaining: int,
    size: int,
) -> Level:
    count = int(ids.max()) + 1 if len(ids) else 0
    landed = np.bincount(ids[landed_rows], minlength=count)
    held = np.minimum(np.bincount(ids, weights=room, minlength=count), remaining)
    there = landed > 0
    gathered = FITS + there * (0.25 + 0.25 * landed / size)
    value = np.where(held >= remaining, gathered, PARTIAL * held / remaining)
    return Level(name, value[ids], landed[ids], held[ids].astype(np.int64))


def members_fit(
    state: ClusterState,
    pod: PodRequest,
    most: int,
    slots: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Per row, how many pods shaped like ``pod`` its free room holds, at most ``most``:
    CPU, memory (as really allocatable) and GPU devices, each counted alone. Shared GPUs
    count the shares each device holds; a pod of several shared devices is counted by
    shares alone (an upper bound). ``slots`` is :func:`_device_slots` where known."""
    fit = np.full(len(state), most, dtype=np.int64)
    if pod.cpu_m:
        fit = np.minimum(fit, np.maximum(state.cpu_free, 0) // pod.cpu_m)
    if pod.mem_b:
        fit = np.minimum(fit, np.maximum(state.mem_free_effective(), 0) // pod.mem_b)
    if pod.gpus:
        slots = _device_slots(state, pod) if slots is None else slots
        assert slots is not None
        fit = np.minimum(fit, slots.sum(axis=1) // pod.gpus)
    return fit


def _device_slots(state: ClusterState, pod: PodRequest) -> npt.NDArray[np.int64] | None:
    """Per row and device, how many of the pod's devices it can give (0 for a model the
    pod does not accept); None for a pod without GPUs."""
    if not pod.gpus:
        return None
    free = state.gpu_free
    if pod.gpu_milli >= MILLI_PER_GPU:
        slots = (free >= MILLI_PER_GPU).astype(np.int64)
    else:
        slots = np.maximum(free, 0) // pod.gpu_milli
    if pod.gpu_models:
        slots[~models_allowed(state, pod.gpu_models)[state.model_id]] = 0
    return slots


def island_room(state: ClusterState, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per row, the most device ``slots`` one NVLink island of the node has (the whole
    node where its links are not known). One pass over every device: the island of each
    is looked up per distinct link matrix (the state interns them)."""
    n, width = slots.shape
    island = np.zeros((n, width), dtype=np.int64)
    keys, first = np.unique(state.gpu_links_key, return_index=True)
    for key, row in zip(keys.tolist(), first.tolist(), strict=True):
        links = state.gpu_links[row]
        if key < 0 or links is None:
            continue
        of = islands(links)
        island[state.gpu_links_key == key, : len(of)] = of
    flat = (np.arange(n, dtype=np.int64)[:, None] * width + island).ravel()
    sums = np.bincount(flat, weights=slots.ravel(), minlength=n * width).reshape(n, width)
    most: npt.NDArray[np.int64] = sums.max(axis=1).astype(np.int64)
    return most


@functools.lru_cache(maxsize=1024)
def islands(links: Links) -> tuple[int, ...]:
    """Each device's NVLink island: devices joined by a path of NVLinks share one
    (numbered from 0 in order of their lowest device). The upper triangle counts, as in
    :mod:`coordinator.scoring.linkedgpus`."""
    of = list(range(len(links)))

    def root(d: int) -> int:
        while of[d] != d:
            of[d] = of[of[d]]
            d = of[d]
        return d

    for a, row in enumerate(links):
        for b in range(a + 1, min(len(row), len(links))):
            if row[b] > 0:
                ra, rb = root(a), root(b)
                of[max(ra, rb)] = min(ra, rb)
    numbered: dict[int, int] = {}
    return tuple(numbered.setdefault(root(d), len(numbered)) for d in range(len(links)))


def ranked(
    raw: npt.NDArray[np.float64], term: npt.NDArray[np.float64], weight: float
) -> npt.NDArray[np.float64]:
    """The policy's ``raw`` scores (NaN: not a candidate) scaled onto 0 … 1 over the
    candidates, plus ``weight`` × ``term``. Scores that are not finite (a policy's own
    extremes) are left as the policy gave them."""
    unit = unit_interval(raw)
    if unit is None:
        return raw
    out: npt.NDArray[np.float64] = unit + weight * term
    return out


def explain(loc: Locality, domains: Domains, state: ClusterState, i: int) -> dict[str, Any]:
    """Row ``i``'s term and, per level, its domain and the domains holding the gang."""
    gang = loc.gang
    values = {key: v for key, v in zip(domains.keys, domains.values, strict=True)}
    levels = []
    for level in loc.levels:
        if level.name in values:
            named = values[level.name]
            domain = named[i] if named[i] is not None else f"{state.names[i]} (no label)"
            where = [named[r] or state.names[r] for r in gang.landed.tolist()]
        elif level.name == "node":
            domain, where = state.names[i], [state.names[r] for r in gang.landed.tolist()]
        else:
            domain, where = f"{state.names[i]} (its roomiest island)", []
        counted: dict[str, int] = {}
        for name in where:
            counted[name] = counted.get(name, 0) + 1
        held = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_DOMAINS_SHOWN]
        levels.append(
            {
                "level": level.name,
                "domain": domain,
                "landed_here": int(level.landed[i]),
                "room_here": int(level.room[i]),
                "fits_remaining": bool(level.room[i] >= gang.remaining),
                "value": round(float(level.value[i]), 4),
                "gang_domains": dict(held),
            }
        )
    return {
        "gang": gang.name,
        "size": gang.size,
        "landed": len(gang.landed),
        "remaining": gang.remaining,
        "term": round(float(loc.term[i]), 4),
        "levels": levels,
    }
