"""Gang locality on the real control plane: the real kube-scheduler, with the configuration
Stowage ships, places four gangs of eight one-GPU pods (``stowage.io/gang``) through the
extender on eight 8-GPU kwok nodes in two racks — once with ``gang`` on, once off.

The pods are created gang after gang interleaved (a member of each gang, then the next
member of each), so a packing policy alone puts several gangs on every node; with the term
each gang lands whole on a node of its own. ``/debug/explain`` of a member, asked of the
running coordinator, shows its gang's node.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.cluster import coordinator, scheduling
from hack.waiting import until
from tests.kit import free_port
from tests.realcluster import kit

OWNER = "test-gangs"
POOL = {scheduling.POOL_LABEL: "gangs"}
RACK = "example.com/rack"
GANGS, MEMBERS = 4, 8
SPECS = [NodeSpec(f"gang-n{i}", 64_000, 512 << 30, 8, "NVIDIA-A100-SXM4-80GB") for i in range(8)]
SETTLE_S = 120.0


@pytest.fixture(scope="module")
def kubeconfigs(
    cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Path]]:
    cluster.apply(kit.shipped_rbac() + kit.scheduler_rbac())
    for rack in range(2):
        racked = SPECS[4 * rack : 4 * rack + 4]
        labels = {**POOL, kit.OWNER: OWNER, RACK: f"r{rack}"}
        scheduling.create_nodes(cluster.core, racked, labels)
    cluster.wait_ready([s.name for s in SPECS], timeout_s=120)
    out = tmp_path_factory.mktemp("gangs")
    yield (
        cluster.kubeconfig_for(kit.COORDINATOR_SA, out / "coordinator.kubeconfig"),
        cluster.kubeconfig_for("stowage-scheduler", out / "scheduler.kubeconfig"),
    )
    cluster.delete_owned(OWNER)


def members(namespace: str) -> list[PodRequest]:
    """Member m of every gang, then member m + 1 of every gang, … — the order of their
    names, which is the order kube-scheduler lists and queues them in."""
    return [
        PodRequest(f"m{m}-g{g}", 1000, 4 << 30, 1, 1000, gang=f"{namespace}/g{g}", gang_size=8)
        for m in range(MEMBERS)
        for g in range(GANGS)
    ]


def nodes_per_gang(bound: dict[str, str]) -> dict[str, int]:
    found: dict[str, set[str]] = {}
    for pod, node in bound.items():
        found.setdefault(pod.split("-")[1], set()).add(node)
    return {gang: len(nodes) for gang, nodes in sorted(found.items())}


def run(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path], namespace: str, gang_on: bool
) -> tuple[dict[str, str], dict[str, Any]]:
    """One scheduling run: the pods bound, and (``gang_on``) ``/debug/explain`` of the last
    member on its node once every pod is settled; then the pods deleted (the nodes empty
    again)."""
    coordinator_kubeconfig, scheduler_kubeconfig = kubeconfigs
    settings = kit.coordinator_settings(
        f"rc-{namespace}", gang={"enabled": gang_on, "topology_keys": [RACK]}
    )
    debug_port = free_port()
    cluster.namespace(namespace, OWNER)
    pods = members(namespace)
    with coordinator.running(
        cluster.plane, coordinator_kubeconfig, settings, debug_port=debug_port
    ) as (_, url):
        config = scheduling.scheduler_config(extender_url=url)
        count = scheduling.create_pods(cluster.core, namespace, pods, POOL)
        scheduler = cluster.plane.start_scheduler(config, kubeconfig=scheduler_kubeconfig)
        try:
            settled = scheduling.settle(cluster.core, namespace, count, SETTLE_S)
        finally:
            scheduler.stop()
        last = pods[-1].name
        explained = (
            _explain(debug_port, f"{namespace}/{last}", settled.bound[last]) if gang_on else {}
        )
    cluster.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    until(lambda: not cluster.core.list_namespaced_pod(namespace).items, "pods gone", 120)
    assert not settled.pending
    return settled.bound, explained


def _explain(port: int, pod: str, node: str) -> dict[str, Any]:
    """``/debug/explain`` once the coordinator's pod watch has the pod bound (its
    gang's landed members all counted)."""
    url = f"http://127.0.0.1:{port}/debug/explain?pod={pod}&node={node}"
    found: dict[str, Any] = {}

    def counted() -> bool:
        nonlocal found
        with urllib.request.urlopen(url) as resp:  # noqa: S310 (a local URL)
            found = json.loads(resp.read())
        return bool(found.get("gang")) and found["gang"]["landed"] == MEMBERS - 1

    until(counted, f"{pod}'s gang counted", 30)
    return found


def test_each_gang_lands_on_a_node_of_its_own_with_the_term_and_not_without(
    cluster: kit.Cluster, kubeconfigs: tuple[Path, Path]
) -> None:
    on, explained = run(cluster, kubeconfigs, "rc-gangs-on", gang_on=True)
    off, _ = run(cluster, kubeconfigs, "rc-gangs-off", gang_on=False)
    print(json.dumps({"on": nodes_per_gang(on), "off": nodes_per_gang(off)}))
    assert nodes_per_gang(on) == {"g0": 1, "g1": 1, "g2": 1, "g3": 1}
    assert len(set(on.values())) == GANGS  # four nodes, one per gang
    assert sum(nodes_per_gang(off).values()) > GANGS + 2  # packing alone mixes them
    node_level = next(level for level in explained["gang"]["levels"] if level["level"] == "node")
    assert node_level["landed_here"] == MEMBERS - 1  # the rest of g3, on the member's node
    print(json.dumps(explained))
