"""Which of a node's GPUs are healthy enough to offer a new GPU pod, and why not.

A GPU is *unhealthy* while its agent reports any of (thresholds in
:class:`~coordinator.config.GpuHealthSettings`):

* a critical XID less than ``xid_window_s`` ago — critical as NVIDIA's device plugin
  counts them: every XID but the application-level 13, 31, 43, 45, 68 and 109 (a faulting
  kernel, a page fault, a preempted context: the job failed, not the GPU), which the
  agent drops, less ``ignored_xids``;
* more than ``ecc_uncorrected_max`` uncorrectable ECC errors since the driver was loaded
  (the volatile count; NVIDIA: the GPU needs a reset);
* more than ``retired_pages_max`` retired pages (DCGM's limit of 60: replace the board);
* a row remapping or page retirement pending until the next GPU reset
  (``refuse_pending_repair``);
* a failed row remapping (no spare rows left), or the GPU fallen off the bus (XID 79).

Nothing here remembers anything: each report is judged afresh, so a GPU comes back the
report after its condition clears (a reset zeroes the volatile ECC count and performs the
pending repair; an XID ages out of the window).

The filter refuses a GPU pod a node whose healthy GPUs are too few for it — unresolvably
when the node has fewer healthy GPUs than the pod asks (evicting helps nothing), resolvably
when healthy ones are there but busy. A node whose every GPU is unhealthy therefore takes
no GPU pod; CPU-only pods are not affected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.config import GpuHealthSettings
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import GpuFault

MAX_NAMED: Final = 4
"""GPUs a reason names one by one; the rest are counted (a reason must stay readable in
``kubectl describe pod`` and within an annotation's budget)."""


def why_unhealthy(fault: GpuFault, settings: GpuHealthSettings, *, aged: bool = True) -> str | None:
    """Why the GPU must not take new pods, or None when it may. ``aged`` says how long ago
    the latest XID was (filter reasons, answered now); without, the words stay the same
    from one report to the next (annotations and Events, which are written on change)."""
    why = []
    if fault.lost:
        why.append("fell off the bus")
    if fault.remap_failed:
        why.append("row remapping failed")
    ignored = settings.ignored_xids
    recent = [(x, age) for x, age in fault.xids if age < settings.xid_window_s and x not in ignored]
    if recent:
        xid, age = recent[0]
        more = f" (+{len(recent) - 1} more)" if len(recent) > 1 else ""
        why.append(f"XID {xid} {age:.0f}s ago{more}" if aged else f"XID {xid}{more}")
    if fault.ecc_uncorrected > settings.ecc_uncorrected_max:
        why.append(f"{fault.ecc_uncorrected} uncorrectable ECC errors")
    if fault.retired_pages > settings.retired_pages_max:
        why.append(f"{fault.retired_pages} retired pages > {settings.retired_pages_max}")
    if fault.repair_pending and settings.refuse_pending_repair:
        why.append("memory repair pending a GPU reset")
    return ", ".join(why) or None


def unhealthy(
    faults: Sequence[GpuFault], settings: GpuHealthSettings, *, aged: bool = True
) -> dict[int, str]:
    """Device index → why it is unhealthy, for the node's unhealthy GPUs only; none while
    the rule is off."""
    out: dict[int, str] = {}
    if not settings.enabled:
        return out
    for fault in faults:
        why = why_unhealthy(fault, settings, aged=aged)
        if why is not None:
            out[fault.index] = why
    return out


def summary(bad: dict[int, str]) -> str:
    """``GPU 3: XID 79 40s ago; GPU 5: …`` for at most :data:`MAX_NAMED` GPUs."""
    named = [f"GPU {i}: {why}" for i, why in sorted(bad.items())[:MAX_NAMED]]
    if len(bad) > MAX_NAMED:
        named.append(f"{len(bad) - MAX_NAMED} more")
    return "; ".join(named)


@dataclass(frozen=True, slots=True)
class Refusal:
    """One health check over the nodes judged, in their order (for the live filter)."""

    fails: npt.NDArray[np.bool_]
    reason: Callable[[int], str]
    """The reason for a failing node, by its row in the state."""


def too_few(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: GpuHealthSettings,
) -> Refusal | None:
    """The nodes of ``nodes`` with fewer healthy GPUs than ``pod`` asks for (evicting pods
    would not help); None for a pod without GPUs or with the rule off."""
    return _judged(state, pod, nodes, settings, busy=False)


def too_busy(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: GpuHealthSettings,
) -> Refusal | None:
    """The nodes of ``nodes`` with enough healthy GPUs for ``pod`` but too few of them with
    its share free (the unhealthy ones may have room: they do not count)."""
    return _judged(state, pod, nodes, settings, busy=True)


def _judged(
    state: ClusterState,
    pod: PodRequest,
    nodes: npt.NDArray[np.int64],
    settings: GpuHealthSettings,
    *,
    busy: bool,
) -> Refusal | None:
    """One of the two checks. Only nodes whose agent reported a GPU fault are looked at,
    one by one: a handful in a healthy fleet."""
    if not pod.gpus or not settings.enabled:
        return None
    fails = np.zeros(len(nodes), dtype=bool)
    why: dict[int, str] = {}
    for k in np.flatnonzero(state.gpu_faulty[nodes]).tolist():
        i = int(nodes[k])
        bad = unhealthy(state.gpu_faults[i], settings)
        if not bad:
            continue
        count, reported = int(state.gpu_count[i]), int(state.gpu_reported[i])
        healthy = _healthy(count, reported, len(bad))
        if healthy is None:
            continue
        with_room = pod.gpus  # unknown unless the Node's devices are the report's
        if count == reported:
            free = state.gpu_free[i, :count]
            with_room = sum(1 for d in range(count) if d not in bad and free[d] >= pod.gpu_milli)
        if not busy and healthy < pod.gpus:
            fails[k] = True
            why[i] = f"GPU health: {healthy} healthy GPUs < {pod.gpus} requested ({summary(bad)})"
        elif busy and healthy >= pod.gpus > with_room:
            fails[k] = True
            why[i] = (
                f"GPU health: {with_room} healthy GPUs with {pod.gpu_milli} milli free"
                f" < {pod.gpus} requested ({summary(bad)})"
            )
    return Refusal(fails, why.__getitem__)


def _healthy(count: int, reported: int, bad: int) -> int | None:
    """How many of the Node's ``count`` GPUs are healthy, with ``bad`` of the ``reported``
    ones unhealthy; None when it cannot be told.

    Equal counts: the same devices, in the same order. Fewer on the Node: the device plugin
    has left out devices it found unhealthy itself (allocatable), perhaps some of the same,
    so at most ``reported − bad`` of the rest are healthy. More on the Node (time-slicing
    replicas): only a node whose every GPU is unhealthy can be judged."""
    if count <= reported:
        return max(0, min(count, reported - bad))
    return 0 if bad >= reported else None
