"""What one report says for the colocation controller, built once per accepted report.

One pass over the pods section: each pod classified (:mod:`common.qos`) and the UIDs of
the BE pods a quota applies to. Then one pass over the report's per-pod use
(``pod_usage``, by UID), joined with those classes: the LS pods' largest per-cgroup CPU
stall and the LS and BE pods' measured CPU use.

A pod's stall is its ``cpu_some_rate_pct`` where the agent measured one: the exact share of
the whole interval since its previous sample, from the ``total`` counter. Its ``avg10``
stands in only where there is no rate (the first sample after the agent starts). The rate,
not max(rate, avg10): avg10 trails the stall by seconds both ways, so taking the larger
would add its lag to the end of every stall (and delay every relaxation) while telling
nothing the rate does not already prove. The rate also says over what time it holds,
which lets the controller count that time toward its dwell (``pressure_rate``).

Where no LS pod reports its own stall (cgroup v1, a kernel without per-cgroup PSI, an agent
without per-pod signals) the node's own ``cpu some avg10`` stands in; where the node has no
PSI at all, there is no pressure and the controller falls back to usage watermarks.

Pods that finished (Succeeded, Failed) are left out, and the quota's list of BE pods stops at
:data:`~common.schema.MAX_BE_PODS` (a node with more is misconfigured).

Between whole reports an agent sends its pods section as the absent reason ``unchanged``
when it equals the one last delivered (:mod:`agent.reportdelta`), so the pod classes of
the node's previous report still hold and are carried over. The per-pod use comes with
every report and is joined anew each time, as are the node-wide facts. A UID in
``pod_usage`` that the pods section does not name (a pod that finished, or one listed
after the section was taken) counts for neither side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from common.qos import BE, classify
from common.schema import (
    MAX_BE_PODS,
    UNCHANGED,
    Absent,
    Enforcement,
    NodeReport,
    PodInfo,
    PodUsage,
    is_absent,
)

FINISHED: Final = frozenset({"Succeeded", "Failed"})


class Source(StrEnum):
    """Where the pressure figure came from."""

    LS_PODS = "ls-pods"
    """The largest ``cpu.pressure`` some stall among the LS pods' own cgroups (each pod's
    rate since its previous sample, else its avg10)."""
    NODE = "node"
    """The node's ``/proc/pressure/cpu`` some avg10: no LS pod reported its own."""
    NONE = "none"
    """No PSI at all: the usage watermark decides."""


@dataclass(frozen=True, slots=True)
class PodClasses:
    """Which of a node's pods are best-effort and which latency-sensitive, as its pods
    section says: carried over while the agent says the section is unchanged."""

    be_pods: tuple[str, ...] = ()
    """The BE pods a quota applies to (at most :data:`~common.schema.MAX_BE_PODS`)."""
    ls_uids: frozenset[str] = frozenset()
    be_uids: frozenset[str] = frozenset()
    """Every running BE pod, the capped-off ones too: their use is BE use all the same."""

    @property
    def ls_pods(self) -> int:
        return len(self.ls_uids)


NO_PODS: Final = PodClasses()


@dataclass(frozen=True, slots=True)
class UsageFacts:
    """The per-pod use of one report, joined with the pod classes."""

    ls_pressure_pct: float | None = None
    ls_pressure_rate: bool = False
    """Whether ``ls_pressure_pct`` is a pod's rate since the previous sample (not avg10)."""
    ls_used_m: int = 0
    be_used_m: int = 0
    measured: bool = False
    """Whether any classified pod reported its CPU use."""


@dataclass(frozen=True, slots=True)
class NodeInput:
    """The colocation facts of one report."""

    pressure_pct: float | None
    source: Source
    allocatable_m: int | None
    """CPU pods can use (true allocatable, else kubelet's, else capacity); None unknown."""
    node_used_m: int | None
    ls_usage_m: int | None
    """CPU the LS (and system) pods used; None when no pod reported its use."""
    be_usage_m: int | None
    be_pods: tuple[str, ...]
    ls_pods: int
    enforcement: Enforcement | None
    pods: PodClasses = NO_PODS
    pressure_rate: bool = False
    """Whether ``pressure_pct`` is an LS pod's measured stall share over the whole interval
    since the agent's previous sample (``cpu_some_rate_pct``), not a trailing avg10."""


