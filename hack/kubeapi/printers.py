"""The columns ``kubectl get`` shows per kind, as the apiserver's printers define them
(``k8s.io/kubernetes/pkg/printers/internalversion/printers.go``).

The apiserver fills every column, the ``-o wide`` ones (priority 1) included, and kubectl
picks what to show; so does this module. Ages are ``duration.HumanDuration`` of the time
since a timestamp, against the injected clock. Column descriptions are the field
descriptions the OpenAPI schemas carry (:mod:`hack.kubeapi.models`). A kind without a
printer here gets the default Name / Created At columns, as in the apiserver.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hack.kubeapi import models

Obj = Mapping[str, Any]
Cell = str | int


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str = "string"
    priority: int = 0
    doc: tuple[str, str] | str = ""  # (model, field) whose description it is, or the text
    format: str = ""

    def definition(self) -> dict[str, Any]:
        if isinstance(self.doc, tuple):
            field = models.fields(self.doc[0]).get(self.doc[1])
            description = field.description if field else ""
        else:
            description = self.doc
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": description,
            "priority": self.priority,
        }


NAME = Column("Name", format="name", doc=("V1ObjectMeta", "name"))
AGE = Column("Age", doc=("V1ObjectMeta", "creationTimestamp"))


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: two significant units at most, coarser as it grows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _since(stamp: Any, now: float) -> str:
    """``translateTimestampSince``: ``<unknown>`` for no time."""
    if not stamp:
        return "<unknown>"
    try:
        then = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration(now - then.timestamp())


def _terminated_at(status: Obj) -> str:
    return ((status.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""


def _restartable(container: Obj | None) -> bool:
    return bool(container) and (container or {}).get("restartPolicy") == "Always"


FINISHED = {
    "Succeeded": [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ],
    "Failed": [
        {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
    ],
}
"""A finished pod's row conditions (``podSuccessConditions``, ``podFailedConditions``)."""


