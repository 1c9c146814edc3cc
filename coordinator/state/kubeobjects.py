"""Kubernetes Nodes and Pods (JSON, as the API server and kube-scheduler send them) as the
engine's :class:`NodeSpec` and :class:`PodRequest`.

A Node's size is its ``status.allocatable``; its GPUs are ``nvidia.com/gpu`` and their
model the GPU feature discovery label. A Pod's request is counted as the scheduler counts
it (:mod:`common.podspec`). Shared GPUs, accepted GPU models, contiguous memory and the
batch class come from ``stowage.io/`` annotations (labels work too).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from common import podspec, quantity
from common.errors import QuantityError
from coordinator.state.cluster import MILLI_PER_GPU, NodeSpec
from coordinator.state.podrequest import PodRequest

log = logging.getLogger(__name__)

GPU_MODEL_LABELS: Final = ("stowage.io/gpu-model", "nvidia.com/gpu.product")
GPU_MILLI: Final = "stowage.io/gpu-milli"
"""Share of each requested GPU in milli (``"500"``) for pods that share GPUs."""
GPU_MODELS: Final = "stowage.io/gpu-models"
"""GPU models a pod accepts, ``|``-separated (``"A100|H100"``)."""
CONTIGUOUS: Final = "stowage.io/needs-contiguous-memory"
"""``"true"`` (the configured threshold) or a quantity of memory needed in 2 MiB blocks."""
QOS: Final = "stowage.io/qos"
"""``batch`` or ``best-effort`` marks throughput work; anything else is latency-sensitive."""
BATCH_CLASSES: Final = frozenset({"batch", "best-effort"})
IO_HEAVY: Final = "stowage.io/io-heavy"
"""``"true"``: the pod does heavy disk I/O and should not go to a node whose disks are
saturated. The pod's owner writes it, which is safe: it can only narrow where that pod
itself may go."""
PODGROUP_KEYS: Final = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
"""The annotations naming a pod's Volcano PodGroup, in its namespace: Volcano's job
controller writes the first on every pod of a job (``KubeGroupNameAnnotationKey``),
newer releases the second as well (``VolcanoGroupNameAnnotationKey``)."""
GANG_LABEL: Final = "stowage.io/gang"
"""A gang without a PodGroup: pods of one namespace with the same value are one gang."""
GANG_MIN_KEY: Final = "stowage.io/gang-min-member"
"""How many members the pod's gang has (needs to keep running)."""
MAX_GANG_SIZE: Final = 2**31 - 1
"""The largest gang: ``spec.minMember`` of a PodGroup is an int32."""
MAX_GPUS_PER_NODE: Final = 256
"""Most ``nvidia.com/gpu`` a Node may count. Sixteen physical GPUs is the most one
machine has; time-slicing advertises each several times (replicas), and 256 leaves room
for 8 GPUs × 32 replicas. Every node's row in the state is as wide as the widest node,
so this also bounds what one odd Node costs (5,000 nodes × 256 devices: 10 MiB a
column, and every GPU filter reads it)."""


class ObjectError(ValueError):
    """A Node or Pod that cannot be understood; the message names the object and field."""


def node_spec(node: Mapping[str, Any]) -> NodeSpec:
    """The node's size, or an :class:`ObjectError` naming the field: a Node that is not a
    mapping of the right shapes, or whose ``status.allocatable`` is negative or counts
    more GPUs than :data:`MAX_GPUS_PER_NODE` (the state keeps a column per device, so a
    count like ``"1e9"`` would cost gigabytes), is refused whole."""
    try:
        return _node_spec(node)
    except (AttributeError, TypeError) as e:  # a field of the wrong JSON type
        raise ObjectError(f"not a Kubernetes Node ({e})") from e


def _node_spec(node: Mapping[str, Any]) -> NodeSpec:
    meta = node.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("node without metadata.name")
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    labels = meta.get("labels") or {}
    try:
        cpu = _quantity(allocatable, "cpu")
        memory = _quantity(allocatable, "memory")
        gpus = _quantity(allocatable, podspec.GPU)
    except QuantityError as e:
        raise ObjectError(f"node {name}: status.allocatable: {e}") from e
    for field, value in (("cpu", cpu), ("memory", memory), (podspec.GPU, gpus)):
        if value < 0:
            raise ObjectError(f"node {name}: status.allocatable.{field}: negative")
    if gpus > MAX_GPUS_PER_NODE:
        raise ObjectError(
            f"node {name}: status.allocatable.{podspec.GPU}: {math.floor(gpus)} devices,"
            f" more than the {MAX_GPUS_PER_NODE} a node can have"
        )
    model = next((labels[k] for k in GPU_MODEL_LABELS if labels.get(k)), "")
    if not isinstance(model, str):
        raise ObjectError(f"node {name}: metadata.labels: GPU model is not a string")
    return NodeSpec(
        name=name,
        cpu_m=math.ceil(cpu * 1000),
        mem_b=math.ceil(memory),
        gpus=math.floor(gpus),
        gpu_model=model,
    )


MAX_MIG_ASKS: Final = 16
"""Most MIG resources one pod may ask for: an A100 or H100 has 7 profiles and their media
variants; a pod asking for more is refused as malformed (the filter judges each ask on
every node offered, so the count must be bounded)."""


