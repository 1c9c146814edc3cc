"""Which nodes are too busy on I/O for a pod marked ``stowage.io/io-heavy: "true"``.

A node is *saturated* while its agent's latest report shows (thresholds in
:class:`~coordinator.config.IoSettings`):

* a disk with requests averaging more than ``disk_await_ms`` (50 ms) **and** I/O in flight
  more than ``disk_util_pct`` (95 %) of the interval — ``iostat -x``'s ``await`` and
  ``%util`` over the agent's interval, from ``/proc/diskstats``; or
* I/O PSI ``some`` avg10 above ``io_pressure_pct`` (40 %): some task waited on I/O that
  share of the last ten seconds, whichever device (or remote filesystem) it waited on.

Only marked pods are kept off: the mark is the pod owner's, which is safe precisely
because it can only narrow where that pod itself goes. A node without a fresh report
is unknown and passes. Like every live signal, each report is judged afresh: a node is
offered again the report after its disks calm down.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from coordinator.config import IoSettings
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest


def why_saturated(
    disks: tuple[tuple[str, float, float], ...], io_pressure_pct: float, settings: IoSettings
) -> str | None:
    """Why the node is too busy on I/O, or None when it is not (or not measured)."""
    for name, util, wait in disks:
        if util > settings.disk_util_pct and wait > settings.disk_await_ms:
            return (
                f"I/O saturated: disk {name} {util:.0f} % busy > {settings.disk_util_pct:g} %,"
                f" await {wait:.0f} ms > {settings.disk_await_ms:g} ms"
            )
    if not math.isnan(io_pressure_pct) and io_pressure_pct > settings.io_pressure_pct:
        return (
            f"I/O saturated: I/O pressure {io_pressure_pct:.0f} % > {settings.io_pressure_pct:g} %"
        )
    return None


def saturated(
    state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64], settings: IoSettings
) -> tuple[npt.NDArray[np.bool_], dict[int, str]] | None:
    """Per node of ``nodes``, whether it is too busy on I/O for ``pod``, and why (by row);
    None for a pod not marked I/O-heavy or with the rule off."""
    if not pod.io_heavy or not settings.enabled:
        return None
    fails = np.zeros(len(nodes), dtype=bool)
    why: dict[int, str] = {}
    pressure = state.io_pressure_pct[nodes]
    for k, i in enumerate(nodes.tolist()):
        reason = why_saturated(state.disks[i], float(pressure[k]), settings)
        if reason is not None:
            fails[k] = True
            why[i] = reason
    return fails, why
