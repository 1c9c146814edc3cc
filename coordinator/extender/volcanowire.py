"""What Volcano's ``extender`` plugin sends and what it expects back: ``{"task", "node"}``
for predicate, ``{"task", "nodes"}`` for prioritize, and their replies.

Requests are read as Go reads them (:mod:`.gojson`): the plugin tags its request fields
lower-case (``task``, ``node``, ``nodes``) and leaves ``TaskInfo``/``NodeInfo`` untagged
(``UID``, ``Resreq``, ``Pod``, ``Name``, ``Node``). Replies are written in its tags
(``{"status": …, "code": …}``, ``{"nodeScore": …, "errorMessage": …}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from common import quantity
from coordinator.extender import gojson

# Volcano predicate codes (``pkg/scheduler/api/types.go``).
SUCCESS: Final = 0
UNSCHEDULABLE: Final = 2
UNSCHEDULABLE_AND_UNRESOLVABLE: Final = 3


@dataclass(frozen=True, slots=True)
class Task:
    """A Volcano ``TaskInfo``: its pod UID and the pod to judge."""

    uid: str
    pod: Mapping[str, Any]
    """The embedded Pod, or one written from ``Resreq`` when the Pod is not sent."""


@dataclass(frozen=True, slots=True)
class NodeArg:
    """A Volcano ``NodeInfo``: its name and, when sent, its Node object."""

    name: str
    node: Mapping[str, Any] | None


def decode_predicate_args(body: Any) -> tuple[Task, NodeArg]:
    """``{"task": TaskInfo, "node": NodeInfo}``."""
    obj = gojson.expect_object(body, "body")
    raw_node = gojson.lookup(obj, "node")
    if raw_node is None:
        raise gojson.WireError("body: no node")
    return _task(obj), _node_info(raw_node, "node")


def decode_volcano_prioritize_args(body: Any) -> tuple[Task, list[NodeArg]]:
    """``{"task": TaskInfo, "nodes": [NodeInfo, ...]}``."""
    obj = gojson.expect_object(body, "body")
    task = _task(obj)
    nodes = gojson.expect_array(gojson.lookup(obj, "nodes"), "nodes")
    return task, [_node_info(n, f"nodes[{i}]") for i, n in enumerate(nodes)]


def _task(obj: Mapping[str, Any]) -> Task:
    raw = gojson.lookup(obj, "task")
    if raw is None:
        raise gojson.WireError("body: no task")
    task = gojson.expect_object(raw, "task")
    uid = gojson.lookup(task, "UID")
    pod = gojson.lookup(task, "Pod")
    if pod is not None:
        pod = gojson.expect_object(pod, "task.Pod")
        if uid is None:
            uid = gojson.expect_object(pod.get("metadata") or {}, "task.Pod.metadata").get("uid")
    else:
        pod = _pod_of_resreq(task)
    if uid is None:
        uid = ""
    return Task(uid=gojson.expect_string(uid, "task.UID"), pod=pod)


def _pod_of_resreq(task: Mapping[str, Any]) -> dict[str, Any]:
    """A one-container Pod requesting what ``Resreq`` says (MilliCPU in millicores,
    Memory in bytes, every ScalarResources entry in milli-units: 1 GPU = 1000), each
    within the range of a quantity (int64 milli-units), else a :class:`gojson.WireError` naming it.

    Resreq carries no limits, so such a pod is Burstable (or BestEffort if it asks for
    nothing): the NUMA-alignment filter, which needs Guaranteed, does not apply to it."""
    raw = gojson.lookup(task, "Resreq")
    if raw is None:
        raise gojson.WireError("task: neither Pod nor Resreq")
    resreq = gojson.expect_object(raw, "task.Resreq")
    requests: dict[str, str] = {}
    cpu_m = gojson.expect_amount(
        gojson.lookup(resreq, "MilliCPU"), "task.Resreq.MilliCPU", quantity.MAX_MILLI
    )
    mem_b = gojson.expect_amount(
        gojson.lookup(resreq, "Memory"), "task.Resreq.Memory", quantity.MAX_MILLI // 1000
    )
    if cpu_m:
        requests["cpu"] = f"{cpu_m}m"
    if mem_b:
        requests["memory"] = str(mem_b)
    scalars = gojson.lookup(resreq, "ScalarResources")
    if scalars is not None:
        for name, milli in gojson.expect_object(scalars, "task.Resreq.ScalarResources").items():
            where = f"task.Resreq.ScalarResources[{name!r}]"
            if value := gojson.expect_amount(milli, where, quantity.MAX_MILLI):
                requests[name] = f"{value}m"
    annotations = gojson.lookup(task, "PodAnnotations")
    if annotations is not None:
        for key, value in gojson.expect_object(annotations, "task.PodAnnotations").items():
            gojson.expect_string(value, f"task.PodAnnotations[{key!r}]")
    name = gojson.lookup(task, "Name")
    namespace = gojson.lookup(task, "Namespace")
    return {
        "metadata": {
            "name": gojson.expect_string(name, "task.Name") if name is not None else "",
            "namespace": gojson.expect_string(namespace, "task.Namespace")
            if namespace is not None
            else "",
            "annotations": dict(annotations or {}),
        },
        "spec": {"containers": [{"name": "resreq", "resources": {"requests": requests}}]},
    }


def _node_info(raw: Any, where: str) -> NodeArg:
    info = gojson.expect_object(raw, where)
    node = gojson.lookup(info, "Node")
    if node is not None:
        node = gojson.expect_object(node, f"{where}.Node")
    name = gojson.lookup(info, "Name")
    if name is None and node is not None:
        return NodeArg(name=gojson.object_name(node, f"{where}.Node"), node=node)
    name = gojson.expect_string(name, f"{where}.Name")
    if not name:
        raise gojson.WireError(f"{where}.Name: empty")
    if node is not None and gojson.object_name(node, f"{where}.Node") != name:
        raise gojson.WireError(f"{where}: Name {name!r} and Node.metadata.name differ")
    return NodeArg(name=name, node=node)


def predicate_reply(passing: bool, reason: str = "", unresolvable: bool = False) -> dict[str, Any]:
    """``{"status": <error message, "" when the node passes>, "code": 0 | 2 | 3}``."""
    if passing:
        return {"status": "", "code": SUCCESS}
    code = UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else UNSCHEDULABLE
    return {"status": reason or "rejected", "code": code}


def node_scores(scores: Iterable[tuple[str, int]]) -> dict[str, Any]:
    """``{"nodeScore": {name: score}, "errorMessage": ""}``."""
    return {"nodeScore": dict(scores), "errorMessage": ""}
