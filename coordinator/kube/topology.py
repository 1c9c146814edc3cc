"""NUMA topology from the agents' reports as NodeResourceTopology objects
(``topology.node.k8s.io/v1alpha2``, the CRD of k8stopologyawareschedwg), which
topology-aware schedulers read: scheduler-plugins' ``NodeResourceTopologyMatch``,
Koordinator. Off by default (``topology_export.enabled``); written by the leader only.

One object per Node, cluster-scoped, named after it::

    attributes: [{name: topologyManagerPolicy, value: single-numa-node},
                 {name: topologyManagerScope, value: container}]
    topologyPolicies: [SingleNUMANodeContainerLevel]
    zones:
    - name: node-0
      type: Node
      costs: [{name: node-0, value: 10}, {name: node-1, value: 21}]
      resources:
      - {name: cpu, capacity: "112", allocatable: "110", available: "110"}
      - {name: memory, capacity: "1099511627776", allocatable: "…", available: "…"}

* **Zones** are the report's NUMA nodes (sysfs), named ``node-<id>`` as the
  resource-topology-exporter names them. ``costs`` are the SLIT distances, where the
  report has one per zone.
* **cpu**: capacity is the NUMA node's CPUs; allocatable leaves out those of kubelet's
  ``reservedSystemCPUs`` on it; available is allocatable — Stowage does not see which
  CPUs the CPU manager has handed out exclusively, so it does not subtract them.
* **memory**: capacity and allocatable are the NUMA node's memory; available is what the
  kernel says is available there now (``MemAvailable`` of the node's meminfo), measured
  rather than allocated.
* ``topologyPolicies`` (deprecated in v1alpha2, still read) and the ``attributes``
  come from the kubelet configuration the agent read; both are left out where unknown.

**Damped**: a node's object is written when anything but its measured memory changed, or
a zone's available memory moved by more than ``topology_export.change_pct`` points of its
capacity; writes are rate-limited cluster-wide and each passes the lease's fence. A node
with no fresh report keeps its last object.

**Only its own objects.** An object carrying :data:`MANAGED_BY` ``stowage`` is Stowage's;
one without (written by the resource-topology-exporter or NFD's topology updater) is
left alone, and that node is not exported. A node that leaves the cluster has Stowage's
object deleted. A new term reads each object once before its first write.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from coordinator.config import TopologyExportSettings
from coordinator.kube.client import KubeError, translate
from coordinator.kube.leader import Fence, LeaseLost
from coordinator.kube.publisher import HOLD_CAP_S, HOLD_S, NODE_BACKOFF_CAP_S, is_server_trouble
from coordinator.live import LiveCluster
from coordinator.ratelimit import TokenBucket
from coordinator.state.signals import NodeSignals, NumaZone

log = logging.getLogger(__name__)

API_VERSION: Final = "topology.node.k8s.io/v1alpha2"
KIND: Final = "NodeResourceTopology"
MANAGED_BY: Final = "app.kubernetes.io/managed-by"
TICK_S: Final = 1.0
TIMEOUT_S: Final = 10.0
_POLICIES: Final = {
    "single-numa-node": "SingleNUMANode",
    "restricted": "Restricted",
    "best-effort": "BestEffort",
}
"""kubelet's topology manager policies and the CRD's ``TopologyManagerPolicy`` names."""
MAX_RANGES: Final = 4096
"""Most ranges a CPU list is read with (the schema bounds its text at far fewer bytes a
range): past it the list counts as unreadable."""


@dataclass(frozen=True, slots=True)
class Export:
    """One node's object, and what damping compares."""

    body: dict[str, Any]
    fixed: Any
    """Everything but the measured memory: any change of it is due."""
    available_pct: tuple[float, ...]
    """Each zone's available memory, percent of its capacity."""


def export_of(name: str, signals: NodeSignals) -> Export | None:
    """Node ``name``'s object from its signals; None without NUMA data."""
    if not signals.numa:
        return None
    reserved = cpu_ranges(signals.reserved_cpus) if signals.reserved_cpus else []
    ids = [z.node for z in signals.numa]
    zones = [_zone(z, ids, reserved) for z in signals.numa]
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "labels": {MANAGED_BY: "stowage"}},
        "zones": zones,
    }
    policy = signals.topology_policy
    if policy:
        scope = signals.topology_scope or "container"  # kubelet's default scope
        body["attributes"] = [
            {"name": "topologyManagerPolicy", "value": policy},
            {"name": "topologyManagerScope", "value": scope},
        ]
        named = _POLICIES.get(policy)
        if named is not None:
            level = "PodLevel" if scope == "pod" else "ContainerLevel"
            body["topologyPolicies"] = [named + level]
        elif policy == "none":
            body["topologyPolicies"] = ["None"]
    fixed = (
        tuple((z["name"], repr(z["costs"]), z["resources"][0]) for z in zones),
        tuple(z.mem_total_b for z in signals.numa),
        repr(body.get("attributes")),
        repr(body.get("topologyPolicies")),
    )
    available = tuple(
        0.0 if z.mem_total_b <= 0 else 100.0 * min(z.mem_available_b, z.mem_total_b) / z.mem_total_b
        for z in signals.numa
    )
    return Export(body, fixed, available)


