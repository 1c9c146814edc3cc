"""The planner's victim rules end to end: the leader's cycle plans over a live cluster fed
with the objects the API emulator holds, and the executor evicts through the real client
against it. Checkpoint preference, the gang's cost, and no wasted victims: a pending pod
that would still not fit afterwards gets no eviction call at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.state.signals import NodeSignals
from hack.kubeapi import KubeApi
from hack.kubeapi.faults import Fault
from hack.kubeapi.resources import EVENTS
from tests.coordinator.eviction.evictrig import H100, NOW, node, pod
from tests.coordinator.eviction.test_eviction_cycle import CycleRig

HIGH = 10_000
MEDIUM = 1_000


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace("stowage-system")
        yield api


@pytest.fixture
def rig(kube: KubeApi) -> Iterator[CycleRig]:
    """Evicting for real, on gpu-a and gpu-b (8 A100s each)."""
    r = CycleRig(kube, enabled=True)
    r.cluster.upsert_node(node("gpu-b"))
    yield r
    r.close()


def eviction_calls(kube: KubeApi) -> Fault:
    """A probe counting (``seen``) every eviction request that reaches the emulator, dry
    runs included; it changes nothing about the answer."""
    return kube.faults.add(Fault.slow(0.0, method="POST", path=r"/eviction$", times=None))


def want(**fields: Any) -> dict[str, Any]:
    """The pending high-priority pod needing a whole 8-GPU node."""
    return pod("want", **{"gpus": 8, "priority": HIGH, **fields})


def checkpointed(name: str, where: str, seconds_ago: float, **annotations: str) -> dict[str, Any]:
    stamp = {"stowage.io/last-checkpoint": str(NOW - seconds_ago), **annotations}
    return pod(name, node=where, gpus=8, annotations=stamp)


def member(name: str, where: str, gpus: int) -> dict[str, Any]:
    """A member of Volcano PodGroup ns/job, which names no minMember: it needs all."""
    return pod(name, node=where, gpus=gpus, annotations={"scheduling.k8s.io/group-name": "job"})


def evicted_events(kube: KubeApi, name: str) -> int:
    return len(events(kube, name, "Evicted"))


def events(kube: KubeApi, name: str, reason: str) -> list[str]:
    """The messages of the Events about ``name`` with ``reason``."""
    return [
        e["message"]
        for e in kube.store.list(EVENTS, None)[0]
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


# ---------------------------------------------------------------- checkpoints


async def test_the_victim_with_the_recent_checkpoint_is_evicted(rig: CycleRig) -> None:
    """The old one sits on the node the tie-break by name would pick."""
    rig.add(checkpointed("old", "gpu-a", 3600))
    rig.add(checkpointed("fresh", "gpu-b", 60))
    rig.add(want())
    await rig.cycle.run()
    assert not rig.exists("fresh") and rig.exists("old")
    assert "preemption ns/want evicted" in rig.log.lines()[-1]
    assert "ns/fresh=evicted" in rig.log.lines()[-1]


async def test_a_pod_checkpointing_now_is_never_evicted(kube: KubeApi, rig: CycleRig) -> None:
    """It is the only pod a high one may displace (gpu-b holds a medium one)."""
    calls = eviction_calls(kube)
    rig.add(checkpointed("writing", "gpu-a", 10, **{"stowage.io/checkpointing": "true"}))
    rig.add(pod("medium", node="gpu-b", gpus=8, priority=MEDIUM))
    rig.add(want())
    await rig.cycle.run()
    assert rig.exists("writing") and calls.seen == 0
    line = rig.log.lines()[-1]
    assert "preemption ns/want refused" in line and "would still not fit" in line


async def test_any_other_victim_goes_before_one_checkpointing_now(rig: CycleRig) -> None:
    """However much more work the other loses."""
    rig.add(checkpointed("writing", "gpu-a", 10, **{"stowage.io/checkpointing": "true"}))
    rig.add(checkpointed("old", "gpu-b", 7200))
    rig.add(want())
    await rig.cycle.run()
    assert rig.exists("writing") and not rig.exists("old")


# ----------------------------------------------------------------------- gangs


async def test_a_gang_is_spared_when_a_set_without_it_exists(rig: CycleRig) -> None:
    """Evicting g-0 alone frees gpu-a, but drags g-1 and g-2 along: three victims, where
    gpu-b costs two."""
    rig.cluster.upsert_node(node("gpu-c"))
    for obj in (member("g-0", "gpu-a", 8), member("g-1", "gpu-c", 1), member("g-2", "gpu-c", 1)):
        rig.add(obj)
    rig.add(pod("four-1", node="gpu-b", gpus=4))
    rig.add(pod("four-2", node="gpu-b", gpus=4))
    rig.add(want())
    await rig.cycle.run()
    assert not rig.exists("four-1") and not rig.exists("four-2")
    assert all(rig.exists(m) for m in ("g-0", "g-1", "g-2"))


async def test_when_the_gang_goes_every_member_is_evicted(kube: KubeApi, rig: CycleRig) -> None:
    """gpu-b holds a medium pod a high one may not displace: the gang is the only way,
    and its member on another node than the plan's goes too."""
    rig.cluster.upsert_node(node("gpu-c"))
    for obj in (member("g-0", "gpu-a", 8), member("g-1", "gpu-c", 1), member("g-2", "gpu-c", 1)):
        rig.add(obj)
    rig.add(pod("medium", node="gpu-b", gpus=8, priority=MEDIUM))
    rig.add(want())
    await rig.cycle.run()
    assert not any(rig.exists(m) for m in ("g-0", "g-1", "g-2"))
    assert rig.exists("medium")
    assert all(evicted_events(kube, m) == 1 for m in ("g-0", "g-1", "g-2"))
    line = rig.log.lines()[-1]
    assert all(f"ns/{m}=evicted" in line for m in ("g-0", "g-1", "g-2"))


