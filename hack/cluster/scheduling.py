"""A trace's pods scheduled by the real kube-scheduler on kwok nodes, with or without
Stowage as its extender: what the real-cluster tests and the scheduling benchmark share.

* :func:`scheduler_config` is a shipped ``KubeSchedulerConfiguration`` of
  ``daemonset/scheduler/`` as an operator deploys it, with only what must change on one
  machine changed: the extender's URL points at a coordinator on 127.0.0.1 and, for the
  mutual-TLS variant, the certificate paths at files written here. ``extender=False``
  removes the extenders and nothing else, so two runs differ only in Stowage.
* :func:`create_nodes` and :func:`create_pods` make the trace's nodes and pods API
  objects (``hack.demo.workload`` says how a trace row becomes one).
* :func:`settle` waits until every pod is bound or told unschedulable, and
  :func:`gpu_use` says what the placement made of the GPUs, judged independently of
  Stowage's code: a node's GPU-share pods are packed onto its free GPUs first-fit
  decreasing, and what does not fit is *overcommitted* (a scheduler that cannot see
  shares put it there).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import yaml

from coordinator.state.cluster import MILLI_PER_GPU, NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.cluster.controlplane import ControlPlane
from hack.demo.schedcache import gpu_request
from hack.demo.workload import node_fields, pod_object
from hack.waiting import until

REPO: Final = Path(__file__).resolve().parents[2]
SCHEDULER_CONFIGS: Final = REPO / "daemonset" / "scheduler"
POOL_LABEL: Final = "stowage.io/test-pool"
CREATORS: Final = 4
"""Creations in flight at once (the client's connection pool holds four)."""


def scheduler_config(
    variant: str = "v1",
    *,
    extender_url: str | None,
    tls_files: Mapping[str, Path] | None = None,
    leader_elect: bool = True,
) -> dict[str, Any]:
    """The shipped config of ``daemonset/scheduler/<variant>/``; ``extender_url`` (e.g.
    ``http://127.0.0.1:8080``) replaces the scheme, host and port of every extender's
    ``urlPrefix`` (its path stays), None removes the extenders. ``tls_files`` maps
    ``caFile``/``certFile``/``keyFile`` to local paths for the ``-mtls`` variants."""
    config = yaml.safe_load(
        (SCHEDULER_CONFIGS / variant / "kube-scheduler-config.yaml").read_text()
    )
    config = copy.deepcopy(config)
    if extender_url is None:
        config.pop("extenders", None)
    for extender in config.get("extenders", ()):
        path = "/" + extender["urlPrefix"].split("://", 1)[1].split("/", 1)[1]
        extender["urlPrefix"] = extender_url.rstrip("/") + path
        if "tlsConfig" in extender:
            if tls_files is None:
                raise ValueError(f"{variant}: its extender speaks TLS; pass tls_files")
            extender["tlsConfig"].update({k: str(v) for k, v in tls_files.items()})
    config.setdefault("leaderElection", {})["leaderElect"] = leader_elect
    return config


def create_nodes(core: Any, specs: Sequence[NodeSpec], labels: Mapping[str, str]) -> None:
    """The nodes as API objects (kwok keeps them Ready), each with ``labels`` added, a
    few requests at a time (5,000 nodes one by one took most of a benchmark's 15 minutes
    of setup)."""
    bodies = []
    for spec in specs:
        fields = node_fields(spec)
        bodies.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": spec.name,
                    "labels": {"kubernetes.io/hostname": spec.name, **fields["labels"], **labels},
                },
                "status": {"capacity": fields["capacity"], "allocatable": fields["capacity"]},
            }
        )
    _create_all(core.create_node, bodies)


def _create_all(create: Any, bodies: Sequence[Mapping[str, Any]]) -> None:
    """``create(body)`` for every body, :data:`CREATORS` in flight at once; the answers
    are not made into the client's models (``_preload_content=False``), which cost this
    process more CPU than the API server spent storing the objects. A refused creation
    raises, as a sequential loop would."""
    with ThreadPoolExecutor(CREATORS) as pool:
        for response in pool.map(lambda body: create(body, _preload_content=False), bodies):
            response.drain_conn()
            response.release_conn()


def create_pods(
    core: Any, namespace: str, pods: Iterable[PodRequest], node_selector: Mapping[str, str]
) -> int:
    """The pods as a user would create them for ``stowage-scheduler``, kept to the nodes
    ``node_selector`` picks (a few requests at a time: a thousand pods one by one take
    longer than scheduling them); returns how many."""
    bodies = []
    for pod in pods:
        body = pod_object(pod, namespace)
        body["metadata"]["name"] = _dns_name(pod.name)
        body["spec"]["nodeSelector"] = dict(node_selector)
        body["spec"]["terminationGracePeriodSeconds"] = 0
        bodies.append(body)
    _create_all(lambda body, **kw: core.create_namespaced_pod(namespace, body, **kw), bodies)
    return len(bodies)


