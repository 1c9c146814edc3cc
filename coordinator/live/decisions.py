"""The answers the extender endpoints serve, worked out over the cluster state: which of
the nodes offered can take a pod (filter), and how much each is worth to it (prioritize).

Both take the offered names' rows (:mod:`coordinator.live.rows`) and are vectorised over
the nodes: per name, Python only finds its row and copies it into the answer. A name the
state does not hold is a node we know nothing against: it passes filter and scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coordinator.config import SignalSettings
from coordinator.live.rows import Rows
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import ganglocality, iocontention, livefilters
from coordinator.scoring.base import Policy
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

MAX_EXTENDER_SCORE: Final = 10
"""``extenderv1.MaxExtenderPriority``: kube-scheduler multiplies by weight × 10. The one
definition: prioritize scales onto it here, and the wire format checks scores against it."""


@dataclass
class FilterResult:
    passing: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    passed: npt.NDArray[np.bool_] | None = field(default=None, compare=False, repr=False)
    """Per name offered, in the order offered, whether it passes: ``passing`` as a mask,
    for answers that pick names out without a lookup per name."""


def filter_nodes(
    engine: Engine,
    pod: PodRequest,
    offered: Rows,
    settings: SignalSettings,
) -> FilterResult:
    """Which of the ``offered`` names can take the pod: ``passing`` lists the names we do
    not know (nothing known against them), then the known ones that pass, each in the
    order given; the others map to why not, by name, in ``failed`` or ``unresolvable``.
    Names are picked out of the offered array by mask: no Python work per name."""
    known, names = offered.known, offered.names
    if not known.any():
        return FilterResult(passing=names.tolist(), passed=np.ones(len(names), dtype=bool))
    at = np.flatnonzero(known)  # where each known name was offered
    found = judge(engine.state, engine.policy, pod, offered.index[at], settings)
    unresolvable = found.unresolvable
    failed = found.refused & ~unresolvable
    passed = ~known
    passed[at[~found.refused]] = True
    return FilterResult(
        passing=names[~known].tolist() + names[at[~found.refused]].tolist(),
        failed=_by_name(names[at[failed]], found.reasons[failed]),
        unresolvable=_by_name(names[at[unresolvable]], found.reasons[unresolvable]),
        passed=passed,
    )


def judge(
    state: ClusterState,
    policy: Policy,
    pod: PodRequest,
    index: npt.NDArray[np.int64],
    settings: SignalSettings,
) -> livefilters.Refusals:
    """Stowage's filter over the rows ``index`` of ``state``: the live filter's refusals,
    and the nodes the policy keeps free for others (a resolvable refusal). The one fit
    check: the filter endpoints and the eviction planner (over a state with the victims'
    resources given back) both ask it."""
    found = livefilters.refusals(state, pod, index, settings)
    admitted = policy.admit(state, pod, np.ones(len(state), dtype=bool))
    kept = ~found.refused & ~admitted[index]
    found.reasons[kept] = "kept free for the node's GPU pods (CPU-only pod)"
    return livefilters.Refusals(
        refused=found.refused | kept, reasons=found.reasons, unresolvable=found.unresolvable
    )


def prioritize_rows(
    engine: Engine,
    pod: PodRequest,
    rows: npt.NDArray[np.int64],
    known: npt.NDArray[np.bool_],
    metrics: CoordinatorMetrics,
    io_penalty: npt.NDArray[np.float64] | None = None,
    gang: tuple[npt.NDArray[np.float64], float] | None = None,
) -> npt.NDArray[np.int64]:
    """The 0–10 score of each row of ``rows``, in order (a row given twice scores twice);
    0 for a name we do not know or a node the pod cannot take. With ``io_penalty`` (an
    I/O-heavy pod), the policy's scores are ranked by it first
    (:func:`coordinator.scoring.iocontention.spread`); with ``gang`` (a gang member's
    locality term per row and its weight), the term is added
    (:func:`coordinator.scoring.ganglocality.ranked`).

    Among the nodes given that can take the pod, the first of the best-scoring in node
    rank gets 10 and the others ``⌊9 · (score − worst) / (best − worst)⌋`` (9 when all
    tie)."""
    out = np.zeros(len(rows), dtype=np.int64)
    if not known.any():
        return out
    state = engine.state
    candidates = np.zeros(len(state), dtype=bool)
    candidates[rows[known]] = True
    candidates &= engine.policy.admit(state, pod, engine.feasible(pod))
    if not candidates.any():
        return out
    with metrics.policy_seconds.labels(engine.policy.name).time():
        raw = engine.scores(pod, candidates)
    if io_penalty is not None:
        raw = iocontention.spread(raw, io_penalty)
    if gang is not None:
        raw = ganglocality.ranked(raw, *gang)
    best = np.nanmax(raw)
    worst = np.nanmin(raw)
    tied = np.flatnonzero(raw == best)
    first = int(tied[np.argmin(engine.rank[tied])])
    scored = np.flatnonzero(~np.isnan(raw))
    scaled = np.zeros(len(state) + 1, dtype=np.int64)  # the last row: names not known
    if best > worst:
        with np.errstate(invalid="ignore", over="ignore"):
            values = (MAX_EXTENDER_SCORE - 1) * (raw[scored] - worst) / (best - worst)
            if not np.isfinite(values[scored != first]).all():  # from infinite scores
                raise ValueError(f"policy {engine.policy.name}: scores cannot be scaled")
            scaled[scored] = values.astype(np.int64)  # as int(): towards zero (>= 0)
    else:
        scaled[scored] = MAX_EXTENDER_SCORE - 1
    scaled[first] = MAX_EXTENDER_SCORE
    each: npt.NDArray[np.int64] = scaled[rows]
    return each


def explain(
    engine: Engine, pod: PodRequest, i: int, fresh: bool, settings: SignalSettings
) -> dict[str, Any]:
    """Node ``i``'s filter verdict and score components for the pod (``/debug/explain``)."""
    state: ClusterState = engine.state
    rejection = livefilters.rejections(state, pod, np.array([i]), settings).get(i)
    return {
        "node": state.names[i],
        "policy": engine.policy.name,
        "signals": "fresh" if fresh else "unknown (no fresh report): neutral",
        "filter": rejection.reason if rejection else "passes",
        "components": dict(engine.explain(pod, i)),
    }


def _by_name(names: npt.NDArray[np.object_], values: npt.NDArray[Any]) -> dict[str, Any]:
    """``{names[k]: values[k]}``, in order."""
    return dict(zip(names.tolist(), values.tolist(), strict=True))