def _zone(
    zone: NumaZone, ids: Sequence[int], reserved: list[tuple[int, int]] | None
) -> dict[str, Any]:
    own = cpu_ranges(zone.cpus)
    held = 0 if not reserved or own is None else overlap(own, reserved)
    cpus = max(0, zone.cpu_count - held)
    memory = max(0, zone.mem_total_b)
    out: dict[str, Any] = {
        "name": f"node-{zone.node}",
        "type": "Node",
        "resources": [
            {"name": "cpu", "capacity": str(zone.cpu_count), "allocatable": str(cpus),
             "available": str(cpus)},
            {"name": "memory", "capacity": str(memory), "allocatable": str(memory),
             "available": str(max(0, min(zone.mem_available_b, memory)))},
        ],
    }  # fmt: skip
    distances = zone.distances  # indexed by NUMA node id
    out["costs"] = (
        [{"name": f"node-{other}", "value": distances[other]} for other in ids]
        if all(other < len(distances) for other in ids)
        else []
    )
    return out


def cpu_ranges(text: str) -> list[tuple[int, int]] | None:
    """A kernel CPU list (``0-3,8``) as sorted, merged inclusive ranges; None if it is not
    one (or has more than :data:`MAX_RANGES` ranges)."""
    parts = text.strip().split(",")
    if len(parts) > MAX_RANGES:
        return None
    ranges = []
    for part in parts:
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            return None
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            return None
        ranges.append((first, last))
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """How many CPUs two merged range lists share (one pass over both)."""
    i = j = shared = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        shared += max(0, hi - lo + 1)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return shared


def due(new: Export, last: Export | None, change_pct: float) -> bool:
    if last is None or new.fixed != last.fixed:
        return True
    return any(
        abs(a - b) > change_pct for a, b in zip(new.available_pct, last.available_pct, strict=True)
    )


class TopologyApi(Protocol):
    """The calls the exporter makes (:func:`topology_api` over the real client)."""

    def get(self, name: str) -> dict[str, Any] | None: ...
    def create(self, body: dict[str, Any]) -> None: ...
    def patch(self, name: str, body: dict[str, Any]) -> None: ...
    def delete(self, name: str) -> None: ...


