"""``make run ARGS="--cluster real"``: the same trace on the real control plane, scheduled by
the real kube-scheduler — once with the shipped configuration without its extender, once
with Stowage as the extender.

The control plane (``hack.cluster``: etcd, kube-apiserver, kube-controller-manager, kwok
for the nodes' kubelets) is built on first use (minutes) and started in the run's
directory; the shipped RBAC is applied, the coordinator runs as its ServiceAccount and
kube-scheduler as ``stowage-scheduler``'s. Each run creates every pod first, then starts
kube-scheduler and waits until each pod is bound or found unschedulable. The summary sets
the two side by side; a GPU share kube-scheduler alone cannot see (``stowage.io/gpu-milli``)
counts as overcommitted where no GPU of its node had room for it.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kubernetes import client, config

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.cluster import coordinator, manifests, scheduling
from hack.cluster.build import KUBERNETES_RELEASE, ensure_built
from hack.cluster.controlplane import running
from hack.sim import arrivals

POOL: Final = {scheduling.POOL_LABEL: "demo"}
SETTLE_S: Final = 600.0
COORDINATOR_SETTINGS: Final = {"kube": {"namespace": coordinator.NAMESPACE}}
RUNS: Final = (("demo-plain", "kube-scheduler alone"), ("demo-stowage", "with Stowage"))


def run(
    args: argparse.Namespace,
    nodes: Sequence[NodeSpec],
    workload: Sequence[PodRequest],
    arrived_pct: int,
) -> int:
    """The demo on the real control plane; 0 when both runs finished."""
    sequence = arrivals.build(workload, nodes, args.seed, arrived_pct / 100).pods
    pods = sequence[: args.pods] if args.pods else sequence
    out = args.out or Path(tempfile.mkdtemp(prefix="stowage-demo-real-"))
    bin_dir = ensure_built()
    with running(out / "cluster", bin_dir) as plane:
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(plane.kubeconfig)))
        plane.apply(
            manifests.rbac(manifests.COORDINATOR_AND_AGENT)
            + manifests.rbac(manifests.SECOND_SCHEDULER)
        )
        scheduling.create_nodes(core, nodes, POOL)
        scheduling.wait_ready(core, [n.name for n in nodes], timeout_s=120)
        ns = coordinator.NAMESPACE
        as_coordinator = plane.kubeconfig_for(
            coordinator.SERVICE_ACCOUNT, ns, out / "coordinator.kubeconfig"
        )
        as_scheduler = plane.kubeconfig_for("stowage-scheduler", ns, out / "scheduler.kubeconfig")
        print(
            f"{len(nodes)} GPU nodes of the openb trace ({sum(n.gpus for n in nodes)} GPUs)"
            f" as kwok nodes of a real Kubernetes {KUBERNETES_RELEASE} control plane;"
            f" {len(pods)} trace pods"
            f" (seed {args.seed}), scheduled by the real kube-scheduler twice",
            flush=True,
        )
        results = {}
        with coordinator.running(plane, as_coordinator, COORDINATOR_SETTINGS) as (_, url):
            for namespace, label in RUNS:
                core.create_namespace({"metadata": {"name": namespace}})
                scheduling.wait_default_service_account(core, namespace)
                extender = url if namespace == "demo-stowage" else None
                print(
                    f"  {label}: creating {len(pods)} pods, then starting kube-scheduler ...",
                    flush=True,
                )
                settled = scheduling.schedule(
                    plane,
                    core,
                    namespace,
                    scheduling.scheduler_config(extender_url=extender),
                    pods,
                    kubeconfig=as_scheduler,
                    node_selector=POOL,
                    timeout_s=SETTLE_S,
                )
                results[label] = (settled, scheduling.gpu_use(nodes, pods, settled.bound))
            _summary(results, len(pods))
            print(f"\nfiles (kubeconfig, every program's log): {out}")
            if args.keep:
                with_stowage = scheduling.scheduler_config(extender_url=url)
                plane.start_scheduler(with_stowage, kubeconfig=as_scheduler)
                print(
                    "\n--keep: the control plane, the coordinator and kube-scheduler with Stowage"
                    " stay up; pods with schedulerName stowage-scheduler are placed by them:"
                    f"\n  kubectl --kubeconfig {plane.kubeconfig} get nodes\nCtrl-C stops them.",
                    flush=True,
                )
                threading.Event().wait()  # until Ctrl-C (KeyboardInterrupt) or SIGTERM
    return 0


def _summary(results: dict[str, tuple[scheduling.Settled, scheduling.GpuUse]], pods: int) -> None:
    rows = [
        ("pods bound / pending", lambda s, g: f"{len(s.bound)} / {len(s.pending)}"),
        ("GPUs idle at the end", lambda s, g: f"{g.idle} of {g.total} ({g.idle_pct:.1f} %)"),
        ("GPU allocated", lambda s, g: f"{g.allocated_milli / 1000:.1f}"),
        ("GPU shares overcommitted", lambda s, g: str(g.overcommitted)),
        ("seconds to the last binding", lambda s, g: f"{s.seconds:.1f}"),
    ]
    labels = list(results)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'':{width}}  " + "  ".join(f"{label:>22}" for label in labels))
    for name, cell in rows:
        print(f"{name:{width}}  " + "  ".join(f"{cell(*results[label]):>22}" for label in labels))
    print(f"({pods} pods; an overcommitted share is a pod placed where no GPU had room for it)")
