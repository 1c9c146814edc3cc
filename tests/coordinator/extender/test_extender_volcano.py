"""Volcano's extender plugin over HTTP: ``{"task", "node"}`` predicates and
``{"task", "nodes"}`` prioritize calls, TaskInfo/NodeInfo in Volcano's untagged
(capitalised) form, and the replies it reads."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from coordinator.config import KubeSettings
from coordinator.extender.handling import MAX_NODES_PER_REQUEST
from tests.coordinator.extender.conftest import MOST_ALLOCATED, MakeRig, Rig
from tests.coordinator.extender.kubejson import GIB, MIB, NODES, POD_UID, node, pod

PREDICATE = "/volcano/predicate"
PRIORITIZE = "/volcano/prioritize"


def task(the_pod: dict[str, Any] | None, cpu_m: int, mem_b: int, gpus: int = 0) -> dict[str, Any]:
    """A TaskInfo as Volcano's extender plugin sends it (json of ``api.TaskInfo``)."""
    resreq = {
        "MilliCPU": cpu_m,
        "Memory": mem_b,
        "ScalarResources": {"nvidia.com/gpu": gpus * 1000, "pods": 1000} if gpus else None,
        "MaxTaskNum": 0,
    }
    return {
        "UID": POD_UID,
        "Job": "ns/pg-train",
        "Name": "p",
        "Namespace": "ns",
        "TaskRole": "worker",
        "Resreq": resreq,
        "InitResreq": resreq,
        "NodeName": "",
        "EvictionOccurred": False,
        "JobAllocatedHyperNode": "",
        "Status": 1,
        "Priority": 0,
        "Preemptable": False,
        "BestEffort": False,
        "Pod": the_pod,
    }


def node_info(name: str, the_node: dict[str, Any] | None = None) -> dict[str, Any]:
    """A NodeInfo as Volcano sends it (a subset of ``api.NodeInfo``)."""
    return {
        "Name": name,
        "Node": NODES[name] if the_node is None else the_node,
        "State": {"Phase": 1, "Reason": ""},
        "Idle": {"MilliCPU": 1000, "Memory": GIB, "ScalarResources": None, "MaxTaskNum": 110},
        "Used": {"MilliCPU": 0, "Memory": 0, "ScalarResources": None, "MaxTaskNum": 0},
        "Tasks": {},
        "NumaInfo": None,
        "RevocableZone": "",
    }


GPU_TASK = task(pod("4", "8Gi", gpus=2), 4000, 8 * GIB, gpus=2)
GPU_TASK_RESREQ_ONLY = task(None, 4000, 8 * GIB, gpus=2)


# ---------------------------------------------------------------- predicate


@pytest.mark.parametrize("the_task", [GPU_TASK, GPU_TASK_RESREQ_ONLY], ids=["pod", "resreq"])
@pytest.mark.parametrize(
    ("name", "reply"),
    [
        ("gpu-1", {"status": "", "code": 0}),
        ("gpu-2", {"status": "CPU 2000m free < 4000m requested", "code": 2}),
        ("node-a", {"status": "0 GPUs on the node < 2 requested", "code": 3}),
    ],
)
async def test_predicate_answers_a_status_message_and_volcanos_code(
    rig: Rig, the_task: dict[str, Any], name: str, reply: dict[str, Any]
):
    assert await rig.post(PREDICATE, {"task": the_task, "node": node_info(name)}) == (200, reply)


async def test_the_embedded_pod_beats_resreq(rig: Rig):
    """Resreq says CPU only, the Pod says 2 GPUs: the Pod is what the pod asks for."""
    disagreeing = task(pod("4", "8Gi", gpus=2), 1000, GIB)
    status, reply = await rig.post(PREDICATE, {"task": disagreeing, "node": node_info("node-a")})
    assert (status, reply) == (200, {"status": "0 GPUs on the node < 2 requested", "code": 3})
    cpu_only = task(None, 1000, GIB)
    status, reply = await rig.post(PREDICATE, {"task": cpu_only, "node": node_info("node-a")})
    assert (status, reply) == (200, {"status": "", "code": 0})


