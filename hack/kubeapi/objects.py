"""Object builders and the defaults the apiserver fills in, so seeded objects look real.

Code under test reads nodes and pods the way a cluster serves them (capacity *and*
allocatable, a Ready condition, requests defaulted from limits, a QoS class), so the
helpers build complete objects rather than the few fields a test names.
"""

from __future__ import annotations

import copy
import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

KUBELET_VERSION = "v1.32.4"
DEFAULT_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}


def now(after_s: float = 0) -> str:
    """RFC 3339 in UTC to the second, the format of ``metav1.Time``."""
    moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=after_s)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def namespace(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def node(
    name: str,
    *,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    address: str = "10.0.0.1",
) -> Obj:
    """A Node as a kubelet registers it; allocatable defaults to capacity."""
    cap = {**DEFAULT_CAPACITY, **(capacity or {})}
    stamp = now()
    spec: Obj = {}
    if taints:
        spec["taints"] = copy.deepcopy(taints)
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {
            "capacity": cap,
            "allocatable": dict(allocatable) if allocatable is not None else dict(cap),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "containerRuntimeVersion": "containerd://1.7.24",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex,
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_OID, name)),
            },
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    node: str | None = None,
    phase: str = "Running",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    ready: bool | None = None,
    priority: int = 0,
) -> Obj:
    """A one-container pod in ``phase``; Running pods are Ready unless ``ready=False``."""
    resources: Obj = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    spec: Obj = {
        "containers": [
            {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}
        ],
        "priority": priority,
    }
    if node:
        spec["nodeName"] = node
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }
    default_pod(obj)
    is_ready = phase == "Running" if ready is None else ready
    stamp = now()
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": stamp}
        for t in (("PodScheduled", "Initialized") if node else ())
    ]
    conditions += [
        {"type": t, "status": "True" if is_ready else "False", "lastTransitionTime": stamp}
        for t in (("ContainersReady", "Ready") if node else ())
    ]
    obj["status"] = {"phase": phase, "conditions": conditions, "qosClass": qos_class(obj["spec"])}
    if node:
        obj["status"].update(startTime=stamp, hostIP="10.0.0.1", podIP="10.244.0.10")
    if node and phase == "Running":
        obj["status"]["containerStatuses"] = [
            container_status(c, stamp, ready=is_ready) for c in spec["containers"]
        ]
    return obj


def container_status(container: Mapping[str, Any], started: str, *, ready: bool = True) -> Obj:
    """A running container's status as its kubelet reports it (what READY counts)."""
    return {
        "name": container.get("name", ""),
        "image": container.get("image", ""),
        "imageID": "",
        "containerID": f"containerd://{new_uid().replace('-', '')}",
        "ready": ready,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": started}},
        "lastState": {},
    }


def default_pod(obj: Obj) -> None:
    """The defaulting a created pod gets (``SetDefaults_Pod``, ``SetDefaults_Container``,
    the ServiceAccount and Priority admission plugins): requests default to limits, which
    is what the scheduler then counts."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("imagePullPolicy", "IfNotPresent")
        resources = container.setdefault("resources", {})
        limits = resources.get("limits") or {}
        if limits:
            resources["requests"] = {**limits, **(resources.get("requests") or {})}


def qos_class(spec: Mapping[str, Any]) -> str:
    """``GetPodQOS`` for cpu and memory: Guaranteed needs limits equal to requests for both
    in every container, BestEffort has neither anywhere, the rest are Burstable."""
    containers = [*spec.get("initContainers", []), *spec.get("containers", [])]
    seen = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in req or name in lim:
                seen = True
            if name not in lim or req.get(name, lim[name]) != lim[name]:
                guaranteed = False
    if not seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_is_ready(obj: Mapping[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pdb(
    name: str,
    namespace: str,
    match_labels: Mapping[str, str],
    *,
    disruptions_allowed: int,
    current_healthy: int,
    desired_healthy: int,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> Obj:
    """A PDB whose status the disruption controller has already written (observed)."""
    spec: Obj = {"selector": {"matchLabels": dict(match_labels)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {
            "observedGeneration": 1,
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": current_healthy,
            "desiredHealthy": desired_healthy,
            "expectedPods": current_healthy,
            "conditions": [disruption_condition(disruptions_allowed > 0, 1)],
        },
    }


def disruption_condition(allowed: bool, generation: int) -> Obj:
    return {
        "type": "DisruptionAllowed",
        "status": "True" if allowed else "False",
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": now(),
    }