def _mig_asks(extended: Mapping[str, int], name: str) -> tuple[tuple[str, int], ...]:
    asks = tuple(
        sorted((r, n) for r, n in extended.items() if r.startswith(podspec.MIG_PREFIX) and n > 0)
    )
    if len(asks) > MAX_MIG_ASKS:
        raise ObjectError(
            f"pod {name}: {len(asks)} MIG resources requested, more than {MAX_MIG_ASKS}"
        )
    return asks


def pod_request(pod: Mapping[str, Any], contiguity_default_b: int) -> PodRequest:
    meta = pod.get("metadata") or {}
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"
    marks = {**(meta.get("annotations") or {}), **(meta.get("labels") or {})}
    try:
        totals = podspec.totals(podspec.requests(pod))
        milli = _gpu_milli(marks.get(GPU_MILLI))
        contiguous = _contiguous(marks.get(CONTIGUOUS), contiguity_default_b)
    except (QuantityError, ValueError) as e:
        raise ObjectError(f"pod {name}: {e}") from e
    models = frozenset(m for m in str(marks.get(GPU_MODELS) or "").split("|") if m)
    gpus = totals.gpu if totals.gpu else (1 if milli < MILLI_PER_GPU else 0)
    return PodRequest(
        name=name,
        cpu_m=totals.cpu_m,
        mem_b=totals.mem_b,
        gpus=gpus,
        gpu_milli=milli if gpus else 0,
        gpu_models=models if gpus else frozenset(),
        contiguous_b=_contiguity_need(max(contiguous, totals.hugepages_b), contiguity_default_b),
        batch=str(marks.get(QOS, "")).lower() in BATCH_CLASSES
        or podspec.qos_class(pod) == "BestEffort",
        priority_class=str((pod.get("spec") or {}).get("priorityClassName") or ""),
        numa_aligned=podspec.qos_class(pod) == "Guaranteed"
        and totals.cpu_m > 0
        and totals.cpu_m % 1000 == 0,
        io_heavy=str(marks.get(IO_HEAVY, "")).lower() == "true",
        mig=_mig_asks(totals.extended, name),
        gang=gang_of(pod),
        gang_size=gang_count(marks.get(GANG_MIN_KEY), name),
    )


def podgroup_of(pod: Mapping[str, Any]) -> str | None:
    """The name of the pod's PodGroup (:data:`PODGROUP_KEYS`, an annotation, or a label of
    that key), or None."""
    meta = pod.get("metadata") or {}
    notes, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    for key in PODGROUP_KEYS:
        for marks in (notes, labels):
            if isinstance(value := marks.get(key), str) and value:
                return value
    return None


def gang_of(pod: Mapping[str, Any]) -> str | None:
    """``namespace/name`` of the pod's gang: its PodGroup, else its :data:`GANG_LABEL`.
    Always in the pod's own namespace, so no pod can join another namespace's gang."""
    meta = pod.get("metadata") or {}
    group = podgroup_of(pod)
    if group is None:
        label = (meta.get("labels") or {}).get(GANG_LABEL)
        group = label if isinstance(label, str) and label else None
    return None if group is None else f"{meta.get('namespace') or 'default'}/{group}"


def gang_count(raw: Any, where: str) -> int | None:
    """A gang's member count (``"8"``), or None — with a warning naming ``where`` — for
    anything but a whole number in 1 … :data:`MAX_GANG_SIZE`: a typo in the count must
    not make the pod unreadable, and an absent count is the cautious reading."""
    if raw is None or raw == "":
        return None
    text = str(raw).strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_GANG_SIZE:
        log.warning("pod %s: %s %r is not a count 1 … %d", where, GANG_MIN_KEY, raw, MAX_GANG_SIZE)
        return None
    return int(text)


def _quantity(resources: Mapping[str, Any], name: str) -> Fraction:
    raw = resources.get(name)
    return quantity.parse_value(str(raw)) if raw is not None else Fraction(0)


def _gpu_milli(raw: Any) -> int:
    if raw is None or raw == "":
        return MILLI_PER_GPU
    text = str(raw).strip()
    if not text.isdigit() or not 0 < int(text) <= MILLI_PER_GPU:
        raise ValueError(f"{GPU_MILLI} {text!r}: expected an integer 1..1000")
    return int(text)


def _contiguity_need(need_b: int, threshold_b: int) -> int:
    """What a pod needing ``need_b`` in 2 MiB blocks is judged by: no less than the
    threshold (``signals.contiguity_threshold_b``, ``memoryFragmentationThreshold``), so
    a node is never judged with less contiguous room than the operator asked for. Applied
    here once, so the filter and the policies read one number."""
    return max(need_b, threshold_b) if need_b else 0


def _contiguous(raw: Any, default_b: int) -> int:
    if raw is None or str(raw).lower() in ("", "false", "no"):
        return 0
    if str(raw).lower() in ("true", "yes"):
        return default_b
    value = quantity.parse_value(str(raw))
    if value < 0:
        raise ValueError(f"{CONTIGUOUS} {raw!r}: negative")
    return math.ceil(value)