async def test_predicate_keys_are_read_in_any_casing(rig: Rig):
    body = {
        "Task": {"uid": POD_UID, "resreq": {"millicpu": 12000, "memory": GIB}, "pod": None},
        "NODE": {"name": "node-a", "node": NODES["node-a"]},
    }
    assert await rig.post(PREDICATE, body) == (
        200,
        {"status": "CPU 8000m free < 12000m requested", "code": 2},
    )


async def test_a_reported_node_fails_the_predicate_for_memory_contiguity(rig: Rig):
    rig.set_signals("node-b", contiguous_2mib_b=100 * MIB)
    contiguous = task(pod(annotations={"stowage.io/needs-contiguous-memory": "true"}), 2000, GIB)
    assert await rig.post(PREDICATE, {"task": contiguous, "node": node_info("node-b")}) == (
        200,
        {"status": "memory contiguity 100 MiB < 512 MiB needed", "code": 2},
    )
    assert await rig.post(PREDICATE, {"task": contiguous, "node": node_info("node-a")}) == (
        200,
        {"status": "", "code": 0},
    )


async def test_predicate_judges_a_node_as_the_watch_has_it(rig: Rig):
    """The NodeInfo's Node is the request's view: a node the watch lacks passes and is
    not stored; a known node keeps the size the watch gave it."""
    before = rig.snapshot()
    fresh = node("new-small", "1", "2Gi")
    body = {"task": task(None, 2000, GIB), "node": {"Name": "new-small", "Node": fresh}}
    assert await rig.post(PREDICATE, body) == (200, {"status": "", "code": 0})
    shrunk = node("node-b", "1", "2Gi")
    body = {"task": task(None, 2000, GIB), "node": {"Name": "node-b", "Node": shrunk}}
    assert await rig.post(PREDICATE, body) == (200, {"status": "", "code": 0})
    assert rig.snapshot() == before
    assert "new-small" not in rig.cluster.specs


# --------------------------------------------------------------- prioritize


async def test_prioritize_scores_0_to_100_and_assumes_the_task_on_the_best(rig: Rig):
    """MostAllocated for 2 CPUs + 4Gi: node-a 18, node-b 9, node-c 4 → 0–10 scores
    10, 3, 0 (see the kube-scheduler test), × 10 for Volcano."""
    body = {
        "task": task(pod(), 2000, 4 * GIB),
        "nodes": [node_info("node-c"), node_info("node-b"), node_info("node-a")],
    }
    resp = await rig.client.post(PRIORITIZE, json=body)
    assert resp.status == 200
    assert json.loads(await resp.text(), object_pairs_hook=list) == [  # in the order offered
        ("nodeScore", [("node-c", 0), ("node-b", 30), ("node-a", 100)]),
        ("errorMessage", ""),
    ]
    held = rig.cluster.volcano_assumed.held[POD_UID]  # Volcano's own (see test_volcano_apart)
    assert (held.node, held.assumed_until) == ("node-a", rig.clock.monotonic() + 30.0)


async def test_prioritize_in_any_casing_with_never_seen_and_nameless_nodes(rig: Rig):
    """new-m is not in the watch (0, however roomy its Node says it is) and node-q is
    only a name: node-b, the one node offered that we know, is the best."""
    body = {
        "TASK": {"uid": "other-uid", "resreq": {"millicpu": 2000, "memory": 4 * GIB}},
        "Nodes": [
            {"name": "node-b"},
            {"node": node("new-m", "4", "16Gi")},
            {"Name": "node-q", "Node": None},
        ],
    }
    status, reply = await rig.post(PRIORITIZE, body)
    assert (status, reply) == (
        200,
        {"nodeScore": {"node-b": 100, "new-m": 0, "node-q": 0}, "errorMessage": ""},
    )
    assert rig.cluster.volcano_assumed.held["other-uid"].node == "node-b"
    assert "node-q" not in rig.cluster.specs and "new-m" not in rig.cluster.specs