def node_input(report: NodeReport, label_key: str, previous: NodeInput | None = None) -> NodeInput:
    """The colocation facts of ``report`` (validated already); ``previous``, the facts of
    the node's last report, supplies the pod classes when the pods section is unchanged."""
    section = report.pods
    if not is_absent(section):
        pods = pod_classes(section.pods, label_key)
    elif section == UNCHANGED and previous is not None:
        pods = previous.pods
    else:
        pods = NO_PODS
    used = usage_facts(report.pod_usage, pods)
    source, pressure, rate = Source.NONE, None, False
    if used.ls_pressure_pct is not None:
        rate = used.ls_pressure_rate
        source, pressure = Source.LS_PODS, used.ls_pressure_pct
    else:
        node = _node_pressure(report)
        if node is not None:
            source, pressure = Source.NODE, node
    node_used = None
    usage_section = report.usage
    if not is_absent(usage_section) and not is_absent(usage_section.cpu):
        node_used = usage_section.cpu.used_m
    if used.measured:
        ls_usage: int | None = used.ls_used_m
        be_usage: int | None = used.be_used_m
    else:  # no per-pod use: count the whole node as LS, so BE is judged conservatively
        ls_usage, be_usage = node_used, None
    return NodeInput(
        pressure_pct=pressure,
        source=source,
        allocatable_m=_allocatable_m(report),
        node_used_m=node_used,
        ls_usage_m=ls_usage,
        be_usage_m=be_usage,
        be_pods=pods.be_pods,
        ls_pods=pods.ls_pods,
        enforcement=report.enforcement,
        pods=pods,
        pressure_rate=rate,
    )


def pod_classes(pods: Sequence[PodInfo], label_key: str) -> PodClasses:
    """One pass over a pods section."""
    be_pods: list[str] = []
    ls_uids: set[str] = set()
    be_uids: set[str] = set()
    for pod in pods:
        if pod.phase in FINISHED:
            continue
        if classify(pod, label_key) is BE:
            if len(be_pods) < MAX_BE_PODS:
                be_pods.append(pod.uid)
            be_uids.add(pod.uid)
        else:
            ls_uids.add(pod.uid)
    return PodClasses(tuple(be_pods), frozenset(ls_uids), frozenset(be_uids))


def usage_facts(usage: Mapping[str, PodUsage] | Absent | None, pods: PodClasses) -> UsageFacts:
    """One pass over a report's per-pod use, each UID looked up in ``pods``' classes."""
    if usage is None or is_absent(usage):
        return UsageFacts()
    ls_pressure: float | None = None
    ls_rate = False
    ls_used = be_used = 0
    measured = False
    for uid, use in usage.items():
        if uid in pods.be_uids:
            if use.cpu_m is not None:
                be_used += use.cpu_m
                measured = True
            continue
        if uid not in pods.ls_uids:
            continue
        if use.cpu_m is not None:
            ls_used += use.cpu_m
            measured = True
        is_rate = use.cpu_some_rate_pct is not None
        stall = use.cpu_some_rate_pct if is_rate else use.cpu_some_avg10_pct
        if stall is not None and (ls_pressure is None or stall > ls_pressure):
            ls_pressure, ls_rate = stall, is_rate
    return UsageFacts(ls_pressure, ls_rate, ls_used, be_used, measured)


def _node_pressure(report: NodeReport) -> float | None:
    psi = report.psi
    if is_absent(psi):
        return None
    cpu = psi.system.cpu
    if is_absent(cpu) or cpu.some is None:
        return None
    return cpu.some.avg10_pct


def _allocatable_m(report: NodeReport) -> int | None:
    section = report.allocatable
    if is_absent(section):
        return None
    cpu = section.cpu
    for value in (cpu.true_allocatable_m, cpu.kubelet_allocatable_m, cpu.capacity_m):
        if value:
            return value
    return None
