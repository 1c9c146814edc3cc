"""The Node and Pod reflectors against the emulated API server: what changes there shows
up in the live cluster, a watch whose history was compacted relists and converges, and
``/readyz`` waits for both caches."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any

import pytest

from hack.kubeapi.resources import NODES, PODS
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

GIB = rig.GIB


def cpu_free_m(coordinator: rig.Coordinator, node: str) -> int | None:
    state = coordinator.cluster.state
    if state is None or node not in state.index:
        return None
    return int(state.cpu_free[state.index[node]])


def resize(cpu: str) -> Any:
    def change(node: dict[str, Any]) -> dict[str, Any]:
        node["status"]["allocatable"]["cpu"] = cpu
        return node

    return change


def bind(node: str) -> Any:
    def change(pod: dict[str, Any]) -> dict[str, Any]:
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = "Running"
        return pod

    return change


def finish(pod: dict[str, Any]) -> dict[str, Any]:
    pod["status"]["phase"] = "Succeeded"
    return pod


async def test_nodes_and_pods_in_the_api_server_flow_into_the_live_cluster(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    api.add_node("node-a", capacity={"cpu": "8", "memory": "32Gi"})
    api.add_pod("running", node="node-a", requests={"cpu": "1", "memory": "1Gi"})
    c = await start()
    await rig.eventually(lambda: c.services.synced.is_set(), "caches synced")
    assert set(c.cluster.specs) == {"node-a"}
    assert cpu_free_m(c, "node-a") == 7000  # the listed pod holds its request

    # a node joins, then is resized
    api.add_node("node-b", capacity={"cpu": "16", "memory": "64Gi"})
    await rig.eventually(lambda: cpu_free_m(c, "node-b") == 16000, "node-b added")
    assert c.cluster.specs["node-b"].mem_b == 64 * GIB
    api.store.update(NODES, "", "node-b", resize("12"))
    await rig.eventually(lambda: c.cluster.specs["node-b"].cpu_m == 12000, "node-b resized")
    assert cpu_free_m(c, "node-b") == 12000

    # a pending pod is known but holds nothing until it is bound
    pending = api.add_pod("batch", "jobs", phase="Pending", requests={"cpu": "3", "memory": "2Gi"})
    uid = pending["metadata"]["uid"]
    await rig.eventually(lambda: "jobs/batch" in c.cluster.pods, "the pending pod seen")
    assert uid not in c.cluster.held
    assert c.cluster.pods["jobs/batch"].cpu_m == 3000
    api.store.update(PODS, "jobs", "batch", bind("node-b"))
    await rig.eventually(lambda: cpu_free_m(c, "node-b") == 9000, "the bound pod held")
    assert c.cluster.held[uid].node == "node-b"

    # a finished pod gives its resources back; a deleted one is forgotten
    api.store.update(PODS, "jobs", "batch", finish)
    await rig.eventually(lambda: cpu_free_m(c, "node-b") == 12000, "the finished pod released")
    assert "jobs/batch" not in c.cluster.pods
    api.store.delete(PODS, "default", "running")
    await rig.eventually(lambda: cpu_free_m(c, "node-a") == 8000, "the deleted pod released")
    assert "default/running" not in c.cluster.pods and not c.cluster.held

    # a node leaves, with the pods bound to it
    api.add_pod("doomed", node="node-b", requests={"cpu": "2"})
    await rig.eventually(lambda: cpu_free_m(c, "node-b") == 10000, "the pod on node-b held")
    api.store.delete(NODES, "", "node-b")
    await rig.eventually(lambda: "node-b" not in c.cluster.specs, "node-b removed")
    assert not c.cluster.held
    assert cpu_free_m(c, "node-b") is None
    assert c.metric("stowage_nodes") == 1
    assert c.metric("stowage_watch_restarts_total", {"resource": "nodes", "cause": "error"}) == 0


@pytest.mark.kubeapi(history=5)
async def test_a_watch_whose_history_was_compacted_relists_and_converges(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    for i in range(3):
        api.add_node(f"node-{i}", capacity={"cpu": "4"})
    api.add_pod("pod-early", node="node-1", requests={"cpu": "1"})
    c = await start()
    await rig.eventually(
        lambda: api.watching.get("/api/v1/nodes") and api.watching.get("/api/v1/pods"),
        "both watches open",
    )
    expired = {"resource": "nodes", "cause": "expired"}
    assert c.metric("stowage_watch_restarts_total", expired) == 0
    assert c.cluster.policy.model.pods == 1  # type: ignore[attr-defined]

    # Twenty writes with no chance for the watch streams to run in between (the emulator
    # shares this event loop): the watch's resourceVersion falls out of the history.
    for i in range(3, 15):
        api.add_node(f"node-{i}", capacity={"cpu": "4"})
    api.store.delete(NODES, "", "node-0")
    api.store.delete(NODES, "", "node-5")
    for i in (1, 7, 9):
        api.store.update(NODES, "", f"node-{i}", resize("6"))
    for i in range(3):
        api.add_pod(f"pod-{i}", node="node-1", requests={"cpu": "1"})

    await rig.eventually(
        lambda: c.metric("stowage_watch_restarts_total", expired) >= 1, "the node watch expired"
    )

    def converged() -> bool:
        listed = {n["metadata"]["name"]: n for n in api.store.list(NODES)[0]}
        specs = c.cluster.specs
        return set(specs) == set(listed) and all(
            specs[name].cpu_m == 1000 * int(node["status"]["allocatable"]["cpu"])
            for name, node in listed.items()
        )

    await rig.eventually(converged, "the live cluster matches the API server")
    await rig.eventually(lambda: cpu_free_m(c, "node-1") == 2000, "the pods on node-1 held")
    assert c.metric("stowage_watch_restarts_total", {"resource": "pods", "cause": "expired"}) >= 1
    for resource in ("nodes", "pods"):
        labels = {"resource": resource, "cause": "error"}
        assert c.metric("stowage_watch_restarts_total", labels) == 0
    # a relist is no first sight: the policy learnt each pod once
    assert c.cluster.policy.model.pods == 4  # type: ignore[attr-defined]
    # back to watching: a later change arrives as an event, without another relist
    restarts = c.metric("stowage_watch_restarts_total", expired)
    api.add_node("node-late", capacity={"cpu": "2"})
    await rig.eventually(lambda: "node-late" in c.cluster.specs, "node-late added")
    assert c.metric("stowage_watch_restarts_total", expired) == restarts


async def test_readyz_is_503_until_both_caches_synced(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    api.add_node("node-a")
    pods_listed = api.hold_lists("/api/v1/pods")
    # Readiness on the caches alone (the loop's lag has tests/coordinator/test_looplag.py):
    # the sync's gc.collect() runs on the loop, and over a whole suite's heap on busy cores
    # the first /readyz after it once found the loop more than the default 0.5 s behind.
    settings = rig.settings()
    server = dataclasses.replace(settings.server, ready_max_loop_lag_s=3600.0)
    c = await start(dataclasses.replace(settings, server=server))
    await rig.eventually(lambda: "node-a" in c.cluster.specs, "the nodes listed")
    status, text = await c.get("/readyz")
    assert (status, text) == (503, "waiting for the Node and Pod caches\n")
    assert (await c.get("/healthz"))[0] == 200  # alive all the same

    frozen = gc.get_freeze_count()
    pods_listed.set()
    await rig.eventually(lambda: c.services.synced.is_set(), "caches synced")
    assert await c.get("/readyz") == (200, "ready\n")
    try:  # the synced caches were taken out of the collector's sight, once
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()  # this test process lives on


async def test_pods_listed_before_their_node_count_once_the_node_arrives(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    """The two watches are independent: pods may be known before the node they are bound
    to (at start, or a node re-registering); they count on it as soon as it is known."""
    api.add_node("node-a", capacity={"cpu": "8"})
    api.add_pod("early", node="node-a", requests={"cpu": "2"})
    nodes_listed = api.hold_lists("/api/v1/nodes")
    c = await start()
    await rig.eventually(lambda: "default/early" in c.cluster.pods, "the pods listed")
    assert not c.services.synced.is_set()
    nodes_listed.set()
    await rig.eventually(lambda: c.services.synced.is_set(), "caches synced")
    await rig.eventually(lambda: cpu_free_m(c, "node-a") == 6000, "the early pod held")

    # The node object is deleted and registers again; its pod is still bound to it.
    api.store.delete(NODES, "", "node-a")
    await rig.eventually(lambda: "node-a" not in c.cluster.specs, "node-a removed")
    api.add_node("node-a", capacity={"cpu": "8"})
    await rig.eventually(lambda: cpu_free_m(c, "node-a") == 6000, "the pod held again")
    api.store.delete(PODS, "default", "early")
    await rig.eventually(lambda: cpu_free_m(c, "node-a") == 8000, "the pod released")
    assert not c.cluster.held
