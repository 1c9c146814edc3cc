"""kube-scheduler's extender over HTTP: the request bodies it sends (in the current
capitalised casing and the legacy lower-case one) and the exact replies it reads.

Scores use kube-scheduler's MostAllocated (cpu and memory, weight 1) so they can be
worked out by hand; see ``MOST_ALLOCATED`` in the conftest."""

from __future__ import annotations

import json
from typing import Any

import pytest

from common.errors import ConfigError
from coordinator.config import CoordinatorSettings, ExtenderSettings, PolicySettings
from coordinator.extender import kube
from coordinator.extender.handling import MAX_NODES_PER_REQUEST
from tests.coordinator.extender.conftest import MakeRig, Rig
from tests.coordinator.extender.kubejson import MIB, NODES, POD_UID, node, pod

FILTER = "/scheduler/filter"
PRIORITIZE = "/scheduler/prioritize"
PREEMPT = "/scheduler/preempt"

# ------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    "keys", [("Pod", "Nodes", "NodeNames"), ("pod", "nodes", "nodenames")], ids=["go", "legacy"]
)
async def test_filter_answers_names_and_both_failure_maps(rig: Rig, keys: tuple[str, ...]):
    pod_key, nodes_key, names_key = keys
    body = {
        pod_key: pod("4", "8Gi", gpus=2),
        nodes_key: None,
        names_key: ["node-a", "gpu-1", "gpu-2"],
    }
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply == {
        "Nodes": None,
        "NodeNames": ["gpu-1"],
        "FailedNodes": {
            "gpu-2": "CPU 2000m free < 4000m requested",
            "node-a": "0 GPUs on the node < 2 requested",  # also here, for clients < 1.21
        },
        "FailedAndUnresolvableNodes": {"node-a": "0 GPUs on the node < 2 requested"},
        "Error": "",
    }


