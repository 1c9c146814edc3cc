"""The cluster as columns: one numpy row per node, so a policy scores every node at once.

Capacities are fixed per node; free amounts change with every placement. GPUs are a
``(nodes, max_gpus)`` matrix of free milli-GPU per device (1000 = a whole GPU), padded
with -1 where a node has fewer devices, so "a device with at least m free" is one
vectorised comparison. Live signals from agent reports (contiguity, pressure, NUMA, NVLinks)
sit in further columns with neutral defaults, which is what the trace simulator uses.

Every change to a node bumps ``version[i]``: caches keyed by node state (the engine's
score cache, FGD's fragmentation memo) invalidate on it, which is how "recompute only
what a placement changed" is kept honest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.state.signals import GpuFault, Links, NodeSignals

MILLI_PER_GPU: Final = 1000
NO_DEVICE: Final = -1


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """What a node has when empty."""

    name: str
    cpu_m: int
    mem_b: int
    gpus: int = 0
    gpu_model: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod bound to a node, and the GPU devices it takes ``gpu_milli`` from."""

    node: int
    devices: tuple[int, ...]


class ClusterState:
    """Capacities, free resources and per-node signals of every node, as arrays."""

    def __init__(self, specs: Sequence[NodeSpec]) -> None:
        if not specs:
            raise ValueError("a cluster needs at least one node")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        self.names: list[str] = names
        self.index: dict[str, int] = {n: i for i, n in enumerate(names)}
        n = len(specs)
        self.cpu_cap = np.array([s.cpu_m for s in specs], dtype=np.int64)
        self.mem_cap = np.array([s.mem_b for s in specs], dtype=np.int64)
        self.gpu_count = np.array([s.gpus for s in specs], dtype=np.int64)
        if (self.cpu_cap < 0).any() or (self.mem_cap < 0).any() or (self.gpu_count < 0).any():
            raise ValueError("capacities must not be negative")
        self.models: list[str] = sorted({s.gpu_model for s in specs})
        self.model_id = np.array([self.models.index(s.gpu_model) for s in specs], dtype=np.int64)
        width = max(1, int(self.gpu_count.max()))
        self.gpu_cap = np.where(
            np.arange(width)[None, :] < self.gpu_count[:, None], MILLI_PER_GPU, NO_DEVICE
        ).astype(np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        self.gpu_free = self.gpu_cap.copy()
        self.version = np.zeros(n, dtype=np.int64)
        # Free milli per device as Python tuples, derived from gpu_free and kept in step with
        # it: policies read them far more often than placements change them.
        self._gpu_tuples = [self._row_tuple(i) for i in range(n)]
        # Each node's placement state (free CPU, free milli per device, model) as a small
        # integer, equal for nodes in equal states: a policy whose score depends on that
        # alone scores each distinct state once (idle nodes of a kind, nodes alike).
        self._state_ids: dict[tuple[int, tuple[int, ...], int], int] = {}
        self.state_id = np.zeros(n, dtype=np.int64)
        self._renumber_states()
        # GPU pod kinds per node ("share-gpu", "1-gpu", …): GPU clustering groups by them.
        self.gpu_tags: list[Counter[str]] = [Counter() for _ in range(n)]
        # Live signals, one column each (see coordinator.state.signals); unknown = neutral.
        self.cpu_pressure_pct = np.full(n, np.nan)
        self.memory_pressure_pct = np.full(n, np.nan)
        self.cpu_used_pct = np.full(n, np.nan)
        self.contiguous_2mib_b = np.full(n, -1, dtype=np.int64)
        self.true_allocatable_mem_b = np.full(n, -1, dtype=np.int64)
        self.largest_numa_cpu_m = np.full(n, -1, dtype=np.int64)
        self.topology_policy: list[str] = [""] * n
        self.gpu_links: list[Links | None] = [None] * n
        """Interned: nodes with equal link matrices share one object (see set_signals)."""
        self.gpu_links_key = np.full(n, -1, dtype=np.int64)
        """A number per distinct link matrix (-1: none), never reused: rows with equal
        keys hold the same matrix, so a policy can group nodes by it in numpy."""
        self._links: dict[Links, tuple[Links, int]] = {}
        self._links_seen = 0
        self.gpu_faults: list[tuple[GpuFault, ...]] = [()] * n
        """Per node, its GPUs with anything a health rule judges (see signals)."""
        self.gpu_faulty = np.zeros(n, dtype=bool)
        """Whether :attr:`gpu_faults` has any for the node: the health rule looks only there."""
        self.gpu_reported = np.full(n, -1, dtype=np.int64)
        self.io_pressure_pct = np.full(n, np.nan)
        self.disks: list[tuple[tuple[str, float, float], ...]] = [()] * n
        """Per node, each disk's name, utilisation % and await ms (see signals)."""
        """GPUs in the node's report (-1: none), to tell whether its indices are the Node's."""
        self.numa_cpus: list[tuple[tuple[int, int], ...]] = [()] * n
        """Per node, each NUMA node's id and CPU count as its report has them; empty where
        unknown."""
        self.pod_numa: list[dict[str, tuple[int, ...]]] = [{} for _ in range(n)]
        """Per node, the NUMA nodes of each pod its agent placed, by uid."""
        self.occupants: list[dict[str, tuple[str, str]]] = [{} for _ in range(n)]
        """Per node, the pods it holds (bound or assumed) by uid: their namespace and
        PriorityClass, what the tenancy rule judges (:meth:`occupy`)."""
        self.tenancy_memo: list[object | None] = [None] * n
        """Per node, what the tenancy rule worked out of :attr:`occupants` and
        :attr:`pod_numa` (:mod:`coordinator.scoring.tenancy`); None once either changes."""

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_total_milli(self) -> int:
        return int(self.gpu_count.sum()) * MILLI_PER_GPU

    def allocate(
        self, placement: Placement, cpu_m: int, mem_b: int, gpu_milli: int, tag: str | None
    ) -> None:
        """Take a pod's resources from a node; raise ValueError (changing nothing) if it does
        not fit."""
        i = placement.node
        devices = placement.devices
        if self.cpu_free[i] < cpu_m or self.mem_free[i] < mem_b:
            raise ValueError(f"{self.names[i]}: not enough CPU or memory")
        if len(set(devices)) != len(devices):
            raise ValueError(f"{self.names[i]}: a device listed twice")
        for d in devices:
            if not 0 <= d < self.gpu_count[i] or self.gpu_free[i, d] < gpu_milli:
                raise ValueError(f"{self.names[i]}: GPU {d} cannot give {gpu_milli} milli")
        self.cpu_free[i] -= cpu_m
        self.mem_free[i] -= mem_b
        for d in devices:
            self.gpu_free[i, d] -= gpu_milli
        if tag is not None:
            self.gpu_tags[i][tag] += 1
        self._gpu_tuples[i] = self._row_tuple(i)
        self._restate(i)
        self.version[i] += 1

    def release(
        self, placement: Placement, cpu_m: int, mem_b: int, gpu_milli: int, tag: str | None
    ) -> None:
        """Give a pod's resources back; raise ValueError (changing nothing) if that would
        exceed capacity."""
        i = placement.node
        if self.cpu_free[i] + cpu_m > self.cpu_cap[i] or self.mem_free[i] + mem_b > self.mem_cap[i]:
            raise ValueError(f"{self.names[i]}: release exceeds capacity")
        for d in placement.devices:
            if self.gpu_free[i, d] + gpu_milli > MILLI_PER_GPU:
                raise ValueError(f"{self.names[i]}: GPU {d} release exceeds capacity")
        if tag is not None and self.gpu_tags[i][tag] <= 0:
            raise ValueError(f"{self.names[i]}: no {tag} pod to release")
        self.cpu_free[i] += cpu_m
        self.mem_free[i] += mem_b
        for d in placement.devices:
            self.gpu_free[i, d] += gpu_milli
        if tag is not None:
            self.gpu_tags[i][tag] -= 1
            if not self.gpu_tags[i][tag]:
                del self.gpu_tags[i][tag]
        self._gpu_tuples[i] = self._row_tuple(i)
        self._restate(i)
        self.version[i] += 1

    def set_signals(self, i: int, signals: NodeSignals) -> None:
        """Replace node ``i``'s live signals (``UNKNOWN`` makes it neutral again)."""
        self.cpu_pressure_pct[i] = signals.cpu_pressure_pct
        self.memory_pressure_pct[i] = signals.memory_pressure_pct
        self.cpu_used_pct[i] = signals.cpu_used_pct
        self.contiguous_2mib_b[i] = signals.contiguous_2mib_b
        self.true_allocatable_mem_b[i] = signals.true_allocatable_mem_b
        self.largest_numa_cpu_m[i] = signals.largest_numa_cpu_m
        self.topology_policy[i] = signals.topology_policy
        links = signals.gpu_links
        if links != self.gpu_links[i]:  # as a rule the same links as the last report's
            self.gpu_links[i], self.gpu_links_key[i] = self._interned_links(links)
        self.gpu_faults[i] = signals.gpu_faults
        self.gpu_faulty[i] = bool(signals.gpu_faults)
        self.gpu_reported[i] = signals.gpu_devices
        self.io_pressure_pct[i] = signals.io_pressure_pct
        self.disks[i] = signals.disks
        zones, placed = tuple([(z.node, z.cpu_count) for z in signals.numa]), dict(signals.pod_numa)
        if zones != self.numa_cpus[i] or placed != self.pod_numa[i]:  # as a rule, as they were
            self.numa_cpus[i], self.pod_numa[i] = zones, placed
            self.tenancy_memo[i] = None
        self.version[i] += 1

    def occupy(self, i: int, uid: str, namespace: str, priority_class: str) -> None:
        """Pod ``uid`` is held on node ``i`` (with :meth:`allocate`, by whoever holds it)."""
        self.occupants[i][uid] = (namespace, priority_class)
        self.tenancy_memo[i] = None

    def vacate(self, i: int, uid: str) -> None:
        """Pod ``uid`` no longer holds node ``i``."""
        if self.occupants[i].pop(uid, None) is not None:
            self.tenancy_memo[i] = None

    def mem_free_effective(self) -> npt.NDArray[np.int64]:
        """Free memory per node, lowered where the agent found less really allocatable than
        the nominal capacity (memory held outside pods, a tighter kubepods limit)."""
        shortfall = np.where(
            self.true_allocatable_mem_b >= 0,
            np.maximum(0, self.mem_cap - self.true_allocatable_mem_b),
            0,
        )
        free: npt.NDArray[np.int64] = self.mem_free - shortfall
        return free

    def short_of_contiguous(
        self, nodes: npt.NDArray[np.int64], need_b: int
    ) -> npt.NDArray[np.bool_]:
        """Per node of ``nodes``, whether its agent measured less free memory in blocks of
        2 MiB or more than ``need_b``; a node not measured (-1) is never short. The one
        contiguity check: the live filter refuses such nodes, stowage marks them down."""
        contiguous = self.contiguous_2mib_b[nodes]
        short: npt.NDArray[np.bool_] = (contiguous >= 0) & (contiguous < need_b)
        return short

    def gpu_idle_of(self, i: int) -> int:
        """Free milli-GPU of node ``i``."""
        row = self.gpu_free[i]
        return int(row[row > 0].sum())

    def gpu_tuple(self, i: int) -> tuple[int, ...]:
        """Free milli of node i's devices, in device order."""
        return self._gpu_tuples[i]

    def _interned_links(self, links: Links | None) -> tuple[Links | None, int]:
        """The one object for this link matrix and its key (None, -1 for no links): nodes
        of a kind report equal ones, and a policy can then group them by key in numpy
        instead of comparing 64 numbers per node."""
        if links is None:
            return None, -1
        interned = self._links.get(links)
        if interned is None:
            if len(self._links) >= 1024:  # not a fleet of a few hardware kinds: keep it small
                self._links = {}
            interned = self._links[links] = (links, self._links_seen)
            self._links_seen += 1
        return interned

    def _restate(self, i: int) -> None:
        """Node ``i``'s placement state changed: give it the id of its new state."""
        if len(self._state_ids) >= 4 * len(self) + 4096:  # states long gone: start afresh
            self._renumber_states()
            return
        key = (int(self.cpu_free[i]), self._gpu_tuples[i], int(self.model_id[i]))
        self.state_id[i] = self._state_ids.setdefault(key, len(self._state_ids))

    def _renumber_states(self) -> None:
        self._state_ids = {}
        for i in range(len(self)):
            self._restate(i)

    def _row_tuple(self, i: int) -> tuple[int, ...]:
        return tuple(int(g) for g in self.gpu_free[i, : self.gpu_count[i]])

    def check(self) -> None:
        """Raise AssertionError if any invariant is broken (used by property tests)."""
        assert (self.cpu_free >= 0).all() and (self.cpu_free <= self.cpu_cap).all()
        assert (self.mem_free >= 0).all() and (self.mem_free <= self.mem_cap).all()
        real = self.gpu_cap == MILLI_PER_GPU
        assert ((self.gpu_free >= 0) & (self.gpu_free <= MILLI_PER_GPU))[real].all()
        assert (self.gpu_free[~real] == NO_DEVICE).all()
        assert self._gpu_tuples == [self._row_tuple(i) for i in range(len(self))]
        states = [
            (int(c), g, int(m))
            for c, g, m in zip(self.cpu_free, self._gpu_tuples, self.model_id, strict=True)
        ]
        state_of: dict[int, tuple[int, tuple[int, ...], int]] = {}
        for st, sid in zip(states, self.state_id.tolist(), strict=True):
            assert state_of.setdefault(sid, st) == st, "one state id for two states"
        assert len(set(states)) == len(state_of), "one state under two ids"
        matrix_of: dict[int, int] = {}
        for links, key in zip(self.gpu_links, self.gpu_links_key.tolist(), strict=True):
            assert (links is None) == (key == -1), "a link key without links, or links without"
            if links is not None:
                assert matrix_of.setdefault(key, id(links)) == id(links), "one key, two matrices"
