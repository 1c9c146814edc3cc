"""The coordinator's settings: every knob, its unit and why its default is what it is.

Loaded from YAML (``stowage coordinator --config FILE``) by :mod:`common.config`, which
refuses unknown keys and wrong types, naming the key. Example::

    policy: {name: stowage, args: {stranding_weight: 0.3}}
    signals: {contiguity_threshold_b: 536870912, cpu_utilization_threshold_pct: 95}
    publisher: {heartbeat_s: 300}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from common import quantity
from common.errors import ConfigError, QuantityError

MIB = 2**20


def _positive(where: str, **values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ConfigError(f"{where}.{name}: must be positive, got {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySettings:
    name: str = "stowage"
    """Scoring policy (see ``coordinator/scoring/registry.py``): stowage, volcano-binpack,
    most-allocated, fgd, …"""
    args: dict[str, Any] = field(default_factory=dict)
    """Policy arguments, checked strictly by the registry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuHealthSettings:
    """Which GPUs new GPU pods are not offered (``coordinator/scoring/gpuhealth.py``).

    Every condition is judged afresh on each report, so a GPU is offered again as soon as
    its agent stops reporting the condition (a GPU reset clears the volatile ECC count and
    a pending repair; an XID ages out of the window) — no operator step."""

    enabled: bool = True
    """Refuse GPU pods the unhealthy GPUs of a node (a node left with too few healthy GPUs
    is refused for the pod); false offers every GPU as before."""
    xid_window_s: float = 3600.0
    """A GPU with a critical XID seen less than this long ago is unhealthy. Critical is
    what NVIDIA's device plugin counts: every XID but the application-level 13, 31, 43,
    45, 68 and 109 (the agent drops those), less ``ignored_xids``. An hour: long enough
    that a GPU failing again after a reset is not offered between two failures, short
    enough that one transient XID does not cost the GPU for a day."""
    ignored_xids: list[int] = field(default_factory=list)
    """Further XIDs that do not make a GPU unhealthy (for instance 94, a contained ECC
    error that ends only the application that hit it)."""
    ecc_uncorrected_max: int = 0
    """Uncorrectable ECC errors (the volatile count, since the driver was loaded) a GPU
    may show and still be offered. NVIDIA: an uncorrectable error needs the GPU reset
    (page retirement or row remapping takes effect then)."""
    retired_pages_max: int = 60
    """Pages a GPU may have retired for ECC errors and still be offered: DCGM's
    retired-pages limit (above 60 it fails its memory health check and NVIDIA's guidance
    is to replace the board)."""
    refuse_pending_repair: bool = True
    """A row remapping or page retirement waiting for the next GPU reset makes the GPU
    unhealthy until the reset (NVIDIA: the faulty memory stays in use until then). A
    failed row remapping or a GPU fallen off the bus always does."""

    def __post_init__(self) -> None:
        _positive("signals.gpu_health", xid_window_s=self.xid_window_s)
        if self.ecc_uncorrected_max < 0 or self.retired_pages_max < 0:
            raise ConfigError(
                "signals.gpu_health: ecc_uncorrected_max and retired_pages_max must not be negative"
            )
        if any(not 0 <= x < 2**32 for x in self.ignored_xids):
            raise ConfigError("signals.gpu_health.ignored_xids: XIDs are 0 … 2^32-1")


@dataclass(frozen=True, slots=True, kw_only=True)
class IoSettings:
    """When a node's disks are too busy for pods marked ``stowage.io/io-heavy: "true"``
    (``coordinator/scoring/iocontention.py``). Other pods are not affected."""

    enabled: bool = True
    disk_await_ms: float = 50.0
    """A disk whose requests took longer than this on average ..."""
    disk_util_pct: float = 95.0
    """... while it had I/O in flight more than this share of the time is saturated (both
    must hold: a busy disk that still answers fast has room, and so does a slow one that
    is mostly idle). ``iostat``'s rule of thumb for a disk that serves one request at a
    time; parallel devices (NVMe) reach 100 % long before they saturate, which the await
    threshold catches."""
    io_pressure_pct: float = 40.0
    """A node whose I/O PSI ``some`` avg10 is above this (some task waited on I/O that
    share of the last ten seconds) is saturated whatever its disks say (network or remote
    storage included)."""
    spread: bool = True
    """Prioritize ranks nodes for an I/O-heavy pod by its namespace's I/O-heavy pods there
    and the node's measured I/O first, the policy's score second: such pods spread."""

    def __post_init__(self) -> None:
        _positive("signals.io", disk_await_ms=self.disk_await_ms)
        for name, value in (
            ("disk_util_pct", self.disk_util_pct),
            ("io_pressure_pct", self.io_pressure_pct),
        ):
            if not 0 < value <= 100:
                raise ConfigError(f"signals.io.{name}: expected 0 < value <= 100")


TENANCY_RULES = ("none", "exclusive", "split-training-inference")


