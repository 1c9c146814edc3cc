"""A small cluster for the node view's tests: two Nodes in the API emulator, a bound and a
pending pod, and one agent report, on a real coordinator."""

from __future__ import annotations

from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

MIB = rig.MIB
A100 = {"stowage.io/gpu-model": "A100"}


async def two_nodes(api: rig.RecordingKubeApi, start: Start) -> rig.Coordinator:
    """gpu-a (8 CPUs, 64 GiB, 4 A100s) running one pod of 4 CPUs, 8 GiB and one GPU, whose
    agent reported 1 GiB of its free 1 GiB + 64 MiB in 2 MiB blocks and 12.5 % CPU and
    memory stall; cpu-b (16 CPUs, no GPU) with no agent; a pending pod of 6 CPUs and one
    GPU."""
    api.add_node(
        "gpu-a", capacity={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}, labels=A100
    )
    api.add_node("cpu-b", capacity={"cpu": "16", "memory": "64Gi"})
    one_gpu = {"nvidia.com/gpu": "1"}
    api.add_pod(
        "train", "jobs", node="gpu-a", requests={"cpu": "4", "memory": "8Gi", **one_gpu},
        limits=one_gpu,
    )  # fmt: skip
    api.add_pod(
        "wait", "jobs", phase="Pending", requests={"cpu": "6", "memory": "1Gi", **one_gpu},
        limits=one_gpu,
    )  # fmt: skip
    c = await start()
    await rig.eventually(
        lambda: c.services.synced.is_set() and {"jobs/train", "jobs/wait"} <= set(c.cluster.pods),
        "caches synced",
    )
    report = rig.node_report("gpu-a", free_2mib_b=1024 * MIB, cpu_pressure_pct=12.5)
    status, _ = await c.report(report, api.agent_token("gpu-a"))
    assert status == 200
    return c
