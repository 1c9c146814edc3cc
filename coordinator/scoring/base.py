"""What a policy is: a score per feasible node and a choice of GPU devices.

Scores are "higher is better" floats; the faithful baselines return the same integers
their reference implementations do (0–100, truncated), because their ties — broken by a
fixed node rank — are part of how they behave. A policy's score for a node must depend
only on that node's state and the pod (what :meth:`Policy.shape_key` names), unless it
says otherwise by changing :attr:`Policy.epoch`: that is what lets the engine cache
scores and recompute only the nodes a placement changed.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Mapping
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from coordinator.state.cluster import MILLI_PER_GPU, ClusterState, Placement
from coordinator.state.podrequest import PodRequest


def best_fit_devices(gpus: npt.NDArray[np.int64], count: int, milli: int) -> tuple[int, ...]:
    """Open-GPU-Share's ``best`` device choice.

    A shared GPU goes to the device with the least free milli that still fits (lowest
    index on ties), so partly used GPUs fill up before fresh ones are touched; whole and
    multi-GPU requests take the lowest-index devices that fit.
    """
    if count == 0:
        return ()
    fits = np.flatnonzero(gpus >= milli)
    if count == 1 and milli < MILLI_PER_GPU:
        return (int(fits[np.argmin(gpus[fits])]),)
    return tuple(int(d) for d in fits[:count])


def unit_interval(raw: npt.NDArray[np.float64]) -> npt.NDArray[np.float64] | None:
    """A policy's ``raw`` scores (NaN: not a candidate) scaled onto 0 … 1 over the
    candidates (all 0 when they tie), NaN kept; None when there is none or a score is
    not finite (a policy's own extremes): terms added to the policy's scores
    (:mod:`coordinator.scoring.iocontention`, :mod:`coordinator.scoring.ganglocality`)
    then leave them as they are."""
    scored = ~np.isnan(raw)
    values = raw[scored]
    if not values.size or not np.isfinite(values).all():
        return None
    best, worst = float(values.max()), float(values.min())
    out = np.array(raw, dtype=np.float64)
    out[scored] = (values - worst) / (best - worst) if best > worst else 0.0
    return out


class Policy(abc.ABC):
    """A placement policy. Subclasses set ``name`` and implement :meth:`score`."""

    name: ClassVar[str]
    epoch: int = 0
    """Bumped by a policy whose scores change for reasons outside a node (what it has
    learnt about the workload); the engine then drops every cached score."""

    def shape_key(self, pod: PodRequest) -> Hashable | None:
        """What of the pod the score depends on; None disables score caching."""
        return (pod.cpu_m, pod.mem_b, pod.gpus, pod.gpu_milli, pod.gpu_models)

    def admit(
        self, state: ClusterState, pod: PodRequest, feasible: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        """Narrow the nodes that have room to those the policy accepts (default: all)."""
        return feasible

    @abc.abstractmethod
    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        """Score of feasible node ``i`` for ``pod``; higher is better."""

    def score_nodes(
        self, state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64]:
        """Scores of feasible ``nodes``, in their order: node by node unless the policy
        knows a faster way (the engine asks for all the nodes a score is missing for)."""
        scores = (self.score(state, i, pod) for i in nodes.tolist())
        return np.fromiter(scores, dtype=np.float64, count=len(nodes))

    def devices(self, state: ClusterState, i: int, pod: PodRequest) -> tuple[int, ...]:
        """Which GPUs of node ``i`` the pod takes."""
        return best_fit_devices(state.gpu_free[i], pod.gpus, pod.gpu_milli)

    def explain(self, state: ClusterState, i: int, pod: PodRequest) -> Mapping[str, float]:
        """The score broken into its parts; by default the score alone."""
        return {self.name: self.score(state, i, pod)}

    def observe(self, state: ClusterState, pod: PodRequest, placement: Placement | None) -> None:
        """Told of every decision once it is made (placed or not); policies that learn the
        workload online use it."""
        return None
