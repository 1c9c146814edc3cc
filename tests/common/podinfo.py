"""A pod as an agent's report lists it (``common.schema.PodInfo``), for the tests of who is
best-effort, latency-sensitive or system."""

from __future__ import annotations

from msgspec import structs

from common.schema import PodInfo, Resources

NONE = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0)
QOS_KEY = "stowage.io/qos"


def pod_info(uid: str = "u", **changes: object) -> PodInfo:
    """A running Burstable pod of ``default`` named ``uid``, priority 0, no labels, then
    ``changes``."""
    base = PodInfo(
        namespace="default",
        name=uid,
        uid=uid,
        phase="Running",
        qos_class="Burstable",
        priority=0,
        priority_class=None,
        requests=NONE,
        limits=NONE,
        labels={},
    )
    return structs.replace(base, **changes)