async def test_filter_keeps_the_offered_order_and_passes_nodes_it_does_not_know(rig: Rig):
    body = {"Pod": pod(), "Nodes": None, "NodeNames": ["node-c", "node-new", "node-a"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["NodeNames"] == ["node-c", "node-new", "node-a"]
    assert reply["FailedNodes"] == {}
    assert "node-new" not in rig.cluster.specs


async def test_a_reported_node_fails_filter_for_memory_contiguity(rig: Rig):
    """node-b's agent measured only 100 MiB free in 2 MiB blocks; node-a has no report
    (unknown), so only capacity applies to it."""
    rig.set_signals("node-b", contiguous_2mib_b=100 * MIB)
    contiguous = pod(annotations={"stowage.io/needs-contiguous-memory": "true"})
    body = {"Pod": contiguous, "Nodes": None, "NodeNames": ["node-a", "node-b"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply == {
        "Nodes": None,
        "NodeNames": ["node-a"],
        "FailedNodes": {"node-b": "memory contiguity 100 MiB < 512 MiB needed"},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    # the same node passes a pod that does not need contiguous memory
    _, plain = await rig.post(FILTER, {"Pod": pod(), "NodeNames": ["node-a", "node-b"]})
    assert plain["NodeNames"] == ["node-a", "node-b"]


async def test_filter_in_nodes_mode_judges_nodes_as_the_watch_has_them(rig: Rig):
    """Node objects are the request's view only: a node the watch does not have passes
    (nothing known against it) and is not stored; the passing objects are echoed."""
    big, tiny = node("new-big", "64", "256Gi"), node("new-tiny", "1", "2Gi")
    small = node("node-b", "1", "2Gi")  # node-b as the caller claims it: 1 CPU
    body = {
        "Pod": pod("12"),
        "Nodes": {"metadata": {}, "items": [big, tiny, NODES["node-a"], small]},
        "NodeNames": None,
    }
    before = rig.snapshot()
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply == {
        "Nodes": {"metadata": {}, "items": [big, tiny, small]},
        "NodeNames": None,
        "FailedNodes": {"node-a": "CPU 8000m free < 12000m requested"},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    assert rig.snapshot() == before
    assert "new-big" not in rig.cluster.specs and "new-tiny" not in rig.cluster.specs
    assert rig.cluster.specs["node-b"].cpu_m == 16000


async def test_nodes_mode_never_changes_a_known_node(rig: Rig):
    """A caller cannot shrink a node, nor poison its spec so later updates fail."""
    resized = node("node-a", "1", "8Gi")
    body = {"Pod": pod(), "Nodes": {"metadata": {}, "items": [resized, NODES["node-b"]]}}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["Nodes"]["items"] == [resized, NODES["node-b"]]  # node-a has 8 CPUs
    assert rig.cluster.specs["node-a"].cpu_m == 8000
    poisoned = node("node-a", "-1", "8Gi")
    await rig.assert_refused(
        FILTER,
        {"Pod": pod(), "Nodes": {"items": [poisoned]}},
        "Nodes.items[0]: node node-a: status.allocatable.cpu: negative",
    )
    rig.cluster.upsert_node(node("node-a", "4", "32Gi"))  # the watch's word still counts
    assert rig.cluster.specs["node-a"].cpu_m == 4000


async def test_the_default_policy_places_cpu_pods_next_to_free_gpus(make_rig: MakeRig):
    """A CPU-only pod is never left pending beside a GPU node's free CPU unless asked for."""
    rig = await make_rig(CoordinatorSettings(extender=ExtenderSettings(pick_in_filter=False)))
    body = {"Pod": pod(), "Nodes": None, "NodeNames": ["gpu-1", "node-a"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["NodeNames"] == ["gpu-1", "node-a"]
    assert reply["FailedNodes"] == {}


async def test_reserving_gpu_cpu_keeps_cpu_pods_off_gpu_nodes(make_rig: MakeRig):
    rig = await make_rig(CoordinatorSettings(policy=PolicySettings(args={"reserve_gpu_cpu": True})))
    body = {"Pod": pod(), "Nodes": None, "NodeNames": ["gpu-1", "node-a"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["NodeNames"] == ["node-a"]
    assert reply["FailedNodes"] == {"gpu-1": "kept free for the node's GPU pods (CPU-only pod)"}


async def test_filter_answers_before_the_caches_are_synced(rig: Rig):
    assert not rig.services.synced.is_set()
    body = {"Pod": pod("12"), "NodeNames": ["node-a", "node-b"]}
    status, early = await rig.post(FILTER, body)
    assert status == 200
    assert early["NodeNames"] == ["node-b"]
    assert early["FailedNodes"] == {"node-a": "CPU 8000m free < 12000m requested"}
    rig.services.synced.set()
    assert await rig.post(FILTER, body) == (200, early)


# --------------------------------------------------------------- prioritize


@pytest.mark.parametrize(
    "keys", [("Pod", "Nodes", "NodeNames"), ("pod", "nodes", "nodenames")], ids=["go", "legacy"]
)
async def test_prioritize_scores_every_node_0_to_10_and_assumes_the_pod_on_the_best(
    rig: Rig, keys: tuple[str, ...]
):
    """MostAllocated for 2 CPUs + 4Gi: node-a (25 % + 12.5 %)/2 = 18, node-b 9,
    node-c 4 → the best 10, the rest 9 × (s − 4)/(18 − 4) truncated: 3 and 0."""
    pod_key, nodes_key, names_key = keys
    body = {pod_key: pod(), nodes_key: None, names_key: ["node-c", "node-b", "node-a"]}
    resp = await rig.client.post(PRIORITIZE, json=body)
    assert resp.status == 200
    assert json.loads(await resp.text(), object_pairs_hook=list) == [  # keys in Go's order
        [("Host", "node-c"), ("Score", 0)],
        [("Host", "node-b"), ("Score", 3)],
        [("Host", "node-a"), ("Score", 10)],
    ]
    held = rig.cluster.held[POD_UID]
    assert held.node == "node-a"
    assert held.assumed_until == rig.clock.monotonic() + 30.0
    assert rig.cluster.state is not None
    assert rig.cluster.state.cpu_free[rig.cluster.state.index["node-a"]] == 6000
    # Asked again (a retry), the pod's own assumption on node-a does not count against
    # it: the same scores, and it is assumed there once.
    again = await rig.client.post(PRIORITIZE, json=body)
    assert json.loads(await again.text(), object_pairs_hook=list)[1] == [
        ("Host", "node-b"),
        ("Score", 3),
    ]
    assert rig.cluster.state.cpu_free[rig.cluster.state.index["node-a"]] == 6000


async def test_a_filter_leaving_one_node_assumes_the_pod_there(rig: Rig):
    """kube-scheduler binds to the only feasible node without calling prioritize: the
    next pod's filter must already see it there. The pod takes all of gpu-1."""
    body = {"Pod": pod("60", "8Gi", gpus=8), "NodeNames": ["node-a", "gpu-1", "gpu-2"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["NodeNames"] == ["gpu-1"]
    held = rig.cluster.held[POD_UID]
    assert held.node == "gpu-1" and held.assumed_until is not None
    # kube-scheduler asking again about the same pod (a retry) is not refused by its own
    # assumption: gpu-1 still passes, and the pod is assumed there once.
    assert (await rig.post(FILTER, body))[1]["NodeNames"] == ["gpu-1"]
    assert rig.cluster.holdings.assumed_count == 1


async def test_a_filter_leaving_several_nodes_assumes_nothing(rig: Rig):
    body = {"Pod": pod(), "NodeNames": ["node-a", "node-b"]}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert reply["NodeNames"] == ["node-a", "node-b"]
    assert rig.cluster.held == {}


async def test_unknown_nodes_score_0_and_nothing_is_assumed_without_a_10(rig: Rig):
    body = {"Pod": pod(), "NodeNames": ["node-x", "node-y"]}
    status, reply = await rig.post(PRIORITIZE, body)
    assert status == 200
    assert reply == [{"Host": "node-x", "Score": 0}, {"Host": "node-y", "Score": 0}]
    assert rig.cluster.held == {}


async def test_a_pod_without_uid_is_scored_but_not_assumed(rig: Rig):
    body = {"Pod": pod(uid=""), "NodeNames": ["node-b", "node-a"]}
    status, reply = await rig.post(PRIORITIZE, body)
    assert status == 200
    assert reply == [{"Host": "node-b", "Score": 0}, {"Host": "node-a", "Score": 10}]
    assert rig.cluster.held == {}


async def test_prioritize_in_nodes_mode_scores_nodes_the_watch_lacks_0(rig: Rig):
    """new-m is not in the watch: 0, and nothing is assumed on it; node-b is the best
    node offered that we know."""
    fresh = node("new-m", "4", "16Gi")
    body = {"Pod": pod(), "Nodes": {"metadata": {}, "items": [fresh, NODES["node-b"]]}}
    status, reply = await rig.post(PRIORITIZE, body)
    assert status == 200
    assert reply == [{"Host": "new-m", "Score": 0}, {"Host": "node-b", "Score": 10}]
    assert rig.cluster.held[POD_UID].node == "node-b"
    assert "new-m" not in rig.cluster.specs


# ------------------------------------------------------------------ preempt


async def test_preempt_drops_nodes_it_does_not_know_and_unknown_victims(rig: Rig):
    """A node the Node watch does not have is dropped, its victims never passed on
    unchecked (PDB-protected ones included: NumPDBViolations 1); on a known node, pods
    the pod watch does not have are never victims."""
    before = rig.snapshot()
    body = {
        "Pod": pod(),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "node-a": {"Pods": [{"UID": "c0ffee"}], "NumPDBViolations": 0},
            "node-x": {"Pods": [{"UID": "d00d"}, {"UID": "beef"}], "NumPDBViolations": 1},
        },
    }
    status, reply = await rig.post(PREEMPT, body)
    assert status == 200
    assert reply == {"NodeNameToMetaVictims": {}}
    assert rig.snapshot() == before


async def test_preempt_reads_legacy_keys_and_full_victims(rig: Rig):
    """Both forms are read (the wire tests check the decoding itself); unknown nodes'
    victims go nowhere in either."""
    legacy = {
        "pod": pod(),
        "nodeNameToMetaVictims": {"node-q": {"pods": [{"uid": "c0ffee"}], "numPDBViolations": 2}},
    }
    assert await rig.post(PREEMPT, legacy) == (200, {"NodeNameToMetaVictims": {}})
    full = {
        "Pod": pod(),
        "NodeNameToVictims": {
            "node-r": {"Pods": [pod(name="v", uid="victim-1")], "NumPDBViolations": 1}
        },
        "NodeNameToMetaVictims": None,
    }
    assert await rig.post(PREEMPT, full) == (200, {"NodeNameToMetaVictims": {}})


# ---------------------------------------------------------- bad requests

BAD_POD = pod(cpu="lots")


@pytest.mark.parametrize("path", [FILTER, PRIORITIZE])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "body is not JSON: "),
        (b'{"Pod": {}, "NodeNames": [], "x": NaN}', "body is not JSON: "),
        ([1, 2], "body: expected an object, got array"),
        ({"NodeNames": ["node-a"]}, "body: no Pod"),
        ({"Pod": "p", "NodeNames": ["node-a"]}, "body.Pod: expected an object, got string"),
        ({"Pod": pod(), "NodeNames": "node-a"}, "NodeNames: expected an array, got string"),
        ({"Pod": pod(), "NodeNames": [1]}, "NodeNames[0]: expected a string, got number"),
        ({"Pod": pod()}, "body: neither NodeNames nor Nodes given"),
        (
            {"Pod": BAD_POD, "NodeNames": ["node-a"]},
            "Pod: pod ns/p: invalid quantity 'lots'",
        ),
        (
            {"Pod": {"metadata": {"name": "p"}, "spec": {"containers": "main"}}, "NodeNames": []},
            "Pod: not a Kubernetes Pod (",
        ),
        (
            {"Pod": BAD_POD, "Nodes": {"items": [node("new-1", "8", "8Gi")]}},
            "Pod: pod ns/p: invalid quantity 'lots'",
        ),
        (
            {
                "Pod": pod(),
                "Nodes": {"items": [node("new-1", "8", "8Gi"), node("new-2", "x", "8Gi")]},
            },
            "Nodes.items[1]: node new-2: status.allocatable: invalid quantity 'x'",
        ),
        (
            {"Pod": pod(), "Nodes": {"items": [node("node-a", "8", "-1Gi")]}},
            "Nodes.items[0]: node node-a: status.allocatable.memory: negative",
        ),
        (
            {"Pod": pod(), "Nodes": {"items": [node("new-1", "8", "8Gi", gpus=-2)]}},
            "Nodes.items[0]: node new-1: status.allocatable.nvidia.com/gpu: negative",
        ),
        (
            {"Pod": pod(), "Nodes": {"items": [node("gpu-1", "8", "8Gi", gpus=10**9)]}},
            "Nodes.items[0]: node gpu-1: status.allocatable.nvidia.com/gpu: 1000000000"
            " devices, more than the 256 a node can have",
        ),
        (
            {"Pod": pod(), "Nodes": {"items": [{"metadata": {"name": "n"}, "status": [1]}]}},
            "Nodes.items[0]: not a Kubernetes Node (",
        ),
        (
            {"Pod": pod(), "NodeNames": ["n"] * (MAX_NODES_PER_REQUEST + 1)},
            f"NodeNames: {MAX_NODES_PER_REQUEST + 1} nodes, more than {MAX_NODES_PER_REQUEST}",
        ),
        (
            {"Pod": pod(), "Nodes": {"items": [NODES["node-a"]] * (MAX_NODES_PER_REQUEST + 1)}},
            f"Nodes.items: {MAX_NODES_PER_REQUEST + 1} nodes, more than {MAX_NODES_PER_REQUEST}",
        ),
    ],
)
async def test_malformed_requests_are_400_with_a_reason_and_change_nothing(
    rig: Rig, path: str, body: Any, message: str
):
    await rig.assert_refused(path, body, message)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"NodeNameToMetaVictims": {}}, "body: no Pod"),
        (
            {"Pod": BAD_POD, "NodeNameToMetaVictims": {}},
            "Pod: pod ns/p: invalid quantity 'lots': expected a number with an optional suffix",
        ),
        (
            {"Pod": pod(), "NodeNameToMetaVictims": {"node-a": {"Pods": "c0ffee"}}},
            "NodeNameToMetaVictims['node-a'].Pods: expected an array, got string",
        ),
    ],
)
async def test_malformed_preemption_requests_are_400(rig: Rig, body: Any, message: str):
    status, reply = await rig.post(PREEMPT, body)
    assert (status, reply) == (400, {"error": message})


async def test_bodies_over_the_cap_are_413_with_or_without_a_length(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(kube, "MAX_BODY_B", 1000)
    body = b'{"Pod": {}, "NodeNames": ["' + b"n" * 2000 + b'"]}'
    resp = await rig.client.post(FILTER, data=body)
    assert resp.status == 413
    assert await resp.json() == {"error": f"body of {len(body)} bytes exceeds 1000 bytes"}

    async def chunked():  # no Content-Length: the cap applies while reading
        for i in range(0, len(body), 100):
            yield body[i : i + 100]

    resp = await rig.client.post(PRIORITIZE, data=chunked())
    assert resp.status == 413
    assert rig.cluster.held == {}


async def test_nodes_mode_bodies_larger_than_aiohttps_default_cap_are_read(rig: Rig):
    """The app's client_max_size (1 MiB by default) is for agent reports, not for us."""
    padded = [node(f"new-{i}", "8", "32Gi") for i in range(3)]
    for n in padded:
        n["metadata"]["annotations"] = {"padding": "x" * 700_000}
    body = {"Pod": pod(), "Nodes": {"metadata": {}, "items": padded}}
    status, reply = await rig.post(FILTER, body)
    assert status == 200
    assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["new-0", "new-1", "new-2"]


async def test_every_verb_is_timed_bad_requests_included(rig: Rig):
    await rig.post(FILTER, {"Pod": pod(), "NodeNames": ["node-a"]})
    await rig.post(FILTER, b"nope")
    await rig.post(PRIORITIZE, {"Pod": pod(), "NodeNames": ["node-a"]})
    await rig.post(PREEMPT, {"Pod": pod(), "NodeNameToMetaVictims": {}})
    assert rig.requests_seen("filter") == 2
    assert rig.requests_seen("prioritize") == 1
    assert rig.requests_seen("preempt") == 1


async def test_only_post_is_served(rig: Rig):
    for path in (FILTER, PRIORITIZE, PREEMPT):
        assert (await rig.client.get(path)).status == 405


@pytest.mark.parametrize("path", ["/scheduler/filter", "/scheduler/prioritize"])
async def test_the_request_cap_is_the_setting(make_rig: MakeRig, path: str):
    """``extender.max_nodes_per_request``: as many names as it says are judged, one more
    is refused, in either node mode; Volcano's prioritize is held to it too."""
    settings = CoordinatorSettings(extender=ExtenderSettings(max_nodes_per_request=3))
    rig = await make_rig(settings)
    status, _ = await rig.post(path, {"Pod": pod(), "NodeNames": ["node-a"] * 3})
    assert status == 200
    await rig.assert_refused(
        path, {"Pod": pod(), "NodeNames": ["node-a"] * 4}, "NodeNames: 4 nodes, more than 3"
    )
    items = {"items": [NODES["node-a"]] * 4}
    await rig.assert_refused(path, {"Pod": pod(), "Nodes": items}, "Nodes.items: 4 nodes")
    task = {"task": {"Pod": pod()}, "nodes": [{"Name": "node-a"}] * 4}
    await rig.assert_refused("/volcano/prioritize", task, "nodes: 4 nodes, more than 3")


@pytest.mark.parametrize("most", [0, 100_001])
def test_a_request_cap_out_of_range_is_refused(most: int):
    with pytest.raises(ConfigError, match="extender.max_nodes_per_request"):
        ExtenderSettings(max_nodes_per_request=most)