def wait_ready(core: Any, names: Iterable[str], timeout_s: float = 60.0) -> None:
    """Until every named node is Ready and has lost its not-ready taint (kwok's
    node-initialize stage does both)."""
    wanted = set(names)

    def ready() -> bool:
        nodes = _listed(core.list_node(_preload_content=False))
        found = {n["metadata"]["name"]: n for n in nodes if n["metadata"]["name"] in wanted}
        return len(found) == len(wanted) and all(_node_ready(n) for n in found.values())

    until(ready, f"{len(wanted)} nodes Ready", timeout_s)


def _listed(response: Any) -> list[dict[str, Any]]:
    """The items of a list the client was told not to turn into its models
    (``_preload_content=False``), as the API server sent them. These waits list up to
    thousands of pods five times a second: made into models, a list of 1,370 pending pods
    cost this process 0.63–0.77 s of CPU, as JSON 0.06–0.18 s — CPU that the scheduler
    under test and its API server, on the same few cores, went without."""
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def _node_ready(node: Mapping[str, Any]) -> bool:
    status, spec = node.get("status") or {}, node.get("spec") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or ()}
    taints = {t["key"] for t in spec.get("taints") or ()}
    return conditions.get("Ready") == "True" and "node.kubernetes.io/not-ready" not in taints


def wait_default_service_account(core: Any, namespace: str) -> None:
    """Until the controller manager has given a new namespace its ``default``
    ServiceAccount (pods are refused before)."""

    def found() -> bool:
        names = core.list_namespaced_service_account(namespace).items
        return any(sa.metadata.name == "default" for sa in names)

    until(found, f"the default ServiceAccount of {namespace}")


def _dns_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "-" else "-" for c in name.lower()).strip("-")
    return cleaned[:63].rstrip("-")


@dataclass(frozen=True)
class Settled:
    """Where each pod went (name → node), which stayed pending, and how long it took
    from the first look to the last binding."""

    bound: dict[str, str]
    pending: tuple[str, ...]
    seconds: float
    scheduler_log: Path | None = None
    """kube-scheduler's log, where :func:`schedule` ran it (:func:`skipped_filters`)."""


def settle(
    core: Any, namespace: str, expected: int, timeout_s: float, quiet_s: float = 3.0
) -> Settled:
    """Wait until each of the ``expected`` pods is bound or has been found unschedulable
    (``PodScheduled=False``, reason ``Unschedulable``), and nothing changed for
    ``quiet_s``; :class:`TimeoutError` after ``timeout_s``."""
    started = time.monotonic()
    deadline = started + timeout_s
    last: tuple[int, int] | None = None
    last_change = started
    last_bound_at = started
    while True:
        pods = _listed(core.list_namespaced_pod(namespace, _preload_content=False))
        bound = {p["metadata"]["name"]: node for p in pods if (node := _node_of(p))}
        unschedulable = tuple(
            sorted(p["metadata"]["name"] for p in pods if not _node_of(p) and _unschedulable(p))
        )
        now = time.monotonic()
        seen = (len(bound), len(unschedulable))
        if seen != last:
            if last is None or seen[0] != last[0]:
                last_bound_at = now
            last, last_change = seen, now
        if (
            len(pods) >= expected
            and len(bound) + len(unschedulable) >= expected
            and now - last_change >= quiet_s
        ):
            return Settled(bound, unschedulable, last_bound_at - started)
        if now > deadline:
            raise TimeoutError(
                f"after {timeout_s:g} s: {len(bound)} bound,"
                f" {len(unschedulable)} unschedulable of {expected}"
            )
        time.sleep(0.2)


def _node_of(pod: Mapping[str, Any]) -> str | None:
    node: str | None = (pod.get("spec") or {}).get("nodeName")
    return node


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def schedule(
    plane: ControlPlane,
    core: Any,
    namespace: str,
    config: Mapping[str, Any],
    pods: Sequence[PodRequest],
    *,
    kubeconfig: Path,
    node_selector: Mapping[str, str],
    timeout_s: float,
) -> Settled:
    """One run: ``pods`` created in ``namespace`` (which must exist), then kube-scheduler
    started with ``config`` as ``kubeconfig``'s identity, until the pods are settled; then
    the scheduler stopped and the pods deleted, so the nodes are empty again."""
    count = create_pods(core, namespace, pods, node_selector)
    scheduler = plane.start_scheduler(config, kubeconfig=kubeconfig)
    try:
        settled = settle(core, namespace, count, timeout_s)
    finally:
        scheduler.stop()
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    until(
        lambda: not _listed(core.list_namespaced_pod(namespace, limit=1, _preload_content=False)),
        f"the pods of {namespace} gone",
        120,
    )
    return replace(settled, scheduler_log=scheduler.log)


