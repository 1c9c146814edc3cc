"""Who is best-effort (BE), who is latency-sensitive (LS), and who is never touched.

One rule for both sides: the coordinator names a node's BE pods by it, and the agent checks
every pod a directive names against it again, from its own view of its node's pods, before
it throttles anything (directives travel over plain HTTP by default, so a forged or
mistaken one must not be able to cut a system pod's CPU). In this order:

* **System** pods — static pods and their mirrors, priority ≥ 2,000,000,000, PriorityClass
  ``system-node-critical`` or ``system-cluster-critical``, or namespace ``kube-system`` —
  are never BE and never throttled, whatever their labels say.
* **Guaranteed** pods are never BE: they were promised their CPU whole, and their cgroup
  sits directly under kubepods, outside the burstable and besteffort trees.
* A label says it outright: ``stowage.io/qos`` (:data:`LABEL`; the coordinator's key is
  ``colocation.qos_label``) or Koordinator's ``koordinator.sh/qosClass``: ``BE`` is
  best-effort; ``LS``, ``LSR`` and ``LSE`` are latency-sensitive. Stowage's own label wins
  over Koordinator's. Real batch pods usually have requests (Burstable), so the label is
  how they are named BE.
* Otherwise QoS class ``BestEffort`` is BE and every other pod LS.

What each rule trusts: the namespace, ``spec.priority`` (set by admission from a
PriorityClass, which operators write) and the kubelet's own marks of a static pod
(:attr:`common.schema.PodInfo.static`) are not the pod owner's to choose. A ``BE`` label is,
but it can only make the owner's own pod throttled.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from common.schema import PodInfo

SYSTEM_PRIORITY: Final = 2_000_000_000
SYSTEM_CLASSES: Final = frozenset({"system-node-critical", "system-cluster-critical"})
SYSTEM_NAMESPACE: Final = "kube-system"
LABEL: Final = "stowage.io/qos"
"""Stowage's own QoS label (the coordinator's default ``colocation.qos_label``)."""
KOORDINATOR_LABEL: Final = "koordinator.sh/qosClass"
LS_VALUES: Final = frozenset({"LS", "LSR", "LSE"})


class Qos(StrEnum):
    BE = "BE"
    LS = "LS"
    SYSTEM = "SYSTEM"
    """Counted as LS for pressure, never throttled."""


BE: Final = Qos.BE
LS: Final = Qos.LS
SYSTEM: Final = Qos.SYSTEM
"""The members as plain module names: classifying runs for every pod of every report, and
reading a member off its enum class costs ten times as much as a module global."""


def classify(pod: PodInfo, label_key: str) -> Qos:
    """The colocation class of one pod (see the module's rules, in their order)."""
    if system_reason(pod) is not None:
        return SYSTEM
    if pod.qos_class == "Guaranteed":
        return LS
    labels = pod.labels
    if labels:
        value = labels.get(label_key)
        if value is None:
            value = labels.get(KOORDINATOR_LABEL)
        elif value not in _KNOWN:  # not a class Stowage knows: Koordinator's label may say
            value = labels.get(KOORDINATOR_LABEL, value)
        if value == "BE":
            return BE
        if value in LS_VALUES:
            return LS
    return BE if pod.qos_class == "BestEffort" else LS


def system_reason(pod: PodInfo) -> str | None:
    """Why ``pod`` is a system pod, in words; None when it is not one."""
    if pod.static:
        return "static pod"
    if pod.namespace == SYSTEM_NAMESPACE:
        return f"namespace {SYSTEM_NAMESPACE}"
    if pod.priority_class in SYSTEM_CLASSES:
        return f"priority class {pod.priority_class}"
    if pod.priority >= SYSTEM_PRIORITY:
        return f"priority {pod.priority}"
    return None


_KNOWN: Final = LS_VALUES | {"BE"}