@dataclass(frozen=True, slots=True, kw_only=True)
class TenancySettings:
    """Which tenants may share a NUMA node (``coordinator/scoring/tenancy.py``). A tenant is
    a namespace: the coordinator does not read Namespace objects, and a pod's own labels
    are its owner's to write (one could name another tenant)."""

    rule: str = "none"
    """``none``: NUMA nodes are not judged by tenant. ``exclusive``: a tenant's pods never
    share a NUMA node with another tenant's. ``split-training-inference``: training and
    inference pods of different tenants never share one."""
    training_priority_classes: list[str] = field(default_factory=list)
    """PriorityClasses whose pods are training, for ``split-training-inference``."""
    inference_priority_classes: list[str] = field(default_factory=list)
    """PriorityClasses whose pods are inference. A pod of neither class counts as both: a
    pod cannot get room by leaving its class out."""
    prefer_same_tenant: bool = True
    """Prioritize ranks first the nodes whose NUMA nodes already host the pod's tenant."""
    infrastructure_namespaces: list[str] = field(
        default_factory=lambda: ["kube-system", "stowage-system"]
    )
    """Namespaces whose pods are no tenant's (the cluster's own: kube-proxy, the CNI, this
    agent on every node) and are not judged: with them counted, every node would host a
    tenant that no other may share with."""

    def __post_init__(self) -> None:
        if self.rule not in TENANCY_RULES:
            raise ConfigError(
                f"signals.tenancy.rule: {self.rule!r} is not one of {', '.join(TENANCY_RULES)}"
            )
        both = set(self.training_priority_classes) & set(self.inference_priority_classes)
        if both:
            raise ConfigError(
                f"signals.tenancy: {sorted(both)[0]!r} is both a training and an inference class"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalSettings:
    """What live measurements may do, and how long they stay true."""

    report_ttl_s: float = 60.0
    """A node whose last report is older is *unknown*: neutral, never acted on. Six agent
    intervals, so one lost report or a slow restart does not blank a node."""
    contiguity_threshold_b: int = 512 * MIB
    """``memoryFragmentationThreshold``: a pod needing contiguous memory is filtered out of
    nodes with less free memory than this (or than it needs) in ≥ 2 MiB blocks."""
    cpu_utilization_threshold_pct: float = 95.0
    """``cpuUtilizationThreshold``: batch pods skip nodes whose real CPU use or CPU
    pressure is above this."""
    numa_alignment: bool = True
    """Pods kubelet will align to one NUMA node pass only nodes with a NUMA node able to
    hold them (kubelet would otherwise reject them after binding)."""
    gpu_topology: bool = True
    """Multi-GPU pods prefer nodes where their GPUs share NVLink."""
    true_allocatable: bool = True
    """Judge fullness against what the agent measured pods can really use."""
    gpu_health: GpuHealthSettings = field(default_factory=GpuHealthSettings)
    """Unhealthy GPUs are not offered to new GPU pods."""
    io: IoSettings = field(default_factory=IoSettings)
    """I/O-heavy pods skip nodes whose disks are saturated."""
    tenancy: TenancySettings = field(default_factory=TenancySettings)
    """Tenants kept apart per NUMA node (off by default)."""

    def __post_init__(self) -> None:
        _positive("signals", report_ttl_s=self.report_ttl_s)
        if self.contiguity_threshold_b < 0:
            raise ConfigError("signals.contiguity_threshold_b: must not be negative")
        if not 0 < self.cpu_utilization_threshold_pct <= 100:
            raise ConfigError("signals.cpu_utilization_threshold_pct: expected 0 < value <= 100")


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    max_body_b: int = 1 * MIB
    """Largest report accepted (413 above); a 110-pod 8-GPU node sends about 60 KiB."""
    auth: str = "tokenreview"
    """``tokenreview`` (the agent's projected token, verified by the API server),
    ``static`` (``static_tokens`` below, for tests and the standalone mode) or ``none``."""
    audience: str = "stowage-coordinator"
    """Audience the agents' projected tokens are issued for."""
    token_cache_ttl_s: float = 60.0
    """How long a reviewed token is trusted before asking the API server again."""
    static_tokens: dict[str, str] = field(default_factory=dict)
    """token → node name, for ``auth: static``."""
    directive_ttl_s: float = 60.0
    """Lifetime of the directives sent back; agents fall back to defaults after it."""
    max_clock_ahead_s: float = 60.0
    """Seconds a report's ``measured_at`` may lie ahead of the coordinator's wall clock
    before the report is refused (400 naming the field). Freshness never depends on it
    (it is judged by when the coordinator received the report), but a date from the
    future is a broken clock or a forged report, and would be shown as fact. A minute
    covers any NTP-kept clock with room to spare."""

    def __post_init__(self) -> None:
        if self.auth not in ("tokenreview", "static", "none"):
            raise ConfigError("ingest.auth: expected tokenreview, static or none")
        _positive(
            "ingest",
            max_body_b=self.max_body_b,
            token_cache_ttl_s=self.token_cache_ttl_s,
            directive_ttl_s=self.directive_ttl_s,
            max_clock_ahead_s=self.max_clock_ahead_s,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeSettings:
    kubeconfig: str | None = None
    """Kubeconfig file; None = in-cluster service account (or the standalone emulator)."""
    namespace: str = "stowage-system"
    """Where the Lease lives and Events are written."""
    resync_s: float = 300.0
    """Relist everything this often, on top of watching: a missed event heals within it."""
    assumed_ttl_s: float = 30.0
    """A pod the extender placed counts on its node for this long, or until the pod watch
    shows where it was bound: bursts do not pile onto one node between two watch events."""
    max_assumed_per_node: int = 64
    """Most pods assumed on one node at a time; one more evicts the node's oldest. The
    extender's callers are not authenticated, so a stream of made-up pods must not keep
    a node looking full; 64 is more than a burst of real pods lands on one node within
    ``assumed_ttl_s`` (kubelet's default ``maxPods`` is 110)."""
    max_assumed: int = 4096
    """Most pods assumed cluster-wide; one more evicts the oldest anywhere. Bounds the
    memory and the number of nodes made-up pods can touch. Real assumptions last only
    until the pod watch shows the binding (about a second), so even kube-scheduler at
    several hundred pods a second keeps far fewer at once."""

    def __post_init__(self) -> None:
        _positive(
            "kube",
            resync_s=self.resync_s,
            assumed_ttl_s=self.assumed_ttl_s,
            max_assumed_per_node=self.max_assumed_per_node,
            max_assumed=self.max_assumed,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSettings:
    enabled: bool = True
    heartbeat_s: float = 300.0
    """Re-write a node's annotations at least this often, so readers can tell "unchanged"
    from "publisher dead"."""
    change_pct: float = 5.0
    """A published percentage is re-written when it moves by more than this many points."""
    max_patches_per_s: float = 20.0
    """Cluster-wide cap on Node patches (API server load at 2,000 nodes)."""
    crane_annotations: bool = False
    """Also write crane-scheduler's load annotations (``cpu_usage_avg_5m`` …,
    ``node_hot_value``: :mod:`coordinator.consolidation.crane`) in the same damped patches."""

    def __post_init__(self) -> None:
        _positive(
            "publisher", heartbeat_s=self.heartbeat_s, max_patches_per_s=self.max_patches_per_s
        )
        if not 0 <= self.change_pct <= 100:
            raise ConfigError("publisher.change_pct: expected 0..100")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyExportSettings:
    """NodeResourceTopology objects from the agents' NUMA reports
    (:mod:`coordinator.kube.topology`), for topology-aware schedulers."""

    enabled: bool = False
    """The leader writes one ``topology.node.k8s.io/v1alpha2`` object per reporting node
    (the CRD must be installed: ``daemonset/crds/noderesourcetopologies.yaml``)."""
    change_pct: float = 5.0
    """A zone's object is re-written when its available memory moves by more than this many
    points of its capacity (any other change is written at once)."""
    max_writes_per_s: float = 5.0
    """Cluster-wide cap on the export's writes."""

    def __post_init__(self) -> None:
        _positive("topology_export", max_writes_per_s=self.max_writes_per_s)
        if not 0 <= self.change_pct <= 100:
            raise ConfigError("topology_export.change_pct: expected 0..100")


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSettings:
    """Budgets of the Kubernetes Events the leader writes (:mod:`coordinator.kube.events`),
    as client-go's event correlator sets them."""

    max_per_s: float = 5.0
    """Cluster-wide Events a second; what is held back is counted and dropped, not queued."""
    burst: int = 25
    """Events that may go out at once after a quiet spell."""
    per_object_burst: int = 25
    """Events one object (a Node, a pod) may get at once, client-go's spam-filter burst ..."""
    per_object_refill_s: float = 30.0
    """... and one more after each this many seconds (client-go: 300 s; shorter here so a
    throttle that changes every half minute is still told)."""
    dedupe_s: float = 600.0
    """The same reason and message on the same object within this is written once (client-go
    aggregates repeats within ten minutes)."""

    def __post_init__(self) -> None:
        _positive(
            "events",
            max_per_s=self.max_per_s,
            burst=self.burst,
            per_object_burst=self.per_object_burst,
            per_object_refill_s=self.per_object_refill_s,
            dedupe_s=self.dedupe_s,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ColocationPool:
    """One node pool's best-effort CPU throttle (:mod:`coordinator.colocation.controller`).

    Pressure is the latency-sensitive (LS) pods' own CPU stall: the largest ``cpu.pressure``
    "some avg10" among them where the kernel keeps per-cgroup PSI, else the node's. The
    seed's recipe "limit BE when PSI exceeds 0.3" is read as a fraction of time stalled:
    some avg10 ≥ 30 %. Katalyst's default (15 %) reacts earlier at the cost of throttling
    batch work more often; set ``pressure_high_pct: 15`` for it."""

    name: str = "default"
    """Shown in ``/debug/colocation`` and the reason strings."""
    selector: dict[str, str] = field(default_factory=dict)
    """Node labels that must all match (``{}``: every node). The first pool whose selector
    matches a node is that node's pool; nodes no pool matches use ``colocation.default``."""
    enabled: bool = True
    """False: the pool's best-effort pods are never throttled (directives say None)."""
    pressure_high_pct: float = 30.0
    """LS stall share (some avg10, %) at or above which BE is tightened ..."""
    tighten_after_s: float = 10.0
    """... once it has held that long without a break (a single spike does nothing)."""
    tighten_factor: float = 0.5
    """Each tightening multiplies the BE quota by this (never below the floor); the first
    starts from the BE pods' measured use. Sustained pressure tightens again after another
    ``tighten_after_s``."""
    pressure_low_pct: float = 10.0
    """LS stall share at or below which BE is relaxed ..."""
    relax_after_s: float = 30.0
    """... once it has held that long; between low and high the quota holds (hysteresis)."""
    relax_step_pct: float = 10.0
    """Each relaxation adds this share of the node's allocatable CPU; a quota reaching
    allocatable is released (None). From the floor to released: about ten steps."""
    floor_pct: float = 10.0
    """BE never gets less than this share of the node's allocatable CPU ..."""
    floor_min_m: int = 500
    """... nor less than this many millicores: batch pods starve, they are never stopped."""
    usage_threshold_pct: float = 65.0
    """Where the node keeps no PSI at all: Koordinator's usage watermark (its
    ``cpuSuppressThresholdPercent`` default). BE quota = allocatable × this − LS use,
    applied after ``tighten_after_s`` above it ..."""
    usage_band_pct: float = 10.0
    """... and relaxed after ``relax_after_s`` below it by this many points."""
    reclaim_margin_pct: float = 10.0
    """Reclaimable batch capacity published = allocatable − LS use − this share of
    allocatable (Koordinator's batch resources keep a margin the same way)."""
    local: bool = True
    """Let agents tighten alone between two reports (``Directives.local``), where per-pod
    PSI exists; False: only the coordinator's decisions apply."""
    local_window_s: float = 1.0
    """Window the agent measures LS stall over."""
    local_hold_s: float = 20.0
    """How long an agent's own tightening lasts unless the coordinator confirms it: two
    report intervals, so a tightening the coordinator does not share ends soon."""

    def __post_init__(self) -> None:
        where = f"colocation.pools[{self.name}]"
        _positive(
            where,
            tighten_after_s=self.tighten_after_s,
            relax_after_s=self.relax_after_s,
            relax_step_pct=self.relax_step_pct,
            floor_min_m=self.floor_min_m,
            local_window_s=self.local_window_s,
            local_hold_s=self.local_hold_s,
        )
        if not 0 <= self.pressure_low_pct < self.pressure_high_pct <= 100:
            raise ConfigError(f"{where}: need 0 <= pressure_low_pct < pressure_high_pct <= 100")
        if not 0 < self.tighten_factor < 1:
            raise ConfigError(f"{where}.tighten_factor: expected 0 < value < 1")
        for key in ("floor_pct", "usage_threshold_pct", "usage_band_pct", "reclaim_margin_pct"):
            if not 0 <= getattr(self, key) <= 100:
                raise ConfigError(f"{where}.{key}: expected 0..100")


@dataclass(frozen=True, slots=True, kw_only=True)
class ColocationSettings:
    """Which pods are best-effort (BE) and how each node pool throttles them."""

    enabled: bool = True
    """False: every directive says "no throttle"; nothing else changes."""
    qos_label: str = "stowage.io/qos"
    """Pod label naming a pod ``BE`` or ``LS`` outright (``koordinator.sh/qosClass`` is
    honoured too); without one, QoS class BestEffort is BE and every other pod LS."""
    pools: tuple[ColocationPool, ...] = ()
    """Node pools by label selector; the first match wins."""
    default: ColocationPool = field(default_factory=ColocationPool)
    """The pool of nodes no selector matches."""

    def pool_of(self, labels: dict[str, str]) -> ColocationPool:
        """The pool of a node with these labels."""
        for pool in self.pools:
            if all(labels.get(k) == v for k, v in pool.selector.items()):
                return pool
        return self.default


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderSettings:
    lease_name: str = "stowage-coordinator"
    lease_duration_s: float = 15.0
    """Leader election timings as kube-scheduler's defaults (15 s / 10 s / 2 s)."""
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        _positive(
            "leader",
            lease_duration_s=self.lease_duration_s,
            renew_deadline_s=self.renew_deadline_s,
            retry_period_s=self.retry_period_s,
        )
        if self.lease_duration_s < 1:
            raise ConfigError("leader.lease_duration_s: at least 1 (a Lease counts whole seconds)")
        if not self.lease_duration_s > self.renew_deadline_s > self.retry_period_s * 1.2:
            raise ConfigError(
                "leader: need lease_duration_s > renew_deadline_s > 1.2 × retry_period_s"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionSettings:
    """Acting on eviction plans (preemption for pending pods, memory-pressure relief):
    dry run until ``enabled``, and every round within caps, a rate and a cooldown."""

    enabled: bool = False
    """Really evict. Off, every eviction is sent with ``dryRun=All``: the API server runs
    every check (PodDisruptionBudgets included) and changes nothing, and Events, metrics
    and ``/debug/evictions`` show what would have happened."""
    cycle_s: float = 10.0
    """How often the leader looks for pods to preempt for and nodes under pressure: one
    agent report interval, since pressure changes no faster than reports arrive."""
    cooldown_s: float = 300.0
    """One round per queue (its PodGroup's Volcano queue, else its namespace; a node
    for pressure) per this long, as in the seed; also how long a victim's replacement
    (same owner) is spared being evicted again for the same reason (the descheduler's
    eviction loop)."""
    max_per_cycle: int = 10
    """Most evictions in one cycle, cluster-wide (the seed's incident evicted 12 at once)."""
    max_per_node_per_cycle: int = 4
    """Most evictions from one node in one cycle."""
    max_per_namespace_per_cycle: int = 5
    """Most evictions from one namespace in one cycle."""
    max_evictions_per_s: float = 0.5
    """Sustained eviction rate cluster-wide (token bucket) ..."""
    eviction_burst: int = 10
    """... with at most this many saved up."""
    approval_ttl_s: float = 900.0
    """A plan awaiting approval (published on the pending pod; approved by an approval
    ConfigMap in ``kube.namespace``, ``coordinator/kube/approvals.py``) expires this long
    after it was published; a later cycle may propose a new one. Fifteen minutes: time for
    a person to be paged and look, short enough that the cluster has not moved on."""
    approval_webhook: str = ""
    """An HTTP(S) URL that each plan awaiting approval is also POSTed to, once, signed
    (``coordinator/eviction/webhook.py``), for a chat bot to approve or deny by a signed
    callback; empty (the default): none."""
    approval_webhook_secret_file: str = ""
    """File holding the webhook's shared HMAC secret (a mounted Secret, 16 bytes or more),
    read at start; required with ``approval_webhook``."""
    approval_callback_url: str = ""
    """Where the endpoint reaches the coordinator's ``/approvals/`` (the plan id is
    appended), e.g. ``https://stowage.stowage-system.svc:8443/approvals``; required with
    ``approval_webhook``."""
    pressure_full_avg10_pct: float = 10.0
    """A node whose memory PSI ``full`` avg10 (share of time every task stalled on memory)
    is at or above this ..."""
    pressure_for_s: float = 30.0
    """... in every fresh report for this long (from the first such report to one received
    at least this long after it: a single report never suffices) gets a pressure plan.
    Three times the colocation controller's 10 s tightening window: the BE CPU throttle
    has acted by then, so pressure that persists is pressure throttling did not relieve."""
    level_label: str = "stowage.io/priority-level"
    """Label (or annotation) naming a lower level for a pod (``low``, ``medium``, ``high``,
    ``critical``) than its priority gives: the pod's owner writes it, so it may only lower
    the level, never raise it (a priority-0 pod labelled ``critical`` stays low)."""
    level_min_priority: dict[str, int] = field(
        default_factory=lambda: {"critical": 1_000_000_000, "high": 10_000, "medium": 1_000}
    )
    """The least priority of each level above ``low``, judged by the pod's
    ``spec.priority``: what admission resolved from its PriorityClass (cluster-scoped,
    operators' objects; the Priority admission plugin refuses a pod that sets another
    value). The default puts
    ``system-cluster-critical`` and ``system-node-critical`` (2,000,000,000 and more) at
    critical and pods without a PriorityClass (priority 0) at low."""
    min_level_gap: int = 2
    """A pod may displace only pods at least this many levels below its own: with 2, a
    critical pod displaces medium and low ones, a high one low ones, the others none."""
    unknown_work_s: float = 86_400.0
    """Work a victim is taken to lose when neither a checkpoint nor its start time is
    known: a day, so a pod whose progress nobody can vouch for is picked last."""
    approval_weight_above: int = 50
    """Plans for a queue whose weight is above this wait for a person's approval
    (``kubectl stowage approve NS/POD``); nothing on the pod approves one."""
    queue_weights: dict[str, int] = field(default_factory=dict)
    """Weight of each queue for the approval rule; 0 for queues not listed. A pod's queue is
    the ``spec.queue`` of its Volcano PodGroup, else its namespace, never a queue the pod
    names itself; while its PodGroup is not known, the strictest queue of its namespace
    (see ``coordinator/eviction/answers.py: queue_of``)."""
    checkpointing_max_s: float = 300.0
    """A pod annotated ``stowage.io/checkpointing: "true"`` is no victim for this long from
    when the coordinator first saw the claim, or from when it last saw the pod's last
    checkpoint move, whichever is later; a claim whose last checkpoint has stood still
    this long no longer shields it (its owner writes the annotation). Five minutes: a
    node's shard of a large model's checkpoint (tens of GiB at about 1 GiB/s) takes a
    minute or two to write."""
    plan_deadline_s: float = 0.5
    """Longest one plan's search for the minimal set may take (the coordinator's monotonic
    clock). The search weighs every pod that could help, with no cap on how many; it is
    exponential in them, so past the deadline it stops with the cheapest plan found so
    far, and the plan says it was cut (``/debug``, the Event)."""
    cycle_budget_s: float = 5.0
    """Longest the planning of one eviction cycle may take, all its plans together; the
    pending pods not planned by then are planned first in the next cycle."""
    preempt_deadline_s: float = 0.05
    """Longest the ``/scheduler/preempt`` verb's search may take: kube-scheduler waits for
    the answer within its extender ``httpTimeout`` (100 ms as shipped). Past it a node
    without a set found yet is dropped."""
    nomination_ttl_s: float = 120.0
    """How long the room a carried-out preemption freed stays held for its preemptor
    (:mod:`coordinator.live.nominations`), unless it binds first: its victims' grace
    period (30 s by default) plus time for kube-scheduler to retry it, with room to spare."""
    reservation_ttl_s: float = 120.0
    """How long a moved pod's new home (a migration's or a drain's destination) stays
    reserved for its replacement (:mod:`coordinator.live.nominations`), unless it binds
    first or the plan is dropped: the controller recreates the pod at once, so this is
    kube-scheduler's retries with room to spare."""

    def __post_init__(self) -> None:
        _positive(
            "evictions",
            cycle_s=self.cycle_s,
            cooldown_s=self.cooldown_s,
            max_evictions_per_s=self.max_evictions_per_s,
            approval_ttl_s=self.approval_ttl_s,
            pressure_for_s=self.pressure_for_s,
        )
        for name in (
            "max_per_cycle",
            "max_per_node_per_cycle",
            "max_per_namespace_per_cycle",
            "eviction_burst",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"evictions.{name}: must be at least 1")
        if not 0 < self.pressure_full_avg10_pct <= 100:
            raise ConfigError("evictions.pressure_full_avg10_pct: expected 0 < value <= 100")
        _positive(
            "evictions",
            unknown_work_s=self.unknown_work_s,
            plan_deadline_s=self.plan_deadline_s,
            cycle_budget_s=self.cycle_budget_s,
            preempt_deadline_s=self.preempt_deadline_s,
            nomination_ttl_s=self.nomination_ttl_s,
            reservation_ttl_s=self.reservation_ttl_s,
            checkpointing_max_s=self.checkpointing_max_s,
        )
        if not 1 <= self.min_level_gap <= 3:
            raise ConfigError("evictions.min_level_gap: expected 1..3")
        if self.approval_webhook:
            for name in ("approval_webhook", "approval_callback_url"):
                if not getattr(self, name).startswith(("http://", "https://")):
                    raise ConfigError(f"evictions.{name}: expected an http(s) URL")
            if not self.approval_webhook_secret_file:
                raise ConfigError(
                    "evictions.approval_webhook_secret_file: required with approval_webhook"
                )
        unknown = self.level_min_priority.keys() - {"critical", "high", "medium"}
        if unknown:
            raise ConfigError(
                f"evictions.level_min_priority: unknown level {sorted(unknown)[0]!r}"
                " (expected critical, high, medium)"
            )
        floors = [self.level_min_priority.get(k) for k in ("medium", "high", "critical")]
        given = [f for f in floors if f is not None]
        if given != sorted(given):
            raise ConfigError("evictions.level_min_priority: expected medium <= high <= critical")


def _check_address(key: str, value: str) -> None:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"{key}: {value!r} is not HOST:PORT")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The HTTP listeners: bounds on slow and numerous clients, TLS, and where the
    kube-scheduler extender is served (``common/listener.py`` says why each bound)."""

    read_timeout_s: float = 10.0
    """Longest time to receive a request's headers and body, from the connection's accept
    or the request's first byte: a client trickling bytes is cut off then, however
    steadily it trickles. A 1 MiB report takes milliseconds on a cluster network."""
    keepalive_timeout_s: float = 120.0
    """An idle kept-alive connection is closed after this; longer than the agents' (15 s)
    and kube-scheduler's (90 s) own client keep-alive, so that they close first."""
    max_connections: int = 4096
    """Most connections open at once on each listener; more wait in the accept queue.
    Every agent keeps one open to every replica: two per node of a 2,000-node cluster.
    The open-file limit is raised to fit it (or the cap lowered, with a warning)."""
    ready_max_loop_lag_s: float = 0.5
    """``/readyz`` fails while the event loop runs this many seconds behind
    (``coordinator/looplag.py``): kube-scheduler's calls to a lagging replica would wait
    their ``httpTimeout`` (100 ms as shipped), so the Service should send them to another
    replica instead. Healthy, the loop is a few milliseconds behind at most."""
    extender_listen: str | None = None
    """``HOST:PORT`` of a second listener for the kube-scheduler extender
    (``/scheduler/*``), which then leaves the main one; with ``tls_client_ca_file`` it
    takes only callers with a client certificate (mutual TLS), while agents keep
    reporting to the main listener with their tokens."""
    debug_listen: str | None = "127.0.0.1:8081"
    """``HOST:PORT`` of the listener for ``/debug/*`` and the ``/ui`` node map (never on
    the main listener: they name pods, priorities and plans in every namespace). On
    localhost by default, reached with ``kubectl port-forward`` — the caller's own
    Kubernetes credentials and RBAC (``pods/portforward``) stand in front of it. Port 0
    picks a free one; null serves neither."""
    tls_cert_file: str | None = None
    """PEM certificate (chain) served over TLS, with ``tls_key_file``: on the extender
    listener when there is one (the main listener stays plain HTTP: agents reach each
    replica by pod IP and prove who they are with their tokens), else on the main one
    (agents then need the CA in their ``reporter.ca_file``)."""
    tls_key_file: str | None = None
    """PEM private key of ``tls_cert_file``."""
    tls_client_ca_file: str | None = None
    """PEM CA bundle: the extender listener requires a client certificate it signed
    (kube-scheduler's ``tlsConfig.certFile``/``keyFile``). Needs ``extender_listen``
    and the server certificate."""

    def __post_init__(self) -> None:
        _positive(
            "server",
            read_timeout_s=self.read_timeout_s,
            keepalive_timeout_s=self.keepalive_timeout_s,
            max_connections=self.max_connections,
            ready_max_loop_lag_s=self.ready_max_loop_lag_s,
        )
        if self.extender_listen is not None:
            _check_address("server.extender_listen", self.extender_listen)
        if self.debug_listen is not None:
            _check_address("server.debug_listen", self.debug_listen)
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigError("server.tls_cert_file and server.tls_key_file go together")
        if self.tls_client_ca_file is not None and (
            self.extender_listen is None or self.tls_cert_file is None
        ):
            raise ConfigError(
                "server.tls_client_ca_file: needs server.extender_listen and"
                " server.tls_cert_file (client certificates are asked on the extender"
                " listener; agents report to the main one with their tokens)"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtenderSettings:
    """How the kube-scheduler extender answers (``coordinator/extender/picking.py``)."""

    pick_in_filter: bool = True
    """Filter answers only the node Stowage ranks first, when nothing but Stowage's own
    score would tell the feasible nodes apart: the pod asks for no soft placement
    (preferred affinities, ``ScheduleAnyway`` spreading, a controller's default spreading)
    and no offered node has a ``PreferNoSchedule`` taint. kube-scheduler then binds there
    without scoring, so a pod costs one call instead of two. The node is the one
    prioritize would have scored 10, which at the shipped weight 20 outweighs what the
    plugins' scores tell such nodes apart by; false always leaves the choice to
    kube-scheduler's scoring, Stowage's prioritize included."""
    max_nodes_per_request: int = 15_000
    """Most nodes one scheduler call may offer (names or Node objects); a longer list is
    answered 400. Measured on 2 cores (``python -m hack.bench.prioritize``), server CPU
    of a warm call at 5,000 / 15,000 / 65,000 nodes: filter 2.0 / 4.3 / 19 ms,
    prioritize 1.0 / 2.1 / 7 ms, inside the shipped 100 ms ``httpTimeout``; the first
    call with a new list of 65,000 names took 125 ms (it times out once and the scheduler
    goes on without us: the extender is ``ignorable``). At most 100,000."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_nodes_per_request <= 100_000:
            raise ConfigError("extender.max_nodes_per_request: expected 1..100000")


@dataclass(frozen=True, slots=True, kw_only=True)
class PatrolSettings:
    """The utilisation patrol (:mod:`coordinator.consolidation`): which nodes stayed under
    ``threshold_pct`` for a window, marked on the Node (``stowage.io/consolidate``, an Event,
    a metric) by the leader. Marking is advisory; the leader may also cordon candidates
    (``cordon``: disabled by default, ``dry-run`` tells what it would do), never drains."""

    enabled: bool = True
    threshold_pct: float = 70.0
    """A node whose mean utilisation over a window is below this is a candidate."""
    window: str = "1h"
    """The shortest window that marks a node (5m, 1h or 1d); longer ones mark too, and the
    mark names the longest."""
    min_coverage: float = 0.9
    """Share of a window's buckets that must hold samples before it judges a node: a node
    watched for less (just joined, agent silent, this replica just started) is not marked."""
    max_patches_per_s: float = 2.0
    """Cluster-wide cap on the patrol's Node patches, beside the publisher's own."""
    cordon: str = "disabled"
    """Cordon marked candidates: ``disabled``, ``dry-run`` (logs and a
    ``ConsolidationWouldCordon`` Event, no patch) or ``enabled``; cordons the patrol put
    are lifted when a node no longer qualifies or this is not ``enabled``. (Words YAML
    does not read as booleans, as it would ``off`` and ``on``.)"""
    max_cordoned: int = 1
    """At most this many nodes cordoned by the patrol at once."""

    def __post_init__(self) -> None:
        _positive("patrol", max_patches_per_s=self.max_patches_per_s)
        if self.cordon not in ("disabled", "dry-run", "enabled"):
            raise ConfigError(
                f"patrol.cordon: expected disabled, dry-run or enabled, got {self.cordon!r}"
            )
        if not 1 <= self.max_cordoned <= 10_000:
            raise ConfigError("patrol.max_cordoned: expected 1..10000")
        if not 0 < self.threshold_pct <= 100:
            raise ConfigError("patrol.threshold_pct: expected more than 0, up to 100")
        if self.window not in ("5m", "1h", "1d"):
            raise ConfigError(f"patrol.window: expected 5m, 1h or 1d, got {self.window!r}")
        if not 0 < self.min_coverage <= 1:
            raise ConfigError("patrol.min_coverage: expected more than 0, up to 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class DefragSettings:
    """GPU defragmentation by migration (:mod:`coordinator.consolidation.defrag`): a
    pending multi-GPU pod that fits nowhere, not even by preemption, gets room made by
    moving a few smaller GPU pods to other nodes, evicted through the eviction executor
    (dry run until ``evictions.enabled``) only when ``enabled``."""

    enabled: bool = False
    """The leader's eviction cycle plans migrations for pending pods preemption cannot
    place (or would evict more pods for) and hands them to the executor. Off, a
    migration is only shown (``stowage plan --defrag``)."""
    min_gpus: int = 2
    """The fewest GPUs a pending pod requests for a migration to be planned for it
    (1..64)."""
    max_moves: int = 4
    """At most this many pods moved for one pending pod, gang members dragged along
    included (1..8); the executor's caps per cycle bound it besides."""
    max_level: str = "medium"
    """The highest priority level a migration moves (``low``, ``medium``, ``high``), and
    never above the pending pod's own level."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_gpus <= 64:
            raise ConfigError("defrag.min_gpus: expected 1..64")
        if not 1 <= self.max_moves <= 8:
            raise ConfigError("defrag.max_moves: expected 1..8")
        if self.max_level not in ("low", "medium", "high"):
            raise ConfigError(
                f"defrag.max_level: expected low, medium or high, got {self.max_level!r}"
            )


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
"""The weekday names a drain budget's ``days`` may list, Monday first (UTC)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DrainBudget:
    """How many nodes of a node group may be draining at once, always or within a weekly
    time window (UTC). Karpenter's disruption budget with a window in words instead of a
    cron line: ``{nodes: "0", days: [mon, tue, wed, thu, fri], start: "09:00",
    duration_h: 8}`` keeps working hours free of drains."""

    nodes: str = "10%"
    """A count (``"2"``) or a share of the group's nodes (``"10%"``, rounded up)."""
    days: tuple[str, ...] = ()
    """The weekdays the window opens on (``mon`` … ``sun``); empty: every day."""
    start: str | None = None
    """When the window opens, ``HH:MM`` UTC; None: the budget always holds."""
    duration_h: float | None = None
    """How long the window stays open after ``start`` (more than 0, at most a week)."""

    def __post_init__(self) -> None:
        where = "drain budget"
        text = self.nodes.strip()
        number = text[:-1] if text.endswith("%") else text
        if not (number.isascii() and number.isdecimal() and len(number) <= 6):
            raise ConfigError(f"{where}: nodes: expected a count or a share like 10%, got {text!r}")
        if text.endswith("%") and int(number) > 100:
            raise ConfigError(f"{where}: nodes: a share is at most 100%, got {text!r}")
        unknown = [d for d in self.days if d not in DAYS]
        if unknown:
            raise ConfigError(f"{where}: days: expected {', '.join(DAYS)}, got {unknown[0]!r}")
        if (self.start is None) != (self.duration_h is None):
            raise ConfigError(f"{where}: start and duration_h go together")
        if self.start is not None:
            hh, _, mm = self.start.partition(":")
            if not (
                len(hh) == 2 == len(mm) and hh.isdecimal() and mm.isdecimal()
                and int(hh) < 24 and int(mm) < 60
            ):  # fmt: skip
                raise ConfigError(f"{where}: start: expected HH:MM (UTC), got {self.start!r}")
        elif self.days:
            raise ConfigError(f"{where}: days need a start and duration_h")
        if self.duration_h is not None and not 0 < self.duration_h <= 168:
            raise ConfigError(f"{where}: duration_h: expected more than 0, up to 168")


@dataclass(frozen=True, slots=True, kw_only=True)
class DrainSettings:
    """Drain plans (:mod:`coordinator.consolidation.drain`): which of the patrol's
    candidates can be emptied, every pod moved under every eviction rule; the leader acts
    on them through the eviction executor (dry run until ``evictions.enabled``) only
    when ``enabled``."""

    enabled: bool = False
    """The leader plans drains every eviction cycle and hands them to the executor,
    tainting each node ``stowage.io/disrupted:NoSchedule`` before its pods move. Off, the
    plan is only shown (``stowage plan --consolidate``)."""
    max_draining: int = 1
    """At most this many nodes draining at once, cluster-wide (1..1000)."""
    max_level: str = "medium"
    """The highest priority level a drain moves (``low``, ``medium``, ``high``); a node
    holding a pod above it is not drainable."""
    group_label: str = "karpenter.sh/nodepool"
    """The Node label naming its node group; nodes without it form one group, ``""``."""
    budgets: tuple[DrainBudget, ...] = (DrainBudget(),)
    """Every group's budgets: the most restrictive of those holding now applies; none
    holding, only ``max_draining`` limits."""
    group_budgets: dict[str, tuple[DrainBudget, ...]] = field(default_factory=dict)
    """Group → its own budgets, instead of ``budgets``."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_draining <= 1000:
            raise ConfigError("drain.max_draining: expected 1..1000")
        if self.max_level not in ("low", "medium", "high"):
            raise ConfigError(
                f"drain.max_level: expected low, medium or high, got {self.max_level!r}"
            )


GROUP_LABELS = (
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
)
"""The Node labels the cluster autoscalers put on the nodes of a group, in the order
looked for: Karpenter's NodePool, EKS managed node groups, GKE node pools, AKS agent
pools."""


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaintSetting:
    """One taint a node group's new nodes come up with."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupTemplate:
    """What a new node of a group would look like, for a group that may have no node
    left (scale from zero): the cluster autoscaler's node-template tags of a cloud group,
    a Karpenter NodePool's labels, taints and the instance type's allocatable."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[TaintSetting, ...] = ()
    allocatable: dict[str, str | int] = field(default_factory=dict)
    """Resource → quantity as the Node's ``status.allocatable`` would say it
    (``cpu: 63``, ``memory: 480Gi``, ``nvidia.com/gpu: 8``, ``pods: 110``)."""

    def check(self, where: str) -> None:
        """Refuse what no node could say; the messages name ``where``."""
        if not self.allocatable:
            raise ConfigError(f"{where}.allocatable: expected the resources a new node offers")
        for resource, text in self.allocatable.items():
            try:
                quantity.parse_value(str(text))
            except QuantityError as e:
                raise ConfigError(f"{where}.allocatable.{resource}: {e}") from None
        for i, taint in enumerate(self.taints):
            if not taint.key or taint.effect not in TAINT_EFFECTS:
                raise ConfigError(
                    f"{where}.taints[{i}]: expected a key and an effect of"
                    f" {', '.join(TAINT_EFFECTS)}"
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoscaleSettings:
    """Autoscaling hints (:mod:`coordinator.autoscale`): per queue, the room it lacks
    and the node group and count to add, told by the leader as an Event, as metrics
    and, on a Volcano Queue, an annotation. Hints only: nothing here adds, removes or
    changes a node."""

    enabled: bool = True
    """Work the hints out on every replica (``/debug/hints``, the metrics) and tell them
    on the queues from the leader."""
    interval_s: float = 60.0
    """How often the hints are worked out (a cluster autoscaler scans every 10 s; a
    hint that changes faster than a node boots helps nobody)."""
    group_labels: tuple[str, ...] = GROUP_LABELS
    """The Node labels naming a node's group, the first a node carries winning. Add
    ``node.kubernetes.io/instance-type`` only where each instance type is a group of
    its own: every node carries it."""
    reserve_jobs: int = 2
    """A queue should have room for this many standard jobs beyond its pending work
    (the design's "less room than two standard jobs: scale")."""
    max_nodes: int = 50
    """At most this many nodes in one hint (1..10000): the work of one namespace's pods
    must not ask for a fleet, however much they request."""
    templates: dict[str, GroupTemplate] = field(default_factory=dict)
    """Node groups that may have no node left, by name (``karpenter.sh/nodepool:gpu-h100``:
    one of ``group_labels``, a colon, its value), with what a new node of each looks like.
    A group with nodes is judged by its nodes, as the cluster autoscaler judges it; its
    template here is used only once it has none."""
    max_patches_per_s: float = 1.0
    """Cluster-wide cap on what tells the hints: annotation patches (Volcano Queues only),
    the Events that alone tell a namespace queue's hint, and deadlock Events. A round
    may spend what its ``interval_s`` earned, so every queue due is told in one round."""

    def __post_init__(self) -> None:
        _positive("autoscale", interval_s=self.interval_s, max_patches_per_s=self.max_patches_per_s)
        if not self.group_labels or any(not k or "=" in k for k in self.group_labels):
            raise ConfigError("autoscale.group_labels: expected one or more label keys")
        if not 0 <= self.reserve_jobs <= 100:
            raise ConfigError("autoscale.reserve_jobs: expected 0..100")
        if not 1 <= self.max_nodes <= 10_000:
            raise ConfigError("autoscale.max_nodes: expected 1..10000")
        for name, template in self.templates.items():
            key, colon, value = name.partition(":")
            if key not in self.group_labels or not colon or not value:
                raise ConfigError(
                    f"autoscale.templates: {name!r} is not <group label>:<value>"
                    f" with a label of autoscale.group_labels"
                )
            template.check(f"autoscale.templates.{name}")


TOPOLOGY_KEYS: Final = (
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
)
"""The node labels that name network domains, widest first, as Kueue's Topology levels
list them: GKE's block and subblock (Kueue's topology-aware scheduling example) and EKS's
network node layers (layer 1 the farthest from the instance, 3 the nearest). Zones and
regions are too wide to tell a rack from the next."""


MAX_TOPOLOGY_KEYS: Final = 8
"""Most label levels: every level is a pass over every node per gang member's call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GangSettings:
    """Members of one gang prefer one topology domain (``coordinator/scoring/ganglocality.py``)."""

    enabled: bool = True
    """Only pods of a gang are affected, and only in how their own candidate nodes rank."""
    weight: float = 2.0
    """What the narrowest level's worth (0 … 1; each wider level weighs four times more)
    is worth against the policy's scores scaled onto 0 … 1: at 2 a member already on a
    node or in a rack, and room there for the whole rest, outweigh the policy."""
    topology_keys: tuple[str, ...] = TOPOLOGY_KEYS
    """Node labels naming topology domains (rack, switch, block), widest first; the node
    and, for GPU pods, its NVLink islands are the narrower levels after them."""

    def __post_init__(self) -> None:
        if not 0 <= self.weight <= 1000 or self.weight != self.weight:
            raise ConfigError("gang.weight: expected 0 … 1000")
        if len(self.topology_keys) > MAX_TOPOLOGY_KEYS:
            raise ConfigError(f"gang.topology_keys: at most {MAX_TOPOLOGY_KEYS} levels")
        if len(set(self.topology_keys)) != len(self.topology_keys) or not all(self.topology_keys):
            raise ConfigError("gang.topology_keys: label keys, each once, none empty")


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorSettings:
    listen: str = "0.0.0.0:8080"
    policy: PolicySettings = field(default_factory=PolicySettings)
    signals: SignalSettings = field(default_factory=SignalSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    publisher: PublisherSettings = field(default_factory=PublisherSettings)
    topology_export: TopologyExportSettings = field(default_factory=TopologyExportSettings)
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    events: EventSettings = field(default_factory=EventSettings)
    colocation: ColocationSettings = field(default_factory=ColocationSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    evictions: EvictionSettings = field(default_factory=EvictionSettings)
    defrag: DefragSettings = field(default_factory=DefragSettings)
    extender: ExtenderSettings = field(default_factory=ExtenderSettings)
    patrol: PatrolSettings = field(default_factory=PatrolSettings)
    drain: DrainSettings = field(default_factory=DrainSettings)
    autoscale: AutoscaleSettings = field(default_factory=AutoscaleSettings)
    gang: GangSettings = field(default_factory=GangSettings)

    def __post_init__(self) -> None:
        _check_address("listen", self.listen)