async def test_prioritize_of_no_nodes_is_an_empty_score_map(rig: Rig):
    status, reply = await rig.post(PRIORITIZE, {"task": task(pod(), 2000, GIB), "nodes": None})
    assert (status, reply) == (200, {"nodeScore": {}, "errorMessage": ""})
    assert rig.cluster.held == {}


# ---------------------------------------------------------- bad requests


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (PREDICATE, b"<xml/>", "body is not JSON: "),
        (PREDICATE, {"node": node_info("node-a")}, "body: no task"),
        (PREDICATE, {"task": GPU_TASK}, "body: no node"),
        (
            PREDICATE,
            {"task": {"UID": "u", "Pod": None}, "node": node_info("node-a")},
            "task: neither Pod nor Resreq",
        ),
        (
            PREDICATE,
            {"task": task(pod(cpu="lots"), 1, 1), "node": node_info("node-a")},
            "Pod: pod ns/p: invalid quantity 'lots'",
        ),
        (
            PREDICATE,
            {"task": GPU_TASK, "node": {"Name": "new-1", "Node": node("new-1", "x", "1Gi")}},
            "node.Node: node new-1: status.allocatable: invalid quantity 'x'",
        ),
        (
            PRIORITIZE,
            {"task": {"Resreq": {"MilliCPU": "2"}}, "nodes": []},
            "task.Resreq.MilliCPU: expected a number, got string",
        ),
        (PRIORITIZE, {"task": GPU_TASK, "nodes": {"node-a": {}}}, "nodes: expected an array"),
        (
            PRIORITIZE,
            {"task": GPU_TASK, "nodes": [node_info("node-a", node("new-1", "8", "8Gi"))]},
            "nodes[0]: Name 'node-a' and Node.metadata.name differ",
        ),
        (
            PRIORITIZE,
            {
                "task": GPU_TASK,
                "nodes": [
                    {"Name": "new-1", "Node": node("new-1", "8", "8Gi")},
                    {"Name": "new-2", "Node": node("new-2", "8", "lots")},
                ],
            },
            "nodes[1].Node: node new-2: status.allocatable: invalid quantity 'lots'",
        ),
        (
            PREDICATE,
            {"task": GPU_TASK, "node": {"Name": "gpu-1", "Node": node("gpu-1", "-8", "1Gi")}},
            "node.Node: node gpu-1: status.allocatable.cpu: negative",
        ),
        (
            PRIORITIZE,
            {
                "task": GPU_TASK,
                "nodes": [{"Name": "new-1", "Node": node("new-1", "8", "8Gi")}]
                * (MAX_NODES_PER_REQUEST + 1),
            },
            f"nodes: {MAX_NODES_PER_REQUEST + 1} nodes, more than {MAX_NODES_PER_REQUEST}",
        ),
    ],
)
async def test_malformed_volcano_requests_are_400_and_change_nothing(
    rig: Rig, path: str, body: Any, message: str
):
    await rig.assert_refused(path, body, message)


async def test_volcano_verbs_are_timed(rig: Rig):
    await rig.post(PREDICATE, {"task": GPU_TASK, "node": node_info("gpu-1")})
    await rig.post(PREDICATE, b"")
    await rig.post(PRIORITIZE, {"task": GPU_TASK, "nodes": [node_info("gpu-1")]})
    assert rig.requests_seen("volcano-predicate") == 2
    assert rig.requests_seen("volcano-prioritize") == 1


# ------------------------------------- Volcano's assumptions, apart from kube-scheduler's


def gpu_task(uid: str, gpus: int = 8) -> dict[str, Any]:
    """A task wanting ``gpus`` GPUs (by default all eight of gpu-1)."""
    return {**task(pod("1", "1Gi", gpus=gpus, uid=uid), 1000, GIB, gpus=gpus), "UID": uid}


