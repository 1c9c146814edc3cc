"""``stowage``: Stowage's placement policy — keep every node fillable in *all* its resources.

FGD (:mod:`.fgd`) asks, for each candidate node, how much a placement raises the node's
expected GPU fragmentation F_n(M): free GPU milli that typical pods could not use. It
only sees a node's CPU when the CPU is already too short for a typical pod, so it happily
fills a GPU-rich, CPU-poor node with CPU-heavy pods until its remaining GPUs are
stranded. Stowage adds that missing term. A node's GPUs will only ever be used together
with the CPU the GPU pods bring along — ρ millicores per milli-GPU, learnt from the pods
seen — so free GPU milli beyond ``free CPU / ρ`` is *stranded*::

    value(n)  = F_n(M) + α · max(0, R_n − c_n / ρ)          (milli-GPU)
    score(n)  = ⌊100 · σ(−(Δvalue + pool cost) / scale)⌋,   ties → the fixed node rank

The integer score with a fixed tie order is kept from FGD on purpose: it makes
near-equal choices land on the same nodes (first fit by rank), which keeps other nodes
whole for large pods. M and ρ come only from pods already seen (never the future of a
trace), refreshed at 64, 128, 256 … pods and then every ``relearn_max`` pods.

Pods that accept only some GPU models need those models' pools; a pod that could go
elsewhere should leave them alone. From the pods seen, each model's *pressure* is the
share of its free GPU that such limited demand will take while the cluster fills (the
demand's share of all GPU demand, times the cluster's free GPU, over the pool's free GPU,
at most 1; remeasured every ``pool_refresh`` pods, kept in steps of 1/64). A GPU pod
placed in pool t adds
``β · its milli-GPU · (pressure_t² − the least pressure² among its own choices)`` to
Δvalue (β = 2), so it takes a pressed pool only when its other choices are pressed as
much (0 without limited demand, and for a pod of one model); squaring makes a pool that
will surely run out weigh far more than one that might. FGD's M sees the same demand only
through the typical shapes' weights, and the stranding term, which favours CPU-poor pools
for GPU pods, would otherwise hand those pools to pods that did not need them.

With ``reserve_gpu_cpu`` (opt-in), CPU-only pods are admitted to a node only if it keeps
enough CPU for the node's whole free GPUs: when a cluster runs out of CPU, the CPU-only
pods wait rather than leave GPUs idle. The rule is the admission rule ``reserve-gpu-cpu``
of :mod:`coordinator.scoring.admission` (its own ρ, learnt from the GPU pods seen), which
any policy can be given. Off by default because in a live cluster such a pod sits pending
next to free CPU, which reads as a scheduler fault; the README gives the trade-off
measured on the openb trace.

Live signals adjust the score where an agent reported them (in a trace they are all
unknown, and neutral): stall pressure above a threshold costs points, a pod that needs
contiguous memory loses points on a node short of 2 MiB blocks, and a multi-GPU pod gains
points where its GPUs can all talk over NVLink (and loses them where none can).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from common.errors import ConfigError
from coordinator.scoring import admission, linkedgpus
from coordinator.scoring.base import Policy
from coordinator.scoring.fragmentation import Fragmentation
from coordinator.scoring.policies.fgd import after_take
from coordinator.scoring.workload import WorkloadModel
from coordinator.state.cluster import ClusterState, Placement
from coordinator.state.podrequest import PodRequest

NAME: Final = "stowage"
_FIRST_RELEARN: Final = 64
_PRESSURE_STEPS: Final = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class StowageArgs:
    """YAML: ``{coverage: 0.95, stranding_weight: 0.3, scale_milli: 1000, relearn_max: 4096,
    pool_weight: 2.0, pool_exponent: 2.0, pool_refresh: 256}``"""

    coverage: float = 0.95
    """Share of seen pods the typical shapes cover (FGD's 95 %)."""
    stranding_weight: float = 0.3
    """α: milli-GPU of fragmentation one stranded milli-GPU is worth."""
    scale_milli: float = 1000.0
    """Δvalue that moves the sigmoid by one unit: 1000 makes one score step ≈ 0.04 GPU."""
    relearn_max: int = 4096
    """Most pods between two refreshes of the workload model."""
    pressure_threshold_pct: float = 10.0
    """PSI ``some`` below this is normal contention and costs nothing."""
    pressure_points: float = 50.0
    """Points a node at 100 % pressure loses (linear from the threshold)."""
    contiguity_points: float = 20.0
    """Points lost on a node whose free 2 MiB blocks are fewer than the pod needs."""
    nvlink_points: float = 5.0
    """Points won (all GPUs of the pod NVLink-connected) or lost (none connected)."""
    pool_weight: float = 2.0
    """β: milli-GPU of cost per milli-GPU a pod takes from a model's pool beyond what its
    least wanted choice would cost, times the pools' difference in pressure (the share of
    a pool's free GPU that pods limited to some models will want)."""
    pool_exponent: float = 2.0
    """Pressures are raised to this power before they are compared: above 1, a pool that
    will surely run out weighs much more than one that may."""
    pool_refresh: int = 256
    """Pods between two measurements of the pools' pressure."""
    reserve_gpu_cpu: bool = False
    """Opt-in: keep a CPU-only pod off a node where it would leave the node's whole free
    GPUs without the CPU GPU pods bring (ρ per milli-GPU). While CPU is plentiful this
    changes nothing (the pod goes where CPU is spare); when the cluster runs out of CPU,
    CPU-only pods wait instead of stranding GPUs — the intent of tainting GPU nodes, applied
    only where it matters. Off by default: a pod left pending while a node shows free CPU
    is what operators report as a broken scheduler."""

    def __post_init__(self) -> None:
        if not 0 < self.coverage <= 1:
            raise ConfigError("stowage.coverage: expected a fraction in (0, 1]")
        if not 0 <= self.stranding_weight <= 100:
            raise ConfigError("stowage.stranding_weight: expected 0..100")
        if not self.scale_milli > 0:
            raise ConfigError("stowage.scale_milli: expected a positive number")
        if not 0 <= self.pool_weight <= 100:
            raise ConfigError("stowage.pool_weight: expected 0..100")
        if not 0 < self.pool_exponent <= 10:
            raise ConfigError("stowage.pool_exponent: expected 0 < value <= 10")
        if self.pool_refresh < 1:
            raise ConfigError("stowage.pool_refresh: expected at least 1")
        if self.relearn_max < _FIRST_RELEARN:
            raise ConfigError(f"stowage.relearn_max: expected at least {_FIRST_RELEARN}")
        if not 0 <= self.pressure_threshold_pct < 100:
            raise ConfigError("stowage.pressure_threshold_pct: expected 0 <= value < 100")
        for name in ("pressure_points", "contiguity_points", "nvlink_points"):
            if not 0 <= getattr(self, name) <= 100:
                raise ConfigError(f"stowage.{name}: expected 0..100")


class Stowage(Policy):
    name = NAME

    def __init__(self, args: StowageArgs) -> None:
        self.args = args
        self.model = WorkloadModel()
        self.admission = admission.build_rules(
            [admission.ReserveGpuCpu.name] if args.reserve_gpu_cpu else []
        )
        self._frag = Fragmentation([])
        self._rho = self.model.cpu_m_per_gpu_milli
        self._next_relearn = _FIRST_RELEARN
        self._pressure: dict[str, float] = {}
        self._least_pressure: dict[frozenset[str], float] = {}
        self._next_pool_refresh = self.args.pool_refresh

    # ---------------------------------------------------------------- values

    def stranded(self, cpu_free: int, gpus: tuple[int, ...]) -> float:
        """Free milli-GPU the node's free CPU cannot feed."""
        idle = sum(g for g in gpus if g > 0)
        return max(0.0, idle - cpu_free / self._rho)

    def value(self, cpu_free: int, gpus: tuple[int, ...], model: str) -> float:
        """Expected unusable milli-GPU of a node in this state (lower is better)."""
        frag = self._frag.node(cpu_free, gpus, model)
        return frag + self.args.stranding_weight * self.stranded(cpu_free, gpus)

    def pool_cost(self, pod: PodRequest, model: str) -> float:
        """Milli-GPU the pod costs by taking GPUs of ``model`` rather than of its least
        wanted choice: β × its GPU × the difference in pool pressure (0 for a pod of one
        model: all its nodes share the pool)."""
        if not self._pressure:
            return 0.0
        least = self._least_pressure.get(pod.gpu_models)
        if least is None:
            choices = [self._pressure[m] for m in pod.gpu_models if m in self._pressure]
            least = min(choices or self._pressure.values())
            self._least_pressure[pod.gpu_models] = least
        excess = self._pressure.get(model, 0.0) - least
        return self.args.pool_weight * pod.gpu_total_milli * excess

    def _score(self, delta: float) -> int:
        x = delta / self.args.scale_milli
        if x > 700:  # e^x would overflow; the sigmoid is 0 to double precision long before
            return 0
        return int(100 * (1.0 / (1.0 + math.exp(x))))

    # ---------------------------------------------------------------- policy

    def admit(
        self, state: ClusterState, pod: PodRequest, feasible: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        return admission.narrow(self.admission, state, pod, feasible)

    def shape_key(self, pod: PodRequest) -> Hashable:
        return (pod.cpu_m, pod.gpus, pod.gpu_milli, pod.gpu_models, pod.contiguous_b)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        return float(self.score_nodes(state, pod, np.array([i]))[0])

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """The placement score plus the live adjustments, per node of ``nodes``.

        The placement score depends only on a node's free CPU, free milli per device and
        model (its ``state_id``), so it is worked out once per distinct state among
        ``nodes`` — a 5,000-node cluster has a few hundred — and the live adjustments are
        vectorised: scoring a new pod shape costs well under a microsecond a node."""
        _, first, each = np.unique(state.state_id[nodes], return_index=True, return_inverse=True)
        per_state = [self._best(state, i, pod)[0] for i in nodes[first].tolist()]
        placement = np.array(per_state, dtype=np.float64)[each]
        live = np.zeros(len(nodes))
        for part in self._live(state, nodes, pod).values():  # in order, as a sum adds them
            live += np.where(np.isnan(part), 0.0, part)
        scores: npt.NDArray[np.float64] = placement + live
        return scores

    def devices(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, ...]:
        if pod.sharing:
            return (self._best(state, i, pod)[1],)
        free = tuple(int(d) for d in np.flatnonzero(state.gpu_free[i] >= pod.gpu_milli))
        links = state.gpu_links[i]
        if links is None or pod.gpus < 2:
            return free[: pod.gpus]
        return linkedgpus.best_linked(free, pod.gpus, links)

    def _live(
        self, state: ClusterState, nodes: npt.NDArray[np.int64], pod: PodRequest
    ) -> dict[str, npt.NDArray[np.float64]]:
        """Score adjustments from live signals, per node of ``nodes``: each part that
        applies to some of them, NaN for the others (nothing known, or nothing to say)."""
        out: dict[str, npt.NDArray[np.float64]] = {}
        # The higher of the two stall shares; NaN only where neither was measured.
        pressure = np.fmax(state.cpu_pressure_pct[nodes], state.memory_pressure_pct[nodes])
        threshold = self.args.pressure_threshold_pct
        hot = pressure > threshold  # False where NaN
        if hot.any():
            share = (np.minimum(pressure, 100.0) - threshold) / (100.0 - threshold)
            out["pressure_points"] = np.where(hot, -self.args.pressure_points * share, np.nan)
        if pod.contiguous_b:
            short = state.short_of_contiguous(nodes, pod.contiguous_b)
            if short.any():
                out["contiguity_points"] = np.where(short, -self.args.contiguity_points, np.nan)
        if pod.gpus >= 2:
            links_key = state.gpu_links_key[nodes]
            linked = np.flatnonzero(links_key >= 0)
            if len(linked):
                # Nodes alike — same placement state, same link matrix — score alike: each
                # such pair is worked out once (both numbers stay far below 2**31).
                alike = (links_key[linked] << 32) | state.state_id[nodes[linked]]
                _, first, each = np.unique(alike, return_index=True, return_inverse=True)
                values = [self._nvlink_points(state, i, pod) for i in nodes[linked[first]].tolist()]
                out["nvlink_points"] = points = np.full(len(nodes), np.nan)
                points[linked] = np.array(values, dtype=np.float64)[each]
        return out

    def _nvlink_points(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        """+points where the pod's GPUs would all share NVLink, −points where none would."""
        links = state.gpu_links[i]
        assert links is not None
        chosen = self.devices(state, i, pod)
        pairs = [(a, b) for k, a in enumerate(chosen) for b in chosen[k + 1 :]]
        linked = sum(1 for a, b in pairs if links[a][b] > 0)
        if linked == len(pairs):
            return self.args.nvlink_points
        if linked == 0:
            return -self.args.nvlink_points
        return math.nan

    def explain(self, state: ClusterState, i: int, pod: PodRequest) -> Mapping[str, float]:
        gpus, cpu, model = state.gpu_tuple(i), int(state.cpu_free[i]), _model(state, i)
        score, device = self._best(state, i, pod)
        after = self._after(gpus, pod, device)
        cpu_after = cpu - pod.cpu_m
        frag_before = self._frag.node(cpu, gpus, model)
        frag_after = self._frag.node(cpu_after, after, model)
        stranded_before = self.stranded(cpu, gpus)
        stranded_after = self.stranded(cpu_after, after)
        pool_cost = self.pool_cost(pod, model)
        return {
            "fragmentation_before_milli": frag_before,
            "fragmentation_after_milli": frag_after,
            "stranded_before_milli": stranded_before,
            "stranded_after_milli": stranded_after,
            "stranding_weight": self.args.stranding_weight,
            "pool_cost_milli": pool_cost,
            "delta_milli": frag_after
            - frag_before
            + self.args.stranding_weight * (stranded_after - stranded_before)
            + pool_cost,
            "placement_score": float(score),
            **{
                part: float(values[0])
                for part, values in self._live(state, np.array([i]), pod).items()
                if not np.isnan(values[0])
            },
            NAME: self.score(state, i, pod),
        }

    def observe(self, state: ClusterState, pod: PodRequest, placement: Placement | None) -> None:
        for rule in self.admission:
            rule.observe(pod)
        self.model.observe(pod)
        if self.model.pods >= self._next_relearn:
            self._frag = Fragmentation(self.model.typical(self.args.coverage))
            self._rho = self.model.cpu_m_per_gpu_milli
            self._next_relearn += min(self._next_relearn, self.args.relearn_max)
            self.epoch += 1
        if self.model.pods >= self._next_pool_refresh:
            self._next_pool_refresh += self.args.pool_refresh
            self._refresh_pools(state)

    def _refresh_pools(self, state: ClusterState) -> None:
        """Measure each model's pool pressure from the free GPU now, in steps of 1/64 (a step
        costs a whole GPU 31 milli, below one score step): scores change, and the engine
        drops its cached scores, only when a step does."""
        idle = np.where(state.gpu_free > 0, state.gpu_free, 0).sum(axis=1)
        per_model = np.bincount(state.model_id, weights=idle, minlength=len(state.models))
        free = {
            m: int(per_model[k])
            for k, m in enumerate(state.models)
            if m and state.gpu_count[state.model_id == k].any()
        }
        k = self.args.pool_exponent
        steps = {
            m: round(p**k * _PRESSURE_STEPS) for m, p in self.model.pool_pressure(free).items()
        }
        pressure = {m: n / _PRESSURE_STEPS for m, n in steps.items()} if any(steps.values()) else {}
        if pressure != self._pressure:
            self._pressure = pressure
            self._least_pressure = {}
            self.epoch += 1

    def _after(self, gpus: tuple[int, ...], pod: PodRequest, device: int) -> tuple[int, ...]:
        if pod.sharing:
            return gpus[:device] + (gpus[device] - pod.gpu_milli,) + gpus[device + 1 :]
        return after_take(gpus, pod.gpus, pod.gpu_milli)

    def _best(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, int]:
        """(score, device): a shared GPU tries each device with room, first best wins."""
        gpus, cpu, model = state.gpu_tuple(i), int(state.cpu_free[i]), _model(state, i)
        # Δvalue plus the pool cost, which is the same for every device of the node
        before = self.value(cpu, gpus, model) - self.pool_cost(pod, model)
        cpu_after = cpu - pod.cpu_m
        if not pod.sharing:
            return self._score(
                self.value(cpu_after, self._after(gpus, pod, -1), model) - before
            ), -1
        best, best_device = -1, -1
        tried = set()  # devices with equal free milli give equal values: try each once
        for d, g in enumerate(gpus):
            if g >= pod.gpu_milli and g not in tried:
                tried.add(g)
                after = self._after(gpus, pod, d)
                score = self._score(self.value(cpu_after, after, model) - before)
                if score > best:
                    best, best_device = score, d
        return best, best_device


def _model(state: ClusterState, i: int) -> str:
    return state.models[int(state.model_id[i])]
