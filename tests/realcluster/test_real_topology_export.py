"""The annotations and objects other schedulers read, written to the real API server as
the coordinator's ServiceAccount with the shipped RBAC: NodeResourceTopology objects
(the shipped CRD installed) and crane-scheduler's load annotations, read back with the
real ``kubernetes`` client as an admin."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from coordinator.config import CoordinatorSettings, TopologyExportSettings
from coordinator.consolidation import crane
from coordinator.kube import publisher, topology
from coordinator.kube.leader import Fence
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from tests.hosts import FakeClock
from tests.kit import build_report, until
from tests.realcluster import kit

OWNER = "test-topology-export"
NODES = ("rc-topo-0", "rc-topo-1", "rc-topo-2")
CRD = kit.REPO / "daemonset" / "crds" / "noderesourcetopologies.yaml"
GROUP, VERSION, PLURAL = "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"


@pytest.fixture(scope="module")
def coordinator_api(
    cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    """The shipped RBAC and CRD applied, the nodes added, and a client of the
    coordinator's ServiceAccount."""
    cluster.apply(kit.shipped_rbac())
    extensions = client.ApiextensionsV1Api(cluster.api)
    with contextlib.suppress(client.exceptions.ApiException):  # 409: a rerun in the session
        extensions.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))
    until(lambda: _established(extensions), "the NodeResourceTopology CRD is established")
    for name in NODES:
        cluster.add_node(name, OWNER, cpu="224", memory="2048Gi")
    path = tmp_path_factory.mktemp("topology") / "coordinator.kubeconfig"
    kubeconfig: Path = cluster.kubeconfig_for(kit.COORDINATOR_SA, path)
    yield config.new_client_from_config(config_file=str(kubeconfig))
    custom = client.CustomObjectsApi(cluster.api)
    for name in NODES:
        with contextlib.suppress(client.exceptions.ApiException):
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    cluster.delete_owned(OWNER)


def _established(extensions: client.ApiextensionsV1Api) -> bool:
    crd = extensions.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
    conditions = (crd.status and crd.status.conditions) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def live(names: tuple[str, ...]) -> tuple[LiveCluster, FakeClock]:
    clock = FakeClock()
    cluster = LiveCluster(CoordinatorSettings(), clock, CoordinatorMetrics())
    for name in names:
        allocatable = {"cpu": "224", "memory": "2048Gi", "nvidia.com/gpu": "8"}
        cluster.upsert_node({"metadata": {"name": name}, "status": {"allocatable": allocatable}})
        cluster.apply_report(build_report(name, now=clock.wall()))
    return cluster, clock


def leading(clock: FakeClock) -> tuple[asyncio.Event, Fence]:
    leader = asyncio.Event()
    leader.set()
    fence = Fence(renew_deadline_s=1e6, monotonic=clock.monotonic)
    fence.renewed(clock.monotonic())
    return leader, fence


def read(cluster: kit.Cluster, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = client.CustomObjectsApi(cluster.api).get_cluster_custom_object(
            GROUP, VERSION, PLURAL, name
        )
    except client.exceptions.ApiException as e:
        if e.status == 404:
            return None
        raise
    return found


async def test_node_resource_topology_objects_as_the_crd_has_them(
    cluster: kit.Cluster, coordinator_api: client.ApiClient
) -> None:
    mine, theirs, leaving = NODES
    # Another exporter's object for one node: Stowage must leave it as it is.
    foreign = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeResourceTopology",
        "metadata": {"name": theirs}, "zones": [{"name": "node-0", "type": "Node"}],
    }  # fmt: skip
    custom = client.CustomObjectsApi(cluster.api)
    with contextlib.suppress(client.exceptions.ApiException):
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, foreign)
    state, clock = live(NODES)
    leader, fence = leading(clock)
    exporter = topology.TopologyExporter(
        state, topology.topology_api(coordinator_api), TopologyExportSettings(enabled=True),
        leader, fence,
    )  # fmt: skip
    assert await exporter.export_due(clock.monotonic()) == 2  # mine and leaving, not theirs

    found = read(cluster, mine)
    assert found is not None
    assert found["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "stowage"}
    assert found["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    assert found["attributes"] == [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "pod"},
    ]
    assert [(z["name"], z["type"]) for z in found["zones"]] == [
        ("node-0", "Node"), ("node-1", "Node"),
    ]  # fmt: skip
    zero = found["zones"][0]
    assert zero["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    assert zero["resources"] == [
        {"name": "cpu", "capacity": "112", "allocatable": "110", "available": "110"},
        {"name": "memory", "capacity": "1099511627776", "allocatable": "1099511627776",
         "available": "644245094400"},
    ]  # fmt: skip
    other = read(cluster, theirs)
    assert other is not None and other["zones"] == [{"name": "node-0", "type": "Node"}]

    # A node that leaves the cluster: its object goes.
    state.remove_node(leaving)
    assert await exporter.export_due(clock.monotonic()) == 1
    assert read(cluster, leaving) is None
    assert read(cluster, mine) is not None


async def test_crane_load_annotations_land_on_the_node(
    cluster: kit.Cluster, coordinator_api: client.ApiClient
) -> None:
    node = NODES[0]
    state, clock = live((node,))
    load = crane.CraneLoad(state, clock)
    load.sample()
    leader, fence = leading(clock)
    pub = publisher.Publisher(
        state, publisher.merge_patcher(coordinator_api), state.settings.publisher,
        state.metrics, leader, fence, extra=load.annotations,
    )  # fmt: skip
    assert await pub.publish_due(clock.wall(), clock.monotonic()) == 1
    annotations = cluster.core.read_node(node).metadata.annotations or {}
    # build_report's node: 20 % CPU in use; 1 − 1100/2048 GiB of memory available.
    assert annotations["cpu_usage_avg_5m"] == "0.20000,2026-09-21T14:13:20Z"
    assert annotations["mem_usage_avg_5m"] == "0.46289,2026-09-21T14:13:20Z"
    assert annotations["node_hot_value"] == "0,2026-09-21T14:13:20Z"
    assert annotations["stowage.io/state"].startswith("fresh;at=")
