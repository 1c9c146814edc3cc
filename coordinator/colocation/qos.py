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


def classify(pod: PodInfo, label_key: str) -> Qos:
    """The colocation class of one pod (see the module's rules, in their order)."""
    if (
        pod.priority >= SYSTEM_PRIORITY
        or pod.priority_class in SYSTEM_CLASSES
        or pod.namespace == SYSTEM_NAMESPACE
    ):
        return Qos.SYSTEM
    labels = pod.labels
    for value in (labels.get(label_key), labels.get(KOORDINATOR_LABEL)):
        if value == "BE":
            return Qos.BE
        if value in LS_VALUES:
            return Qos.LS
    return Qos.BE if pod.qos_class == "BestEffort" else Qos.LS
