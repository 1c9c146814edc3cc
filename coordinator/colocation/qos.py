"""Who is best-effort (BE), who is latency-sensitive (LS), and who is never touched.

* **System-critical** pods — priority ≥ 2,000,000,000, PriorityClass
  ``system-node-critical`` or ``system-cluster-critical``, or namespace ``kube-system`` —
  are never BE and never throttled, whatever their labels say.
* A label says it outright: ``stowage.io/qos`` (the key is ``colocation.qos_label``) or
  Koordinator's ``koordinator.sh/qosClass``: ``BE`` is best-effort; ``LS``, ``LSR`` and
  ``LSE`` are latency-sensitive. Stowage's own label wins over Koordinator's. Real batch
  pods usually have requests (Burstable), so the label is how they are named BE.
* Otherwise QoS class ``BestEffort`` is BE and every other pod LS.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from common.schema import PodInfo

SYSTEM_PRIORITY: Final = 2_000_000_000
SYSTEM_CLASSES: Final = frozenset({"system-node-critical", "system-cluster-critical"})
SYSTEM_NAMESPACE: Final = "kube-system"
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
    if (
        pod.priority >= SYSTEM_PRIORITY
        or pod.priority_class in SYSTEM_CLASSES
        or pod.namespace == SYSTEM_NAMESPACE
    ):
        return SYSTEM
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


_KNOWN: Final = LS_VALUES | {"BE"}