def _pod(pod: Obj, now: float) -> tuple[list[Cell], list[dict[str, str]]]:
    """``printPod``: READY counts ready running containers (and started sidecars), STATUS
    is the phase refined by the first telling container state, as kubectl users know it."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(map(_restartable, init_specs.values()))
    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last_restart = ""
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, c in enumerate(init_statuses):
        state = c.get("state") or {}
        restarts += int(c.get("restartCount") or 0)
        last_restart = max(last_restart, _terminated_at(c))
        sidecar = _restartable(init_specs.get(c.get("name")))
        if sidecar:
            sidecar_restarts += int(c.get("restartCount") or 0)
            sidecar_last_restart = max(sidecar_last_restart, _terminated_at(c))
        terminated, waiting = state.get("terminated"), state.get("waiting") or {}
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if sidecar and c.get("started"):
            ready += bool(c.get("ready"))
            continue
        if terminated is not None:
            reason = "Init:" + (
                terminated.get("reason")
                or (
                    f"Signal:{terminated['signal']}"
                    if terminated.get("signal")
                    else f"ExitCode:{terminated.get('exitCode', 0)}"
                )
            )
        elif waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if not initializing or conditions.get("Initialized") == "True":
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        running = False
        for c in reversed(status.get("containerStatuses") or []):
            state = c.get("state") or {}
            restarts += int(c.get("restartCount") or 0)
            last_restart = max(last_restart, _terminated_at(c))
            terminated, waiting = state.get("terminated"), state.get("waiting") or {}
            if waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = (
                    f"Signal:{terminated['signal']}"
                    if terminated.get("signal")
                    else f"ExitCode:{terminated.get('exitCode', 0)}"
                )
            elif c.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if conditions.get("Ready") == "True" else "NotReady"
    deleting = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    shown_restarts = str(restarts)
    if restarts and last_restart:
        shown_restarts = f"{restarts} ({_since(last_restart, now)} ago)"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    readiness = "<none>"
    if gates:
        met = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        readiness = f"{met}/{len(gates)}"
    cells: list[Cell] = [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        reason,
        shown_restarts,
        _since(pod["metadata"].get("creationTimestamp"), now),
        (ips[0].get("ip") if ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        readiness,
    ]
    return cells, FINISHED.get(phase, [])


def _address(node: Obj, kind: str) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == kind:
            return str(address.get("address"))
    return "<none>"


def _roles(labels: Mapping[str, str]) -> str:
    """``findNodeRoles``: ``node-role.kubernetes.io/<role>`` keys and ``kubernetes.io/role``."""
    roles = {
        k.removeprefix("node-role.kubernetes.io/")
        for k in labels
        if k.startswith("node-role.kubernetes.io/")
    }
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    roles.discard("")
    return ",".join(sorted(roles)) or "<none>"


def _node(node: Obj, now: float) -> list[Cell]:
    status = node.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    shown = ["Ready" if ready[-1].get("status") == "True" else "NotReady"] if ready else ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        shown.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        ",".join(shown),
        _roles(node["metadata"].get("labels") or {}),
        _since(node["metadata"].get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        _address(node, "InternalIP"),
        _address(node, "ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _namespace(ns: Obj, now: float) -> list[Cell]:
    return [
        ns["metadata"]["name"],
        (ns.get("status") or {}).get("phase", ""),
        _since(ns["metadata"].get("creationTimestamp"), now),
    ]


def _lease(lease: Obj, now: float) -> list[Cell]:
    return [
        lease["metadata"]["name"],
        (lease.get("spec") or {}).get("holderIdentity") or "",
        _since(lease["metadata"].get("creationTimestamp"), now),
    ]


def _configmap(cm: Obj, now: float) -> list[Cell]:
    return [
        cm["metadata"]["name"],
        len(cm.get("data") or {}) + len(cm.get("binaryData") or {}),
        _since(cm["metadata"].get("creationTimestamp"), now),
    ]


def _event(event: Obj, now: float) -> list[Cell]:
    first = _since(event.get("firstTimestamp") or event.get("eventTime"), now)
    last = _since(event["lastTimestamp"], now) if event.get("lastTimestamp") else first
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series:
        last = _since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1  # singleton events of the events.k8s.io API have no count
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {instance}" if instance else component,
        str(event.get("message", "")).strip(),
        first,
        count,
        event["metadata"]["name"],
    ]


def _pdb(pdb: Obj, now: float) -> list[Cell]:
    spec = pdb.get("spec") or {}
    return [
        pdb["metadata"]["name"],
        str(spec["minAvailable"]) if spec.get("minAvailable") is not None else "N/A",
        str(spec["maxUnavailable"]) if spec.get("maxUnavailable") is not None else "N/A",
        int((pdb.get("status") or {}).get("disruptionsAllowed") or 0),
        _since(pdb["metadata"].get("creationTimestamp"), now),
    ]


@dataclass(frozen=True, slots=True)
class Printer:
    columns: tuple[Column, ...]
    row: Callable[[Obj, float], Any]  # cells, or (cells, row conditions) for pods


PRINTERS: dict[str, Printer] = {
    "Pod": Printer(
        (
            NAME,
            Column("Ready", doc="The aggregate readiness state of this pod for accepting traffic."),
            Column("Status", doc="The aggregate status of the containers in this pod."),
            Column(
                "Restarts",
                doc="The number of times the containers in this pod have been restarted and "
                "when the last container in this pod has restarted.",
            ),
            AGE,
            Column("IP", priority=1, doc=("V1PodStatus", "podIP")),
            Column("Node", priority=1, doc=("V1PodSpec", "nodeName")),
            Column("Nominated Node", priority=1, doc=("V1PodStatus", "nominatedNodeName")),
            Column("Readiness Gates", priority=1, doc=("V1PodSpec", "readinessGates")),
        ),
        _pod,
    ),
    "Node": Printer(
        (
            NAME,
            Column("Status", doc="The status of the node"),
            Column("Roles", doc="The roles of the node"),
            AGE,
            Column("Version", doc=("V1NodeSystemInfo", "kubeletVersion")),
            Column("Internal-IP", priority=1, doc=("V1NodeStatus", "addresses")),
            Column("External-IP", priority=1, doc=("V1NodeStatus", "addresses")),
            Column("OS-Image", priority=1, doc=("V1NodeSystemInfo", "osImage")),
            Column("Kernel-Version", priority=1, doc=("V1NodeSystemInfo", "kernelVersion")),
            Column(
                "Container-Runtime", priority=1, doc=("V1NodeSystemInfo", "containerRuntimeVersion")
            ),
        ),
        _node,
    ),
    "Namespace": Printer(
        (NAME, Column("Status", doc="The status of the namespace"), AGE), _namespace
    ),
    "ConfigMap": Printer(
        (
            NAME,
            Column("Data", type="integer", doc=("V1ConfigMap", "data")),
            AGE,
        ),
        _configmap,
    ),
    "Lease": Printer((NAME, Column("Holder", doc=("V1LeaseSpec", "holderIdentity")), AGE), _lease),
    "Event": Printer(
        (
            Column("Last Seen", doc=("CoreV1Event", "lastTimestamp")),
            Column("Type", doc=("CoreV1Event", "type")),
            Column("Reason", doc=("CoreV1Event", "reason")),
            Column("Object", doc=("CoreV1Event", "involvedObject")),
            Column("Subobject", priority=1, doc=("V1ObjectReference", "fieldPath")),
            Column("Source", priority=1, doc=("CoreV1Event", "source")),
            Column("Message", doc=("CoreV1Event", "message")),
            Column("First Seen", priority=1, doc=("CoreV1Event", "firstTimestamp")),
            Column("Count", priority=1, doc=("CoreV1Event", "count")),
            Column("Name", priority=1, format="name", doc=("V1ObjectMeta", "name")),
        ),
        _event,
    ),
    "PodDisruptionBudget": Printer(
        (
            NAME,
            Column("Min Available", doc="The minimum number of pods that must be available."),
            Column("Max Unavailable", doc="The maximum number of pods that may be unavailable."),
            Column(
                "Allowed Disruptions",
                type="integer",
                doc="Calculated number of pods that may be disrupted at this time.",
            ),
            AGE,
        ),
        _pdb,
    ),
}
DEFAULT = Printer(
    (NAME, Column("Created At", type="date", doc=("V1ObjectMeta", "creationTimestamp"))),
    lambda obj, now: [obj["metadata"].get("name", ""), obj["metadata"].get("creationTimestamp")],
)


def printer(kind: str) -> Printer:
    return PRINTERS.get(kind, DEFAULT)


def row(kind: str, obj: Obj, now: float) -> tuple[list[Cell], list[dict[str, str]]]:
    """The cells of ``obj`` and the row's conditions (a finished pod is Completed)."""
    out = printer(kind).row(obj, now)
    return out if isinstance(out, tuple) else (out, [])