# -------------------------------------------------------------- wasted victims


@pytest.mark.parametrize(
    ("wanted", "why"),
    [
        (want(annotations={"stowage.io/gpu-models": H100}), "is not one of " + H100),
        (want(gpus=16), "8 GPUs on the node < 16 requested"),
        (want(memory="600Gi"), "would still not fit after evicting every allowed pod"),
    ],
    ids=["wrong-gpu-model", "too-few-gpus", "too-little-memory"],
)
async def test_no_eviction_reaches_the_api_when_the_pod_would_still_not_fit(
    kube: KubeApi, rig: CycleRig, wanted: dict[str, Any], why: str
) -> None:
    calls = eviction_calls(kube)
    for where in ("gpu-a", "gpu-b"):
        rig.add(pod(f"low-{where}", node=where, gpus=8))
    rig.add(wanted)
    await rig.cycle.run()
    assert calls.seen == 0
    assert all(rig.exists(f"low-{where}") for where in ("gpu-a", "gpu-b"))
    line = rig.log.lines()[-1]
    assert "preemption ns/want refused" in line and why in line
    (told,) = events(kube, "want", "EvictionNotPlanned")
    assert told.startswith("preemption: ") and why in told
    await rig.cycle.run()  # the same refusal again: told once, not every cycle
    assert len(events(kube, "want", "EvictionNotPlanned")) == 1


async def test_no_eviction_where_stowage_filter_would_still_refuse(
    kube: KubeApi, rig: CycleRig
) -> None:
    """Every node is short of contiguous memory: evicting frees GPUs, not contiguity, so
    the filter would go on refusing the pod everywhere."""
    calls = eviction_calls(kube)
    state = rig.cluster.state
    assert state is not None
    for where in ("gpu-a", "gpu-b"):
        rig.add(pod(f"low-{where}", node=where, gpus=8))
        short = NodeSignals(measured_at=rig.clock.wall(), contiguous_2mib_b=2**20)
        rig.cluster.signals[where] = short
        rig.cluster.freshness.receive(where, rig.clock.monotonic(), short.measured_at)
        state.set_signals(state.index[where], short)
    rig.add(want(annotations={"stowage.io/needs-contiguous-memory": "1Gi"}))
    await rig.cycle.run()
    assert calls.seen == 0
    assert all(rig.exists(f"low-{where}") for where in ("gpu-a", "gpu-b"))
    line = rig.log.lines()[-1]
    assert "preemption ns/want refused" in line and "would still not fit" in line
