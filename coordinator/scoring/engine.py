"""The scoring engine: filter, score, pick, commit — the same code for the scheduler
extender and the trace simulator.

Filtering is vectorised over the state's columns. Scores come from the policy, cached per
(node, pod shape): a node's cached scores are dropped when its ``version`` moves, so after
a placement only the changed node is scored again. Among the best-scoring nodes the one
with the smallest ``rank`` wins, a fixed order that keeps tie-breaking consistent (the
simulator draws it per seed; a live cluster uses its node order).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import numpy.typing as npt

from coordinator.scoring import capacity
from coordinator.scoring.base import Policy
from coordinator.state.cluster import ClusterState, Placement
from coordinator.state.podrequest import PodRequest

_INITIAL_COLUMNS = 64
MAX_CACHED_SHAPES = 256
"""Pod shapes whose scores are kept (a column of one float per node each); past this the
least recently used shape's column is reused. A trace has about 90 shapes; a live
cluster's shapes come and go, and must not grow the cache for ever."""


class Engine:
    """One policy over one cluster state."""

    def __init__(
        self,
        state: ClusterState,
        policy: Policy,
        rank: npt.NDArray[np.int64] | None = None,
        *,
        cache_scores: bool = True,
    ) -> None:
        self.state = state
        self.policy = policy
        self.cache_scores = cache_scores
        """False scores every feasible node for every pod (for checks and benchmarks)."""
        n = len(state)
        self.rank = np.arange(n, dtype=np.int64) if rank is None else np.asarray(rank)
        if sorted(self.rank.tolist()) != list(range(n)):
            raise ValueError("rank must be a permutation of the node indices")
        self._columns: dict[Hashable, int] = {}
        self._cache = np.full((n, _INITIAL_COLUMNS), np.nan)
        self._seen_version = state.version.copy()
        self._seen_epoch = policy.epoch
        self._model_ok: dict[frozenset[str], npt.NDArray[np.bool_]] = {}

    # ----------------------------------------------------------------- filter

    def feasible(self, pod: PodRequest) -> npt.NDArray[np.bool_]:
        """Nodes with room for the pod (:mod:`coordinator.scoring.capacity`)."""
        model_ok = None
        if pod.gpus and pod.gpu_models:
            model_ok = self._model_ok.get(pod.gpu_models)
            if model_ok is None:
                model_ok = self._model_ok[pod.gpu_models] = capacity.models_allowed(
                    self.state, pod.gpu_models
                )
        return capacity.room(self.state, pod, slice(None), model_ok).fits(pod)

    # ------------------------------------------------------------------ score

    def scores(self, pod: PodRequest, feasible: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        """Scores of the feasible nodes (NaN elsewhere)."""
        nodes = np.flatnonzero(feasible)
        out = np.full(len(self.state), np.nan)
        key = self.policy.shape_key(pod) if self.cache_scores else None
        if key is None:
            out[nodes] = self.policy.score_nodes(self.state, pod, nodes)
            return out
        column = self._column_for(key)
        missing = nodes[np.isnan(column[nodes])]
        if len(missing):
            column[missing] = self.policy.score_nodes(self.state, pod, missing)
        out[nodes] = column[nodes]
        return out

    def _column_for(self, key: Hashable) -> npt.NDArray[np.float64]:
        self._drop_stale()
        j = self._columns.pop(key, None)  # put back last: the dict is in order of use
        if j is None:
            j = len(self._columns)
            if j == self._cache.shape[1] and j >= MAX_CACHED_SHAPES:
                j = self._columns.pop(next(iter(self._columns)))  # the least recently used
                self._cache[:, j] = np.nan
            elif j == self._cache.shape[1]:
                grown = np.full((len(self.state), min(2 * j, MAX_CACHED_SHAPES)), np.nan)
                grown[:, :j] = self._cache
                self._cache = grown
        self._columns[key] = j
        column: npt.NDArray[np.float64] = self._cache[:, j]
        return column

    def _drop_stale(self) -> None:
        if self.policy.epoch != self._seen_epoch:
            self._cache[:] = np.nan
            self._seen_epoch = self.policy.epoch
        changed = self.state.version != self._seen_version
        if changed.any():
            self._cache[changed] = np.nan
            self._seen_version[changed] = self.state.version[changed]

    # ------------------------------------------------------------------- pick

    def choose(
        self, pod: PodRequest, among: npt.NDArray[np.bool_] | None = None
    ) -> Placement | None:
        """The best node and its devices for the pod, or None if nothing fits; only the
        nodes ``among`` marks, if given (the simulator's nodes in use before the rest)."""
        feasible = self.feasible(pod) if among is None else self.feasible(pod) & among
        feasible = self.policy.admit(self.state, pod, feasible)
        if not feasible.any():
            return None
        scores = self.scores(pod, feasible)
        if np.isnan(scores[feasible]).any():
            raise ValueError(f"policy {self.policy.name} returned NaN for {pod.name}")
        best = np.nanmax(scores)
        tied = np.flatnonzero(scores == best)
        i = int(tied[np.argmin(self.rank[tied])])
        return Placement(node=i, devices=self.policy.devices(self.state, i, pod))

    def commit(self, pod: PodRequest, placement: Placement) -> None:
        self.state.allocate(placement, pod.cpu_m, pod.mem_b, pod.gpu_milli, pod.tag)

    def place(self, pod: PodRequest) -> Placement | None:
        """Choose and commit; tell the policy either way."""
        placement = self.choose(pod)
        if placement is not None:
            self.commit(pod, placement)
        self.policy.observe(self.state, pod, placement)
        return placement

    def explain(self, pod: PodRequest, i: int) -> Mapping[str, float]:
        """The policy's score of node ``i`` by component; ``{"feasible": 0}`` where the pod
        does not fit (policies score feasible nodes only)."""
        if not self.feasible(pod)[i]:
            return {"feasible": 0.0}
        return {"feasible": 1.0, **self.policy.explain(self.state, i, pod)}