SKIPPED: Final = "Skipping extender as it returned error"
"""What kube-scheduler logs (at its default verbosity) when it gives up on an
``ignorable`` extender's filter call."""


def skipped_filters(scheduler_log: Path, namespace: str) -> list[str]:
    """The pods of ``namespace`` whose filter call kube-scheduler gave up on, one entry per
    call, by its own log: the call failed or took longer than ``httpTimeout`` (100 ms, which
    two busy cores can exceed). Such a pod is placed as if Stowage were not there: where
    more than one node is feasible, kube-scheduler scores them and asks Stowage's
    prioritize too, as it does for every pod when the filter does not pick."""
    found = []
    for line in scheduler_log.read_text(errors="replace").splitlines():
        if SKIPPED in line and f'pod="{namespace}/' in line:
            found.append(line.split(f'pod="{namespace}/', 1)[1].split('"', 1)[0])
    return found


@dataclass(frozen=True)
class GpuUse:
    """What a placement made of the nodes' GPUs."""

    total: int
    idle: int
    """GPUs nothing runs on, whole or share."""
    allocated_milli: int
    overcommitted: int
    """Share pods that fit on none of their node's free GPUs (or landed on a node with no
    GPU at all)."""

    @property
    def idle_pct(self) -> float:
        return 100.0 * self.idle / self.total if self.total else 0.0


def gpu_use(
    specs: Sequence[NodeSpec], pods: Sequence[PodRequest], bound: Mapping[str, str]
) -> GpuUse:
    """GPU use of ``bound`` (pod name → node), counted per device: whole GPUs first, then
    the shares onto what is left — by an exact search where first-fit decreasing leaves
    some over, so a share counts as overcommitted only if no assignment holds it."""
    by_name = {_dns_name(p.name): p for p in pods}
    on_node: dict[str, list[PodRequest]] = {}
    for name, node in bound.items():
        on_node.setdefault(node, []).append(by_name[name])
    total = idle = allocated = over = 0
    for spec in specs:
        total += spec.gpus
        here = on_node.get(spec.name, [])
        whole = sum(gpu_request(p) for p in here)
        free = [MILLI_PER_GPU] * max(0, spec.gpus - whole)
        allocated += whole * MILLI_PER_GPU
        shares = sorted((p.gpu_milli for p in here if p.gpus and not gpu_request(p)), reverse=True)
        packed = _first_fit_decreasing(shares, free)
        if packed is None:
            packed = _exact(shares, free)
        if packed is None:  # nothing holds them all: count what first fit leaves over
            rooms = list(free)
            for milli in shares:
                slot = next((i for i, room in enumerate(rooms) if room >= milli), None)
                if slot is None:
                    over += 1
                else:
                    rooms[slot] -= milli
                    allocated += milli
            packed = rooms
        else:
            allocated += sum(shares)
        idle += sum(1 for room in packed if room == MILLI_PER_GPU)
    return GpuUse(total, idle, allocated, over)


def _first_fit_decreasing(shares: Sequence[int], free: Sequence[int]) -> list[int] | None:
    rooms = list(free)
    for milli in shares:
        slot = next((i for i, room in enumerate(rooms) if room >= milli), None)
        if slot is None:
            return None
        rooms[slot] -= milli
    return rooms


EXACT_STEPS: Final = 200_000
"""Most placements the exact search tries on one node before it gives up (then the node
counts as first fit leaves it): a node holds at most a few dozen shares on 8 GPUs."""


def _exact(shares: Sequence[int], free: Sequence[int]) -> list[int] | None:
    """The rooms left when every share is placed (largest first, GPUs with equal room
    tried once), or None if no assignment holds them all."""
    rooms = list(free)
    steps = 0

    def place(i: int) -> bool:
        nonlocal steps
        if i == len(shares):
            return True
        tried: set[int] = set()
        for slot, room in enumerate(rooms):
            steps += 1
            if room < shares[i] or room in tried or steps > EXACT_STEPS:
                continue
            tried.add(room)
            rooms[slot] -= shares[i]
            if place(i + 1):
                return True
            rooms[slot] += shares[i]
        return False

    return rooms if place(0) else None
