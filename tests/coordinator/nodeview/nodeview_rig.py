"""Small clusters for the node view's tests and the node map's: Nodes and pods in the API
emulator and agent reports posted over HTTP, on a real coordinator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

MIB = rig.MIB
ONE_GPU = {"nvidia.com/gpu": "1"}


async def seeded(
    api: rig.RecordingKubeApi,
    start: Start,
    *,
    gpu_nodes: Mapping[str, tuple[int, str]],
    cpu_nodes: Sequence[str],
    reports: Mapping[str, tuple[int, float]],
    pending: bool = False,
) -> rig.Coordinator:
    """GPU nodes (8 CPUs, 64 GiB, ``name: (GPUs, model)``) and CPU nodes (16 CPUs, 64 GiB);
    the first GPU node runs "jobs/train" (4 CPUs, 8 GiB, one GPU); with ``pending``,
    "jobs/wait" (6 CPUs, 1 GiB, one GPU) waits for a node. Once the coordinator knows the
    pods, each node in ``reports`` (``name: (MiB free in 2 MiB blocks, CPU and memory
    stall %)``) reports once; the report adds 64 MiB free in smaller blocks."""
    for name, (gpus, model) in gpu_nodes.items():
        api.add_node(
            name,
            capacity={"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
            labels={"stowage.io/gpu-model": model},
        )
    for name in cpu_nodes:
        api.add_node(name, capacity={"cpu": "16", "memory": "64Gi"})
    api.add_pod(
        "train", "jobs", node=next(iter(gpu_nodes)),
        requests={"cpu": "4", "memory": "8Gi", **ONE_GPU}, limits=ONE_GPU,
    )  # fmt: skip
    pods = {"jobs/train"}
    if pending:
        api.add_pod(
            "wait", "jobs", phase="Pending", requests={"cpu": "6", "memory": "1Gi", **ONE_GPU},
            limits=ONE_GPU,
        )  # fmt: skip
        pods.add("jobs/wait")
    c = await start()
    await rig.eventually(
        lambda: c.services.synced.is_set() and pods <= set(c.cluster.pods), "caches synced"
    )
    for node, (free_2mib_mib, psi) in reports.items():
        report = rig.node_report(node, free_2mib_b=free_2mib_mib * MIB, cpu_pressure_pct=psi)
        status, _ = await c.report(report, api.agent_token(node))
        assert status == 200
    return c


async def two_nodes(api: rig.RecordingKubeApi, start: Start) -> rig.Coordinator:
    """gpu-a (8 CPUs, 64 GiB, 4 A100s) running one pod of 4 CPUs, 8 GiB and one GPU, whose
    agent reported 1 GiB of its free 1 GiB + 64 MiB in 2 MiB blocks and 12.5 % CPU and
    memory stall; cpu-b (16 CPUs, no GPU) with no agent; a pending pod of 6 CPUs and one
    GPU."""
    return await seeded(
        api,
        start,
        gpu_nodes={"gpu-a": (4, "A100")},
        cpu_nodes=["cpu-b"],
        reports={"gpu-a": (1024, 12.5)},
        pending=True,
    )
