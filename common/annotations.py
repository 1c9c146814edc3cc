"""The ``stowage.io/`` Node annotations: keys and value formats, readable by ``kubectl``
and any scheduler.

Each value is ``key=value`` pairs and the time they were measured::

    stowage.io/fullness:    cpu=45.2,memory=61.0,gpu=87.5;at=2026-11-29T17:14:05Z
    stowage.io/contiguity:  free_2mib=12.50Gi;at=2026-11-29T17:14:05Z
    stowage.io/pressure:    cpu=3.1,memory=0.0;at=2026-11-29T17:14:05Z
    stowage.io/directives:  be_cpu_quota=4000m;at=2026-11-29T17:14:05Z   (or none)
    stowage.io/be-cpu-quota:        4000m;at=2026-11-29T17:14:05Z       (or none)
    stowage.io/be-cpu-quota-reason: tightened: LS cpu some avg10 41.0% >= 30% for 10s
    stowage.io/batch-cpu:   reclaimable=98850m;at=2026-11-29T17:14:05Z
    stowage.io/state:       fresh;at=2026-11-29T17:14:05Z   (or "stale: no report since …")
    stowage.io/gpu-health:  unhealthy=3+5,gpus=8;at=2026-11-29T17:14:05Z  (only while any is)
    stowage.io/gpu-health-reason:   GPU 3: XID 79; GPU 5: 2 uncorrectable ECC errors

``be-cpu-quota`` is the leader's best-effort CPU throttle of the node and
``be-cpu-quota-reason`` why (free text, at most :data:`MAX_REASON` characters);
``batch-cpu`` is the CPU a batch scheduler may place best-effort pods on: allocatable −
LS use − the pool's margin, as Koordinator's batch resources publish it. ``gpu-health``
names the node's GPUs not offered to new GPU pods (device indices joined by ``+``) and how
many it has; ``gpu-health-reason`` says why, per GPU (free text, cut like the quota's).

Percentages are of what pods can really use (true allocatable where measured). All of
one node's annotations stay under :data:`BUDGET_B`: a Node's annotations share 256 kB
with everything else that writes there.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Final

PREFIX: Final = "stowage.io/"
FULLNESS: Final = PREFIX + "fullness"
CONTIGUITY: Final = PREFIX + "contiguity"
PRESSURE: Final = PREFIX + "pressure"
DIRECTIVES: Final = PREFIX + "directives"
STATE: Final = PREFIX + "state"
BE_CPU_QUOTA: Final = PREFIX + "be-cpu-quota"
BE_CPU_QUOTA_REASON: Final = PREFIX + "be-cpu-quota-reason"
BATCH_CPU: Final = PREFIX + "batch-cpu"
GPU_HEALTH: Final = PREFIX + "gpu-health"
GPU_HEALTH_REASON: Final = PREFIX + "gpu-health-reason"
CONSOLIDATE: Final = PREFIX + "consolidate"
"""Written by the utilisation patrol (:mod:`coordinator.consolidation`), not the publisher:
``window=1h,mean=23.4,peak=41.0,threshold=70;at=…`` while a node stays under the threshold."""
CONSOLIDATE_REASON: Final = PREFIX + "consolidate-reason"
CONSOLIDATE_CORDONED: Final = PREFIX + "consolidate-cordoned"
"""Set by the patrol with the cordon it put on a node (``patrol.cordon: on``): the only
cordons it ever lifts are those on nodes carrying it, never an operator's."""
SCALE_HINT: Final = PREFIX + "scale-hint"
"""Written by the autoscaling hints (:mod:`coordinator.autoscale`) on a Volcano Queue:
``group=karpenter.sh/nodepool:gpu-a100,nodes=2,gap=nvidia.com/gpu:12;at=…``
(``nodes=0,group=none`` while no known group fits the work; absent while the queue has
room). A queue bounded by ResourceQuotas gets none (writing a Namespace is not granted):
its ``ScaleHint`` Event's message starts with the same value."""
SCALE_HINT_REASON: Final = PREFIX + "scale-hint-reason"
KEYS: Final = (
    FULLNESS,
    CONTIGUITY,
    PRESSURE,
    DIRECTIVES,
    STATE,
    BE_CPU_QUOTA,
    BE_CPU_QUOTA_REASON,
    BATCH_CPU,
    GPU_HEALTH,
    GPU_HEALTH_REASON,
)
BUDGET_B: Final = 4096
MAX_REASON: Final = 512
"""A reason longer than this is cut: the annotations of one node share :data:`BUDGET_B`."""


def timestamp(unix_s: float) -> str:
    return dt.datetime.fromtimestamp(unix_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def value(pairs: Mapping[str, str], at: float) -> str:
    body = ",".join(f"{k}={v}" for k, v in pairs.items())
    return f"{body};at={timestamp(at)}"


def parse(text: str) -> tuple[dict[str, str], str]:
    """``(pairs, timestamp)`` of a value; pairs without ``=`` (a state word) map to ""."""
    body, _, at = text.rpartition(";at=")
    pairs: dict[str, str] = {}
    for part in body.split(","):
        key, _, val = part.partition("=")
        if key:
            pairs[key] = val
    return pairs, at


def size_b(annotations: Mapping[str, str | None]) -> int:
    """Bytes the way the API server counts them: keys plus values."""
    return sum(len(k) + len(v) for k, v in annotations.items() if v is not None)


def gibibytes(b: int) -> str:
    return f"{b / 2**30:.2f}Gi"


def millicores(m: int | None) -> str:
    return "none" if m is None else f"{m}m"


def reason(text: str) -> str:
    """A free-text reason, cut to :data:`MAX_REASON` characters."""
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"
