"""What a pod asks for, as the scheduler counts it.

It lives with the cluster state rather than with the policies because both sides need
it: the state layer turns Kubernetes Pods into requests (:mod:`coordinator.state.kubeobjects`)
and the scoring layer scores them, and the state layer must not import scoring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.state.cluster import MILLI_PER_GPU


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What a pod asks for, as the scheduler counts it.

    ``gpus`` devices, each giving ``gpu_milli`` (1000 = a whole GPU; below 1000 a shared
    GPU); ``gpu_models`` lists the GPU models it accepts (empty = any).
    """

    name: str
    cpu_m: int
    mem_b: int
    gpus: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] = field(default_factory=frozenset)
    contiguous_b: int = 0
    """Memory it needs in blocks of 2 MiB or more (hugepage requests, or the opt-in
    annotation), raised to the configured threshold when a Pod is read
    (:func:`coordinator.state.kubeobjects.pod_request`); 0 for ordinary pods, whose
    memory can come from anywhere."""
    batch: bool = False
    """Throughput work that can wait: kept off nodes already running hot."""
    numa_aligned: bool = False
    """Guaranteed with whole CPUs: kubelet's topology manager may pin it to one NUMA node."""
    priority_class: str = ""
    """Its ``spec.priorityClassName`` ("" none): what the tenancy rule classes it by."""
    mig: tuple[tuple[str, int], ...] = ()
    """The MIG instances it asks for, by resource (``nvidia.com/mig-3g.40gb``, the device
    plugin's mixed strategy) and count, sorted; empty for any other pod."""
    io_heavy: bool = False
    """Marked as doing heavy disk I/O (``stowage.io/io-heavy``): kept off nodes whose
    disks are saturated."""
    gang: str | None = None
    """``namespace/name`` of the gang it belongs to (its Volcano PodGroup, or the
    ``stowage.io/gang`` label): its members prefer one topology domain
    (:mod:`coordinator.scoring.ganglocality`). Its owner's word, which steers only the
    owner's own pods, and only towards each other."""
    gang_size: int | None = None
    """How many members the gang has, by the pod's ``stowage.io/gang-min-member``
    (a PodGroup's ``spec.minMember``, where known, wins over it)."""

    def __post_init__(self) -> None:
        if self.cpu_m < 0 or self.mem_b < 0 or self.gpus < 0 or self.contiguous_b < 0:
            raise ValueError(f"{self.name}: negative request")
        if self.gpus and not 0 < self.gpu_milli <= MILLI_PER_GPU:
            raise ValueError(f"{self.name}: gpu_milli must be in 1..1000 when GPUs are requested")
        if not self.gpus and self.gpu_milli:
            raise ValueError(f"{self.name}: gpu_milli without GPUs")

    @property
    def namespace(self) -> str:
        """Its namespace (``name`` is ``namespace/name``)."""
        return self.name.partition("/")[0]

    @property
    def gpu_total_milli(self) -> int:
        return self.gpus * self.gpu_milli

    @property
    def sharing(self) -> bool:
        """One GPU, shared with other pods."""
        return self.gpus == 1 and self.gpu_milli < MILLI_PER_GPU

    @property
    def tag(self) -> str | None:
        """The GPU pod kind GPU clustering groups by; None for CPU-only pods."""
        if not self.gpus:
            return None
        return "share-gpu" if self.sharing else f"{self.gpus}-gpu"