async def test_volcano_counts_its_own_assumptions_and_kube_scheduler_does_not(rig: Rig):
    """Volcano's plugin cannot authenticate: a task it was told about fills gpu-1 for
    Volcano's next task, never for kube-scheduler's pods (perhaps behind mutual TLS)."""
    status, reply = await rig.post(
        PRIORITIZE, {"task": gpu_task("v-1"), "nodes": [node_info("gpu-1")]}
    )
    assert (status, reply["nodeScore"]) == (200, {"gpu-1": 100})
    assert rig.cluster.volcano_assumed.held["v-1"].node == "gpu-1"
    status, reply = await rig.post(PREDICATE, {"task": gpu_task("v-2"), "node": node_info("gpu-1")})
    assert (status, reply["code"]) == (200, 2)
    assert "GPU" in reply["status"]
    real = {"Pod": pod("1", "1Gi", gpus=8, uid="k-1"), "NodeNames": ["gpu-1"]}
    status, reply = await rig.post("/scheduler/filter", real)
    assert (status, reply["NodeNames"], reply["FailedNodes"]) == (200, ["gpu-1"], {})
    assert rig.cluster.held["k-1"].node == "gpu-1"  # kube-scheduler's own assumption


async def test_made_up_volcano_tasks_push_out_only_volcanos_assumptions(make_rig: MakeRig):
    """With room for one assumption per node, a stream of made-up one-GPU Volcano tasks
    on gpu-1 leaves kube-scheduler's one-GPU assumption there standing (and counted for
    its next pod, which finds 7 GPUs, not 8)."""
    one = dataclasses.replace(MOST_ALLOCATED, kube=KubeSettings(max_assumed_per_node=1))
    rig = await make_rig(one)
    first = {"Pod": pod("1", "1Gi", gpus=1, uid="k-1"), "NodeNames": ["gpu-1"]}
    assert (await rig.post("/scheduler/filter", first))[1]["NodeNames"] == ["gpu-1"]
    for i in range(3):
        body = {"task": gpu_task(f"made-up-{i}", gpus=1), "nodes": [node_info("gpu-1")]}
        assert (await rig.post(PRIORITIZE, body))[0] == 200
    assert list(rig.cluster.volcano_assumed.held) == ["made-up-2"]
    assert rig.cluster.held["k-1"].assumed_until is not None
    second = {"Pod": pod("1", "1Gi", gpus=8, uid="k-2"), "NodeNames": ["gpu-1"]}
    status, reply = await rig.post("/scheduler/filter", second)
    assert (status, reply["NodeNames"], list(reply["FailedNodes"])) == (200, [], ["gpu-1"])


async def test_a_volcano_assumption_ends_when_the_watch_binds_the_pod_or_it_lapses(rig: Rig):
    before = rig.snapshot()
    for uid in ("v-1", "v-2"):
        body = {"task": gpu_task(uid, gpus=4), "nodes": [node_info("gpu-1")]}
        await rig.post(PRIORITIZE, body)
    assert list(rig.cluster.volcano_assumed.held) == ["v-1", "v-2"]
    assert rig.snapshot()[4:] == before[4:]  # free CPU and GPUs: counted for Volcano only
    bound = pod("1", "1Gi", gpus=4, uid="v-2")
    bound["spec"]["nodeName"] = "gpu-1"
    rig.cluster.upsert_pod(bound)
    assert list(rig.cluster.volcano_assumed.held) == ["v-1"]
    assert rig.cluster.held["v-2"].assumed_until is None  # counted once, as bound
    late = {"task": gpu_task("v-2", gpus=4), "nodes": [node_info("gpu-1"), node_info("gpu-2")]}
    await rig.post(PRIORITIZE, late)  # asked about after the watch saw it bound
    assert list(rig.cluster.volcano_assumed.held) == ["v-1"]
    rig.clock.advance(30.0)
    rig.cluster.expire()
    assert rig.cluster.volcano_assumed.held == {}
