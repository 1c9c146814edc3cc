"""Property-based fuzzing of every scheduler endpoint over HTTP: whatever the body, the
answer is never a 5xx, and a refused request (400, 413) changes nothing in the cluster.

Bodies are valid requests of each verb with a few hostile mutations (see
:mod:`tests.coordinator.hostile`), or random bytes. The default run tries
``hostile.DEFAULT_EXAMPLES`` bodies per endpoint; ``-m slow`` tries
``hostile.SLOW_EXAMPLES``.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tests.coordinator import hostile
from tests.coordinator.extender.conftest import Rig
from tests.coordinator.extender.kubejson import GIB, NODES, POD_UID, pod
from tests.coordinator.fingerprint import fingerprint

FILTER = "/scheduler/filter"
PRIORITIZE = "/scheduler/prioritize"
PREEMPT = "/scheduler/preempt"
PREDICATE = "/volcano/predicate"
VOLCANO_PRIORITIZE = "/volcano/prioritize"
ENDPOINTS = (FILTER, PRIORITIZE, PREEMPT, PREDICATE, VOLCANO_PRIORITIZE)


def _rich_pod() -> dict[str, Any]:
    """A GPU pod with every field the endpoints read: init and sidecar containers,
    overhead, limits, and the stowage.io/ annotations."""
    the_pod = pod(
        "2",
        "4Gi",
        gpus=2,
        name="rich",
        annotations={
            "stowage.io/gpu-milli": "500",
            "stowage.io/gpu-models": "NVIDIA-A100-SXM4-80GB|H100",
            "stowage.io/needs-contiguous-memory": "64Mi",
            "stowage.io/qos": "batch",
        },
    )
    spec = the_pod["spec"]
    spec["initContainers"] = [
        {"name": "init", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}},
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1"}}},
    ]
    spec["overhead"] = {"cpu": "100m", "memory": "64Mi"}
    spec["containers"][0]["resources"]["limits"].update({"cpu": "2", "memory": "4Gi"})
    return the_pod


def _task(the_pod: dict[str, Any] | None) -> dict[str, Any]:
    resreq = {"MilliCPU": 2000, "Memory": 4 * GIB, "ScalarResources": {"nvidia.com/gpu": 1000}}
    task = {"UID": POD_UID, "Name": "p", "Namespace": "ns", "Resreq": resreq}
    if the_pod is not None:
        task["Pod"] = the_pod
    return task


def _node_info(name: str, with_node: bool = True) -> dict[str, Any]:
    return {"Name": name, "Node": NODES[name] if with_node else None, "Tasks": {}}


NAMES = list(NODES)
SEEDS: dict[str, list[Any]] = {
    FILTER: [
        {"Pod": pod(), "Nodes": None, "NodeNames": NAMES},
        {"Pod": _rich_pod(), "NodeNames": NAMES},
        {"Pod": pod(gpus=1), "Nodes": {"items": list(NODES.values())}},
    ],
    PREEMPT: [
        {"Pod": pod(), "NodeNameToMetaVictims": {"node-a": {"Pods": [{"UID": "u1"}]}}},
        {
            "Pod": _rich_pod(),
            "NodeNameToVictims": {"gpu-1": {"Pods": [pod(uid="u2")], "NumPDBViolations": 1}},
        },
    ],
    PREDICATE: [
        {"task": _task(_rich_pod()), "node": _node_info("gpu-1")},
        {"task": _task(None), "node": _node_info("gpu-2", with_node=False)},
    ],
    VOLCANO_PRIORITIZE: [
        {"task": _task(pod(gpus=2)), "nodes": [_node_info(name) for name in NAMES]},
        {"task": _task(None), "nodes": [_node_info(name, with_node=False) for name in NAMES]},
    ],
}
SEEDS[PRIORITIZE] = SEEDS[FILTER]


def bodies(path: str) -> st.SearchStrategy[bytes]:
    """Mutated requests of ``path`` mostly; random bytes and valid bodies sometimes."""
    seeds = st.sampled_from(SEEDS[path])
    return st.one_of(
        seeds.flatmap(hostile.mutated).map(hostile.encode_json),
        seeds.flatmap(hostile.mutated).map(hostile.encode_json),
        seeds.flatmap(hostile.reshaped).map(hostile.encode_json),
        st.binary(max_size=512),
        seeds.map(hostile.encode_json),
    )


async def post_and_check(rig: Rig, path: str, body: bytes) -> int:
    """POST ``body``: never a 5xx; a refusal is a JSON error and leaves the cluster as it was."""
    before = fingerprint(rig.cluster)
    headers = {"Content-Type": "application/json"}
    resp = await rig.client.post(path, data=io.BytesIO(body), headers=headers)
    text = await resp.text()
    assert resp.status < 500, (resp.status, text[:500], body[:500])
    if resp.status != 200:
        assert resp.status in (400, 413), (resp.status, text[:500])
        assert set(await resp.json()) == {"error"}
        assert fingerprint(rig.cluster) == before, (text[:500], body[:500])
    return resp.status


@pytest.mark.parametrize("path", ENDPOINTS)
@hostile.FUZZ
@given(data=st.data())
async def test_no_body_gets_a_5xx_or_changes_state_when_refused(
    rig: Rig, path: str, data: st.DataObject
):
    status = await post_and_check(rig, path, data.draw(bodies(path)))
    event(f"HTTP {status}")  # shown by --hypothesis-show-statistics


@pytest.mark.slow
@pytest.mark.parametrize("path", ENDPOINTS)
@hostile.FUZZ_SLOW
@given(data=st.data())
async def test_no_body_gets_a_5xx_or_changes_state_when_refused_long_run(
    rig: Rig, path: str, data: st.DataObject
):
    status = await post_and_check(rig, path, data.draw(bodies(path)))
    event(f"HTTP {status}")  # shown by --hypothesis-show-statistics


@pytest.mark.parametrize("path", ENDPOINTS)
async def test_the_seeds_are_accepted(rig: Rig, path: str):
    """The fuzzer starts from requests the endpoint answers, so mutations probe past the
    first check rather than all failing at it."""
    for seed in SEEDS[path]:
        assert await post_and_check(rig, path, hostile.encode_json(seed)) == 200