class TopologyExporter:
    """Writes each due node's object within the write budget, on the leader only."""

    def __init__(
        self,
        cluster: LiveCluster,
        api: TopologyApi,
        settings: TopologyExportSettings,
        leader: asyncio.Event,
        fence: Fence,
    ) -> None:
        self._cluster = cluster
        self._api = api
        self._settings = settings
        self._leader = leader
        self._fence = fence
        self._bucket = TokenBucket(settings.max_writes_per_s, settings.max_writes_per_s)
        self._written: dict[str, Export] = {}
        """What this term wrote of each node."""
        self._owned: dict[str, bool] = {}
        """Whether each node's object (read once this term) is Stowage's to write."""
        self._built: dict[str, tuple[NodeSignals, Export | None]] = {}
        """Each node's object as built from the signals it was built from: a node's signals
        change with its reports (every 10 s), not with each tick."""
        self._retry_at: dict[str, tuple[int, float]] = {}
        """Nodes whose last write was refused: failures and when to try again."""
        self._held_until = -math.inf
        self._holds = 0

    async def run(self) -> None:
        clock = self._cluster.clock
        while True:
            if not self._leader.is_set():
                self._written.clear()  # a new term trusts nothing it read or wrote before
                self._owned.clear()
                await self._leader.wait()
            await self.export_due(clock.monotonic())
            await asyncio.sleep(TICK_S)

    async def export_due(self, now_mono: float) -> int:
        """Write the nodes that are due and delete the objects of nodes gone, within the
        budget; return how many writes were made."""
        cluster = self._cluster
        self._bucket.refill(now_mono)
        if now_mono < self._held_until:
            return 0
        writes = 0
        for left in [n for n in self._built if n not in cluster.signals]:
            del self._built[left]
        gone = [n for n, ours in self._owned.items() if ours and n not in cluster.specs]
        for name in gone:
            if not self._bucket.take():
                return writes
            wrote = await self._write(name, None, now_mono)
            if wrote is None:
                return writes
            writes += wrote
        for name, signals in list(cluster.signals.items()):
            retry = self._retry_at.get(name)
            if name not in cluster.specs or (retry is not None and now_mono < retry[1]):
                continue
            built = self._built.get(name)
            if built is None or built[0] is not signals:
                built = self._built[name] = (signals, export_of(name, signals))
            export = built[1]
            if export is None or not due(
                export, self._written.get(name), self._settings.change_pct
            ):
                continue
            if self._owned.get(name) is False:
                continue
            if not self._bucket.take():
                break
            wrote = await self._write(name, export, now_mono)
            if wrote is None:
                break
            writes += wrote
        return writes

    async def _write(self, name: str, export: Export | None, now_mono: float) -> int | None:
        """One fenced write (``export`` None: delete): 1 if made, 0 if not (the object is
        not Stowage's, or this node's write was refused), None when writing must stop for
        this tick."""
        if not self._leader.is_set():
            return None
        try:
            wrote = await asyncio.to_thread(self._fenced, name, export)
        except LeaseLost as e:
            log.warning("%s", e)
            return None
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate(f"write topology of {name}", e)
            if is_server_trouble(error.status):
                self._holds += 1
                delay = min(HOLD_CAP_S, HOLD_S * 2 ** (self._holds - 1))
                if error.retry_after_s is not None:
                    delay = min(HOLD_CAP_S, error.retry_after_s)
                self._held_until = now_mono + delay
                log.warning("%s; pausing topology writes for %gs", error, delay)
                return None
            failures = self._retry_at.get(name, (0, 0.0))[0] + 1
            self._retry_at[name] = (
                failures,
                now_mono + min(NODE_BACKOFF_CAP_S, 2.0 ** (failures - 1)),
            )
            if failures == 1:
                log.warning("%s; retrying with backoff", error)
            return 0
        self._holds = 0
        self._retry_at.pop(name, None)
        if export is None:
            self._owned.pop(name, None)
            self._written.pop(name, None)
        else:  # not written to another exporter's object: skipped by ownership anyway
            self._written[name] = export
        return int(wrote)

    def _fenced(self, name: str, export: Export | None) -> bool:
        """In the worker thread: the fence is checked right before each request. Returns
        whether it wrote (not for another exporter's object)."""
        api = self._api
        if export is None:
            self._fence.check(f"delete topology of node {name}")
            api.delete(name)
            return True
        if name not in self._owned:
            found = api.get(name)
            labels = ((found or {}).get("metadata") or {}).get("labels") or {}
            self._owned[name] = found is None or labels.get(MANAGED_BY) == "stowage"
            if not self._owned[name]:
                log.warning("node %s: its NodeResourceTopology is not Stowage's; left alone", name)
                return False
            if found is None:
                self._fence.check(f"create topology of node {name}")
                api.create(export.body)
                return True
        self._fence.check(f"patch topology of node {name}")
        api.patch(name, export.body)
        return True


def topology_api(api_client: Any) -> TopologyApi:
    """The exporter's calls through the real client (merge patches: lists are replaced)."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)

    class _Api:
        def get(self, name: str) -> dict[str, Any] | None:
            try:
                found = custom.get_cluster_custom_object(
                    "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", name,
                    _request_timeout=TIMEOUT_S,
                )  # fmt: skip
            except client.exceptions.ApiException as e:
                if e.status == 404:
                    return None
                raise
            return found if isinstance(found, dict) else None

        def create(self, body: dict[str, Any]) -> None:
            custom.create_cluster_custom_object(
                "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", body,
                _request_timeout=TIMEOUT_S,
            )  # fmt: skip

        def patch(self, name: str, body: dict[str, Any]) -> None:
            custom.patch_cluster_custom_object(
                "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", name, body,
                _content_type="application/merge-patch+json", _request_timeout=TIMEOUT_S,
            )  # fmt: skip

        def delete(self, name: str) -> None:
            try:
                custom.delete_cluster_custom_object(
                    "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", name,
                    _request_timeout=TIMEOUT_S,
                )  # fmt: skip
            except client.exceptions.ApiException as e:
                if e.status != 404:
                    raise

    return _Api()
