"""Pods marked I/O-heavy spread: prioritize ranks nodes by the I/O-heavy pods of the pod's
own namespace already there and by the node's measured I/O first, the policy second — for
kube-scheduler and Volcano alike. A mark counts only against pods of its own namespace.

Scores by hand, MostAllocated for 2 CPUs + 4Gi (see ``test_extender_kube``): node-a 18.75,
node-b 9.375, node-c 4.6875, scaled onto 0-1 over them: 1, 1/3, 0; each I/O-heavy pod of
the namespace on a node costs 2, as does a node fully busy on I/O (in proportion)."""

from __future__ import annotations

import dataclasses
from typing import Any

from coordinator.config import IoSettings, SignalSettings
from coordinator.state.podrequest import PodRequest
from tests.coordinator.extender.conftest import MOST_ALLOCATED, MakeRig, Rig
from tests.coordinator.extender.kubejson import GIB, pod
from tests.coordinator.extender.test_extender_volcano import node_info, task

PRIORITIZE = "/scheduler/prioritize"
VOLCANO = "/volcano/prioritize"
HEAVY = {"stowage.io/io-heavy": "true"}
OFFERED = ["node-c", "node-b", "node-a"]


def bound(name: str, node: str, namespace: str = "ns") -> dict[str, Any]:
    """A running I/O-heavy pod that requests nothing (so MostAllocated stays as it was)."""
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "labels": dict(HEAVY)},
        "spec": {"nodeName": node, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


def request_of_heavy() -> PodRequest:
    return PodRequest("ns/p", 2000, 4 * GIB, 0, 0, io_heavy=True)


async def scores(rig: Rig, the_pod: dict[str, Any]) -> dict[str, int]:
    status, reply = await rig.post(PRIORITIZE, {"Pod": the_pod, "NodeNames": OFFERED})
    assert status == 200
    return {r["Host"]: r["Score"] for r in reply}


async def test_an_io_heavy_pod_avoids_its_namespaces_io_heavy_pods(rig: Rig) -> None:
    rig.cluster.upsert_pod(bound("writer", "node-a"))
    # node-a: 1 − 2 = −1; node-b 1/3 (the best); node-c 0 → ⌊9 × 1/(4/3)⌋ = 6.
    assert await scores(rig, pod(annotations=HEAVY)) == {"node-c": 6, "node-b": 10, "node-a": 0}
    # /debug/explain shows it: 2 × (one such pod + no measured I/O) on node-a and on
    # node-b (where the pod was just assumed), none on node-c.
    heavy = request_of_heavy()
    assert rig.cluster.explain(heavy, "node-a")["io_spread_penalty"] == 2.0
    assert rig.cluster.explain(heavy, "node-b")["io_spread_penalty"] == 2.0
    assert rig.cluster.explain(heavy, "node-c")["io_spread_penalty"] == 0.0
    assert "io_spread_penalty" not in rig.cluster.explain(
        dataclasses.replace(heavy, io_heavy=False), "node-a"
    )
    # Without the mark (the same pod asked again: its own assumption does not count), it
    # packs as before.
    assert await scores(rig, pod()) == {"node-c": 0, "node-b": 3, "node-a": 10}
    # The writer finished: node-a counts nothing against the marked pod any more.
    rig.cluster.remove_pod(bound("writer", "node-a"))
    assert await scores(rig, pod(annotations=HEAVY)) == {"node-c": 0, "node-b": 3, "node-a": 10}


async def test_another_namespaces_marks_push_nothing(rig: Rig) -> None:
    for i in range(3):
        rig.cluster.upsert_pod(bound(f"w{i}", "node-a", namespace="other"))
    unmarked = bound("plain", "node-a")  # the pod's own namespace, but not I/O-heavy
    unmarked["metadata"]["labels"] = {}
    rig.cluster.upsert_pod(unmarked)
    assert await scores(rig, pod(annotations=HEAVY)) == {"node-c": 0, "node-b": 3, "node-a": 10}


async def test_measured_disk_use_and_io_pressure_count(rig: Rig) -> None:
    rig.set_signals("node-a", disks=(("sda", 25.0, 1.0), ("sdb", 5.0, 1.0)))
    # node-a: 1 − 2 × 0.25 = 0.5, still the best; node-b ⌊9 × (1/3)/0.5⌋ = 6.
    assert rig.cluster.explain(request_of_heavy(), "node-a")["io_spread_penalty"] == 0.5
    assert await scores(rig, pod(annotations=HEAVY)) == {"node-c": 0, "node-b": 6, "node-a": 10}
    rig.set_signals("node-a", io_pressure_pct=75.0)
    # node-a: 1 − 1.5 = −0.5; node-c ⌊9 × 0.5/(5/6)⌋ = 5.
    assert await scores(rig, pod(annotations=HEAVY)) == {"node-c": 5, "node-b": 10, "node-a": 0}


async def test_a_burst_spreads_over_its_own_assumptions(rig: Rig) -> None:
    first = await scores(rig, pod(annotations=HEAVY, uid="p1"))
    assert first == {"node-c": 0, "node-b": 3, "node-a": 10}  # assumed on node-a
    # node-a now 37.5 (4 of 8 CPUs, 8 of 32Gi) and one I/O-heavy pod: 1 − 2 = −1;
    # node-b 4.6875/32.8125 = 1/7 the best; node-c ⌊9 × 1/(8/7)⌋ = 7.
    second = await scores(rig, pod(annotations=HEAVY, uid="p2"))
    assert second == {"node-c": 7, "node-b": 10, "node-a": 0}


async def test_volcano_spreads_the_same(rig: Rig) -> None:
    rig.cluster.upsert_pod(bound("writer", "node-a"))
    body = {
        "task": task(pod(annotations=HEAVY), 2000, 4 * GIB),
        "nodes": [node_info(n) for n in OFFERED],
    }
    status, reply = await rig.post(VOLCANO, body)
    assert status == 200
    assert reply["nodeScore"] == {"node-c": 60, "node-b": 100, "node-a": 0}  # assumed on b
    # A second task: node-b holds Volcano's I/O-heavy assumption now (and 18.75 like
    # node-a): both −1, node-c 0 the best.
    second = {**body, "task": {**task(pod(annotations=HEAVY), 2000, 4 * GIB), "UID": "t2"}}
    status, reply = await rig.post(VOLCANO, second)
    assert reply["nodeScore"] == {"node-c": 100, "node-b": 0, "node-a": 0}
    # kube-scheduler's answers count no Volcano assumption: as before either task.
    assert await scores(rig, pod(annotations=HEAVY, uid="k1")) == {
        "node-c": 6, "node-b": 10, "node-a": 0,
    }  # fmt: skip


async def test_spreading_can_be_switched_off(make_rig: MakeRig) -> None:
    io = IoSettings(spread=False)
    settings = dataclasses.replace(MOST_ALLOCATED, signals=SignalSettings(io=io))
    rig = await make_rig(settings)
    rig.cluster.upsert_pod(bound("writer", "node-a"))
    assert await scores(rig, pod(annotations=HEAVY)) == {"node-c": 0, "node-b": 3, "node-a": 10}
