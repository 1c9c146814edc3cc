"""NodeResourceTopology objects from the agent's NUMA report: the object's shape (written
out by hand from the CRD), CPU lists, damping, and a leader that writes only its own."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from common.schema import Absent
from coordinator.config import CoordinatorSettings, TopologyExportSettings
from coordinator.kube import topology
from coordinator.kube.client import KubeError
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.state.reports import signals_of
from hack.bench.ingest import gpu_node
from tests.hosts import FakeClock
from tests.kit import build_report

GIB = 2**30
NODE = "gpu-node-00000"


def test_the_object_of_a_two_numa_node() -> None:
    export = topology.export_of(NODE, signals_of(build_report(NODE)))
    assert export is not None
    zone = {"type": "Node"}
    expected = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": NODE, "labels": {"app.kubernetes.io/managed-by": "stowage"}},
        # kubelet: single-numa-node, scope pod, reservedSystemCPUs 0,112 (both on node 0)
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "pod"},
        ],
        "topologyPolicies": ["SingleNUMANodePodLevel"],
        "zones": [
            {**zone, "name": "node-0",
             "costs": [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}],
             "resources": [
                 {"name": "cpu", "capacity": "112", "allocatable": "110", "available": "110"},
                 {"name": "memory", "capacity": "1099511627776",
                  "allocatable": "1099511627776", "available": "644245094400"},
             ]},
            {**zone, "name": "node-1",
             "costs": [{"name": "node-0", "value": 21}, {"name": "node-1", "value": 10}],
             "resources": [
                 {"name": "cpu", "capacity": "112", "allocatable": "112", "available": "112"},
                 {"name": "memory", "capacity": "1099511627776",
                  "allocatable": "1099511627776", "available": "644245094400"},
             ]},
        ],
    }  # fmt: skip
    assert export.body == expected


def kubelet_as(policy: str | None, scope: str | None, reserved: str | None):  # noqa: ANN201
    base = build_report(NODE)
    kubelet = msgspec.structs.replace(
        base.allocatable.kubelet,
        topology_manager_policy=policy,
        topology_manager_scope=scope,
        reserved_system_cpus=reserved,
    )
    allocatable = msgspec.structs.replace(base.allocatable, kubelet=kubelet)
    return signals_of(msgspec.structs.replace(base, allocatable=allocatable))


@pytest.mark.parametrize(
    ("policy", "scope", "named"),
    [
        ("single-numa-node", "container", ["SingleNUMANodeContainerLevel"]),
        ("single-numa-node", None, ["SingleNUMANodeContainerLevel"]),  # kubelet's default
        ("restricted", "pod", ["RestrictedPodLevel"]),
        ("best-effort", "container", ["BestEffortContainerLevel"]),
        ("none", None, ["None"]),
    ],
)
def test_topology_policies_name_kubelets_policy_and_scope(
    policy: str, scope: str | None, named: list[str]
) -> None:
    export = topology.export_of(NODE, kubelet_as(policy, scope, None))
    assert export is not None
    assert export.body["topologyPolicies"] == named
    cpu = export.body["zones"][0]["resources"][0]
    assert cpu["allocatable"] == "112"  # nothing reserved


def test_unknown_kubelet_settings_and_no_numa_report_are_left_out() -> None:
    export = topology.export_of(NODE, kubelet_as(None, None, "not a cpu list"))
    assert export is not None
    assert "attributes" not in export.body and "topologyPolicies" not in export.body
    assert export.body["zones"][0]["resources"][0]["allocatable"] == "112"
    base = build_report(NODE)
    nodes = [msgspec.structs.replace(n, distances=[10]) for n in base.numa.nodes]
    short = msgspec.structs.replace(base, numa=msgspec.structs.replace(base.numa, nodes=nodes))
    export = topology.export_of(NODE, signals_of(short))
    assert export is not None
    assert [z["costs"] for z in export.body["zones"]] == [[], []]  # no distance to node 1
    no_numa = msgspec.structs.replace(base, numa=Absent("not-measured"))
    assert topology.export_of(NODE, signals_of(no_numa)) is None


def test_cpu_lists() -> None:
    assert topology.cpu_ranges("0-3,8,5-6,4") == [(0, 6), (8, 8)]
    assert topology.cpu_ranges("3-1") is None
    assert topology.cpu_ranges("a") is None
    assert topology.cpu_ranges(",".join(["1"] * 4097)) is None  # past MAX_RANGES
    assert topology.overlap([(0, 55), (112, 167)], [(0, 0), (112, 112), (200, 210)]) == 2
    assert topology.overlap([(0, 9)], [(5, 20)]) == 5
    assert topology.overlap([(0, 3)], [(4, 9)]) == 0


class Api:
    """An in-memory NodeResourceTopology store, recording each call."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail: KubeError | None = None

    def _call(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        if self.fail is not None:
            raise self.fail

    def get(self, name: str) -> dict[str, Any] | None:
        self._call("get", name)
        return self.objects.get(name)

    def create(self, body: dict[str, Any]) -> None:
        self._call("create", body["metadata"]["name"])
        self.objects[body["metadata"]["name"]] = body

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self._call("patch", name)
        self.objects[name] = body

    def delete(self, name: str) -> None:
        self._call("delete", name)
        self.objects.pop(name, None)


def rig(nodes: int = 1, **settings: Any):  # noqa: ANN201
    clock = FakeClock()
    cluster = LiveCluster(CoordinatorSettings(), clock, CoordinatorMetrics())
    names = [f"gpu-node-{i:05}" for i in range(nodes)]
    cluster.replace_nodes([gpu_node(n) for n in names])
    leader = asyncio.Event()
    leader.set()
    fence = Fence(renew_deadline_s=1e6, monotonic=clock.monotonic)
    fence.renewed(clock.monotonic())
    api = Api()
    exporter = topology.TopologyExporter(
        cluster, api, TopologyExportSettings(enabled=True, **settings), leader, fence
    )
    return cluster, exporter, api, clock, names, leader


def report(name: str, clock: FakeClock, available_gib: float = 600.0):  # noqa: ANN201
    base = build_report(name, now=clock.wall())
    nodes = [
        msgspec.structs.replace(n, mem_available_b=int(available_gib * GIB))
        for n in base.numa.nodes
    ]
    return msgspec.structs.replace(base, numa=msgspec.structs.replace(base.numa, nodes=nodes))


async def test_written_once_then_only_on_a_move_past_the_tolerance() -> None:
    cluster, exporter, api, clock, (name,), _ = rig(change_pct=5.0)
    cluster.apply_report(report(name, clock))
    assert await exporter.export_due(clock.monotonic()) == 1
    assert api.calls == [("get", name), ("create", name)]
    api.calls.clear()
    # 600 → 640 GiB available of 1024 (3.9 points): no write.
    clock.advance(1)
    cluster.apply_report(report(name, clock, 640))
    assert await exporter.export_due(clock.monotonic()) == 0
    # 600 → 660 GiB (5.9 points): patched.
    clock.advance(1)
    cluster.apply_report(report(name, clock, 660))
    assert await exporter.export_due(clock.monotonic()) == 1
    assert api.calls == [("patch", name)]
    memory = api.objects[name]["zones"][0]["resources"][1]
    assert memory["available"] == str(660 * GIB)


def test_available_memory_is_never_above_capacity() -> None:
    clock = FakeClock()
    export = topology.export_of(NODE, signals_of(report(NODE, clock, available_gib=2000)))
    assert export is not None
    memory = export.body["zones"][0]["resources"][1]
    assert memory["available"] == memory["capacity"] == str(1024 * GIB)
    assert export.available_pct == (100.0, 100.0)


async def test_another_exporters_object_is_left_alone() -> None:
    cluster, exporter, api, clock, (name,), _ = rig()
    api.objects[name] = {"metadata": {"name": name, "labels": {}}, "zones": []}
    cluster.apply_report(report(name, clock))
    assert await exporter.export_due(clock.monotonic()) == 0
    clock.advance(1)
    cluster.apply_report(report(name, clock, 100))
    assert await exporter.export_due(clock.monotonic()) == 0
    assert api.calls == [("get", name)]  # read once, never written
    assert api.objects[name]["zones"] == []


async def test_a_node_that_leaves_has_its_object_deleted() -> None:
    cluster, exporter, api, clock, names, _ = rig(nodes=2)
    for name in names:
        cluster.apply_report(report(name, clock))
    await exporter.export_due(clock.monotonic())
    assert sorted(api.objects) == names
    cluster.remove_node(names[1])
    api.calls.clear()
    await exporter.export_due(clock.monotonic())
    assert api.calls == [("delete", names[1])]
    assert sorted(api.objects) == names[:1]


async def test_writes_are_rate_limited_and_a_follower_writes_nothing() -> None:
    cluster, exporter, api, clock, names, leader = rig(nodes=3, max_writes_per_s=2.0)
    for name in names:
        cluster.apply_report(report(name, clock))
    assert await exporter.export_due(clock.monotonic()) == 2  # two tokens
    clock.advance(1)
    leader.clear()
    assert await exporter.export_due(clock.monotonic()) == 0
    leader.set()
    assert await exporter.export_due(clock.monotonic()) == 1


async def test_a_lease_not_renewed_in_time_writes_nothing() -> None:
    cluster, exporter, api, clock, (name,), _ = rig()
    cluster.apply_report(report(name, clock))
    exporter._fence.revoke()
    assert await exporter.export_due(clock.monotonic()) == 0
    assert api.calls == [("get", name)]  # a read; the create never went out


async def test_server_trouble_pauses_every_write_and_a_refusal_backs_that_node_off() -> None:
    cluster, exporter, api, clock, names, _ = rig(nodes=2)
    for name in names:
        cluster.apply_report(report(name, clock))
    api.fail = KubeError("overloaded", status=429, retry_after_s=5.0)
    assert await exporter.export_due(clock.monotonic()) == 0
    assert len(api.calls) == 1  # the first answer paused everything
    api.fail = None
    clock.advance(4)
    assert await exporter.export_due(clock.monotonic()) == 0  # still paused
    clock.advance(1)
    assert await exporter.export_due(clock.monotonic()) == 2
    # A 422 for one node: that node waits; the others are written meanwhile.
    api.calls.clear()
    api.fail = KubeError("invalid", status=422)
    clock.advance(1)
    for name in names:
        cluster.apply_report(report(name, clock, 100))
    await exporter.export_due(clock.monotonic())
    assert api.calls == [("patch", names[0]), ("patch", names[1])]  # each refused once
    api.fail = None
    api.calls.clear()
    await exporter.export_due(clock.monotonic())
    assert api.calls == []  # both backing off
    clock.advance(1)
    await exporter.export_due(clock.monotonic())
    assert sorted(api.calls) == [("patch", names[0]), ("patch", names[1])]
