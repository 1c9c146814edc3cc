"""The emulated kubelet: a pod bound to a node that exists starts at once.

A real kubelet watches for pods bound to its node, pulls images, starts containers and
writes the pod's status. Nothing runs here, so the emulator writes the status that kubelet
would write once every container is up (one more MODIFIED after the binding's): phase
Running, the Initialized / ContainersReady / Ready conditions True, the node's address as
``hostIP``, a pod IP from the node's pod CIDR (``spec.podCIDR``, else 10.244.0.0/16 for all
nodes), ``startTime`` and one running ``containerStatuses`` entry per container, which is
what ``kubectl get pods`` counts as READY. Pods whose node is not there stay Pending, as
no kubelet would pick them up. ``KubeApi(kubelet=False)`` turns it off.

Only a binding starts a pod: a pod created with ``spec.nodeName`` already set stays as
its creator writes it, because tests and rigs create such pods and then write the status
they want with the resourceVersion the create returned.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from typing import TYPE_CHECKING

from hack.kubeapi import errors, objects
from hack.kubeapi.resources import NODES, PODS
from hack.kubeapi.store import Obj

if TYPE_CHECKING:  # the Cluster holds this module's PodAddresses
    from hack.kubeapi.cluster import Cluster

DEFAULT_POD_CIDR = "10.244.0.0/16"
CONDITIONS = ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")


class PodAddresses:
    """Pod IPs handed out per pod CIDR, in order, skipping the network and the gateway."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: dict[str, itertools.count[int]] = {}

    def allocate(self, cidr: str) -> str:
        network = ipaddress.ip_network(cidr, strict=False)
        with self._lock:
            offset = next(self._next.setdefault(str(network), itertools.count(2)))
        return str(network[offset % network.num_addresses])


def _host_ip(node: Obj) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return ""


def start_pod(cluster: Cluster, namespace: str, name: str) -> Obj | None:
    """Write the Running status for a Pending pod on an existing node; the pod as stored
    after, or None when no kubelet would start it."""
    pod = cluster.store.find(PODS, namespace, name)
    node_name = (pod or {}).get("spec", {}).get("nodeName")
    node = cluster.store.find(NODES, "", node_name) if node_name else None
    if pod is None or node is None or (pod.get("status") or {}).get("phase") != "Pending":
        return None
    host_ip = _host_ip(node)
    cidr = (node.get("spec") or {}).get("podCIDR")  # a Node may be created without spec
    pod_ip = cluster.pod_addresses.allocate(cidr or DEFAULT_POD_CIDR)
    started = objects.now()

    def run(obj: Obj) -> Obj:
        if obj["metadata"].get("deletionTimestamp") or obj["spec"].get("nodeName") != node_name:
            raise errors.conflict("pods", name, errors.MODIFIED)
        st = obj.setdefault("status", {})
        conditions = {c["type"]: c for c in st.get("conditions") or []}
        for kind in CONDITIONS:
            conditions[kind] = {
                "type": kind,
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": started,
            }
        st.update(
            phase="Running",
            conditions=list(conditions.values()),
            hostIP=host_ip,
            hostIPs=[{"ip": host_ip}] if host_ip else [],
            podIP=pod_ip,
            podIPs=[{"ip": pod_ip}],
            startTime=started,
            containerStatuses=[
                objects.container_status(c, started) for c in obj["spec"].get("containers", [])
            ],
        )
        obj["metadata"]["resourceVersion"] = ""
        return obj

    try:
        return cluster.store.update(PODS, namespace, name, run)
    except errors.ApiError:  # deleted or moved meanwhile: this kubelet has nothing to run
        return None
