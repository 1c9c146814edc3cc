"""What kube-scheduler and Volcano send an extender, and what they expect back.

**Reading is tolerant, like Go's ``encoding/json``.** kube-scheduler's extender types
(``k8s.io/kube-scheduler/extender/v1``) have no json tags, so Go writes the capitalised
field names (``Pod``, ``NodeNames``); older releases wrote lower-case tags (``pod``,
``nodenames``), and Go reads either because it matches object keys to fields
case-insensitively. So do we: :func:`lookup` finds ``Pod``, ``pod`` or ``POD``, the last
one written winning as in Go. Volcano's extender plugin tags its request fields
lower-case (``task``, ``node``, ``nodes``) and leaves ``TaskInfo``/``NodeInfo`` untagged
(``UID``, ``Resreq``, ``Pod``, ``Name``, ``Node``); the same rule reads them all. Map keys
(node names, resource names) are data and match exactly; the embedded Kubernetes objects
(Pods, Nodes) are read as the API server writes them, camelCase.

**Writing is strict**: the capitalised form kube-scheduler's own encoder produces
(``NodeNames``, ``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``;
``[{"Host": …, "Score": …}]``; ``{"NodeNameToMetaVictims": …}``) and Volcano's tags
(``{"status": …, "code": …}``, ``{"nodeScore": …, "errorMessage": …}``).

Anything that does not have the expected shape raises :class:`WireError`, whose message
names the field: the endpoints answer it as HTTP 400 before changing anything. That
includes JSON nested deeper than :data:`MAX_JSON_DEPTH` (the decoder recurses once per
level, so a body of nested brackets would otherwise end in ``RecursionError``) and amounts
beyond what Kubernetes counts in int64 milli-units.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # what json.dumps uses
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from common import quantity
from coordinator.live import MAX_EXTENDER_SCORE

MAX_JSON_DEPTH: Final = 100
"""The deepest nesting of arrays and objects a request may have. The deepest real one, a
Volcano prioritize call (body → nodes → NodeInfo → Tasks → TaskInfo → Pod → spec →
affinity → … → values, or a Node's managedFields), nests about 15 levels; Go's decoder
allows 10,000, but msgspec recurses per level within Python's recursion limit (1,000 frames,
shared with the handler's own stack), so the bound is set well below that."""

# Volcano predicate codes (``pkg/scheduler/api/types.go``).
SUCCESS: Final = 0
UNSCHEDULABLE: Final = 2
UNSCHEDULABLE_AND_UNRESOLVABLE: Final = 3


class WireError(ValueError):
    """A request that cannot be understood; ``status`` is the HTTP answer (400 or 413)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# ----------------------------------------------------------------------- reading


_DECODER: Final = msgspec.json.Decoder()
_ENCODER: Final = msgspec.json.Encoder()


def parse_json(body: bytes | msgspec.Raw) -> Any:
    """The JSON document in ``body``, as ``json.loads`` reads it but strict as Go is (no
    NaN or Infinity) and several times faster: request bodies run to hundreds of KiB.
    Nested deeper than :data:`MAX_JSON_DEPTH`, it is refused before it is decoded."""
    check_depth(bytes(body))
    return _decode(body)


def _decode(body: bytes | msgspec.Raw) -> Any:
    """:func:`parse_json` of a body whose depth is known to be within bounds."""
    try:
        return _DECODER.decode(body)
    except msgspec.DecodeError as e:
        raise WireError(f"body is not JSON: {e}") from e


_NOT_STRUCTURE: Final = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP: Final = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_DEPTH_CHUNK: Final = 1 << 20
"""Bytes of structure scanned at a time: the scan's arrays stay a few MiB at any body size."""


def check_depth(body: bytes, limit: int = MAX_JSON_DEPTH, outer: int = 0) -> None:
    """Raise :class:`WireError` if ``body`` nests arrays and objects deeper than ``limit``,
    brackets inside strings not counted, within ``outer`` levels already open (a member
    of the top-level object is within one).

    Cheap for what schedulers send: a body with no more opening brackets than ``limit``
    cannot be deeper, and a count is a pass at memory speed. Otherwise escapes are dropped
    (``\\\\`` pairs from the left, as JSON reads them, then ``\\"``), so every quote left
    opens or closes a string; only quotes and brackets are kept, and numpy counts the depth
    outside strings, a chunk at a time. Malformed JSON may be miscounted, but the decoder
    refuses it either way."""
    if body.count(b"[") + body.count(b"{") <= limit - outer:
        return
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = np.frombuffer(body.translate(None, _NOT_STRUCTURE), dtype=np.uint8)
    depth, in_string = outer, 0
    for start in range(0, len(structure), _DEPTH_CHUNK):
        chunk = structure[start : start + _DEPTH_CHUNK]
        inside = (np.cumsum(chunk == ord('"'), dtype=np.int64) + in_string) & 1
        levels = np.cumsum(np.where(inside, 0, _STEP[chunk]), dtype=np.int64) + depth
        if levels.max() > limit:
            raise WireError(f"body: nested deeper than {limit} levels")
        depth, in_string = int(levels[-1]), int(inside[-1])


def to_json(body: Any) -> bytes:
    """``body`` as JSON, with the encoder :func:`parse_json` pairs with."""
    return _ENCODER.encode(body)


def lookup(obj: Mapping[str, Any], key: str) -> Any:
    """``obj[key]`` matched case-insensitively as Go does; None when absent (or null)."""
    wanted = key.casefold()
    found = None
    for k, v in obj.items():
        if k.casefold() == wanted:
            found = v  # Go assigns each matching key in turn: the last one stays
    return found


def kind(value: Any) -> str:
    """The JSON type of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise WireError(f"{where}: expected an object, got {kind(value)}")
    return value


def _array(value: Any, where: str) -> list[Any]:
    """A JSON array; null reads as empty, as a Go nil slice does."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(f"{where}: expected an array, got {kind(value)}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"{where}: expected a string, got {kind(value)}")
    return value


def _amount(value: Any, where: str, most: int) -> int:
    """A non-negative finite number of at most ``most`` (null reads as 0), rounded up."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError(f"{where}: expected a number, got {kind(value)}")
    if not math.isfinite(value) or value < 0:
        raise WireError(f"{where}: expected a non-negative number, got {value}")
    if value > most:
        raise WireError(f"{where}: {value} is out of range (at most {most})")
    return math.ceil(value)


def _pod(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    pod = lookup(obj, "Pod")
    if pod is None:
        raise WireError(f"{where}: no Pod")
    return _object(pod, f"{where}.Pod")


def object_name(obj: Mapping[str, Any], where: str) -> str:
    """``metadata.name`` of a Kubernetes object, which must be a non-empty string."""
    meta = _object(obj.get("metadata"), f"{where}.metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise WireError(f"{where}.metadata.name: expected a non-empty string, got {kind(name)}")
    return name


# ------------------------------------------------------------ kube-scheduler


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """``ExtenderArgs`` of ``/filter`` and ``/prioritize``."""

    pod: Mapping[str, Any]
    names: list[str]
    """The nodes to judge, in the order sent."""
    nodes: list[Mapping[str, Any]] | None
    """The full Node objects (``nodeCacheCapable: false``), in the order of ``names``;
    None when only names were sent (``nodeCacheCapable: true``)."""


def decode_extender_args(body: Any) -> ExtenderArgs:
    """``{"Pod": {...}, "Nodes": {"items": [...]} | null, "NodeNames": [...] | null}``.

    ``NodeNames`` wins when both are set (kube-scheduler only ever sends one)."""
    obj = _object(body, "body")
    pod = _pod(obj, "body")
    raw_names = lookup(obj, "NodeNames")
    if raw_names is not None:
        if isinstance(raw_names, CheckedNames):
            return ExtenderArgs(pod=pod, names=raw_names, nodes=None)
        raw_names = _array(raw_names, "NodeNames")
        names = [_string(n, f"NodeNames[{i}]") for i, n in enumerate(raw_names)]
        return ExtenderArgs(pod=pod, names=names, nodes=None)
    node_list = lookup(obj, "Nodes")
    if node_list is None:
        raise WireError("body: neither NodeNames nor Nodes given")
    items = _array(lookup(_object(node_list, "Nodes"), "items"), "Nodes.items")
    nodes = [_object(item, f"Nodes.items[{i}]") for i, item in enumerate(items)]
    names = [object_name(node, f"Nodes.items[{i}]") for i, node in enumerate(nodes)]
    return ExtenderArgs(pod=pod, names=names, nodes=nodes)


class CheckedNames(list[str]):
    """A ``NodeNames`` array already known to hold only strings. Shared between the calls
    that send the same array, so read-only by convention."""


_TOP_LEVEL: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])
_NAMES: Final = msgspec.json.Decoder(list[str])


class ExtenderArgsReader:
    """Reads ``ExtenderArgs`` from a request body, remembering the last ``NodeNames`` array.

    kube-scheduler offers the same feasible nodes pod after pod, in the same order. The
    body is split into its top-level members undecoded; when the ``NodeNames`` member is
    byte for byte the one read last, its list is reused — the same list object, so later
    steps that remember their work per list (rows, reply template) see it as the same at
    the cost of one comparison. Only the Pod and anything else sent are decoded afresh.

    Depth is checked per member (one level less than the body's bound: the top-level
    object is one), so the long names array, which is one level deep whenever it reads
    as strings, is never scanned: at 5,000 names the scan cost as much as the split. A
    body nested deeper than the split itself can follow is refused whole, as
    :func:`check_depth` words it."""

    def __init__(self) -> None:
        self._raw = b""
        self._names = CheckedNames()

    def read(self, body: bytes) -> ExtenderArgs:
        try:
            members = _TOP_LEVEL.decode(body)
        except msgspec.ValidationError:  # JSON, but not an object
            check_depth(body)
            return decode_extender_args(_decode(body))
        except RecursionError:  # deeper than any bound: check_depth says so
            check_depth(body)
            raise WireError(f"body: nested deeper than {MAX_JSON_DEPTH} levels") from None
        except msgspec.DecodeError as e:
            raise WireError(f"body is not JSON: {e}") from e
        obj = {
            key: self._names_of(raw) if key.casefold() == "nodenames" else _member(raw)
            for key, raw in members.items()
        }
        return decode_extender_args(obj)

    def _names_of(self, raw: msgspec.Raw) -> Any:
        if len(raw) == len(self._raw) and bytes(raw) == self._raw:  # a copy beats memoryview's ==
            return self._names
        try:
            names = CheckedNames(_NAMES.decode(raw))
        except msgspec.ValidationError:  # null, or not all strings: checked and named there
            return _member(raw)
        self._raw, self._names = bytes(raw), names
        return names


def _member(raw: msgspec.Raw) -> Any:
    """A top-level member of a body, decoded once its depth is known to be in bounds."""
    check_depth(bytes(raw), outer=1)
    return _decode(raw)


@dataclass(frozen=True, slots=True)
class MetaVictims:
    """``MetaVictims``: the pods (by UID) preemption would evict on one node."""

    uids: tuple[str, ...] | None
    """None when the scheduler sent ``"Pods": null`` (echoed as such)."""
    pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """``ExtenderPreemptionArgs``, with full ``Victims`` reduced to their UIDs."""

    pod: Mapping[str, Any]
    victims: dict[str, MetaVictims | None]


def decode_preemption_args(body: Any) -> PreemptionArgs:
    """``{"Pod", "NodeNameToVictims" | null, "NodeNameToMetaVictims" | null}``: the Meta
    form when it is set (``nodeCacheCapable: true``), else the full one."""
    obj = _object(body, "body")
    pod = _pod(obj, "body")
    meta = lookup(obj, "NodeNameToMetaVictims")
    if meta is not None:
        field = "NodeNameToMetaVictims"
        victims = {
            node: _victims(entry, f"{field}[{node!r}]", _meta_uid)
            for node, entry in _object(meta, field).items()
        }
        return PreemptionArgs(pod=pod, victims=victims)
    full = lookup(obj, "NodeNameToVictims")
    field = "NodeNameToVictims"
    victims = {
        node: _victims(entry, f"{field}[{node!r}]", _pod_uid)
        for node, entry in (_object(full, field) if full is not None else {}).items()
    }
    return PreemptionArgs(pod=pod, victims=victims)


def _victims(entry: Any, where: str, uid_of: Any) -> MetaVictims | None:
    if entry is None:
        return None
    obj = _object(entry, where)
    pods = lookup(obj, "Pods")
    uids = None
    if pods is not None:
        uids = tuple(
            uid_of(_object(p, f"{where}.Pods[{i}]"), f"{where}.Pods[{i}]")
            for i, p in enumerate(_array(pods, f"{where}.Pods"))
        )
    violations = lookup(obj, "NumPDBViolations")
    if violations is None:
        violations = 0
    if isinstance(violations, bool) or not isinstance(violations, int):
        raise WireError(f"{where}.NumPDBViolations: expected an integer, got {kind(violations)}")
    return MetaVictims(uids=uids, pdb_violations=violations)


def _meta_uid(pod: Mapping[str, Any], where: str) -> str:
    return _string(lookup(pod, "UID"), f"{where}.UID")


def _pod_uid(pod: Mapping[str, Any], where: str) -> str:
    uid = _object(pod.get("metadata"), f"{where}.metadata").get("uid")
    if not isinstance(uid, str) or not uid:
        raise WireError(f"{where}.metadata.uid: expected a non-empty string, got {kind(uid)}")
    return uid


def filter_reply(
    passing: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    nodes: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """``ExtenderFilterResult`` as Go encodes it: every field, the unused form null.

    With ``nodes`` (Nodes mode) the passing Node objects go back in a NodeList and
    ``NodeNames`` is null; otherwise the names go back and ``Nodes`` is null.

    Unresolvable refusals are listed under ``FailedNodes`` too: kube-scheduler before
    1.21 knows no ``FailedAndUnresolvableNodes`` and would drop those nodes without a
    reason, while newer releases give that map precedence for a node in both."""
    return {
        "Nodes": {"metadata": {}, "items": list(nodes)} if nodes is not None else None,
        "NodeNames": list(passing) if nodes is None else None,
        "FailedNodes": {**failed, **unresolvable},
        "FailedAndUnresolvableNodes": unresolvable,  # only read, by the encoder
        "Error": "",
    }


class HostPriorityWriter:
    """Writes ``HostPriorityList`` for the names offered and their scores, as JSON bytes.

    Each score is written in two characters (`` 7``, ``10``; JSON allows the space), so a
    list of names has one fixed template and a reply is that template with two bytes per
    node set by numpy — no Python work per node. The template of the last list of names is
    kept: kube-scheduler offers the same list pod after pod (the same list object, from
    :class:`ExtenderArgsReader`)."""

    def __init__(self) -> None:
        self._names: Sequence[str] = ()
        self._template = np.zeros(0, dtype=np.uint8)
        self._at = np.zeros(0, dtype=np.int64)
        """Where each node's two score characters go in the template."""

    def write(self, names: Sequence[str], scores: npt.NDArray[np.integer[Any]]) -> bytes:
        if len(names) != len(scores):
            raise ValueError(f"{len(names)} names but {len(scores)} scores")
        if not len(names):
            return b"[]"
        if scores.dtype.kind not in "iu" or not 0 <= scores.min() <= scores.max() <= 10:
            raise ValueError(f"extender scores outside 0..{MAX_EXTENDER_SCORE}")
        if names is not self._names and names != self._names:
            self._template, self._at = _template(names)
            self._names = names
        reply = self._template.copy()
        reply[self._at] = np.where(scores >= 10, ord("1"), ord(" "))
        reply[self._at + 1] = scores % 10 + ord("0")
        return reply.tobytes()


def _template(names: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """``[{"Host": "a", "Score": __}, …]`` and where each ``__`` is (ASCII: bytes = chars)."""
    heads = [f'{{"Host": {encode_basestring_ascii(name)}, "Score": ' for name in names]
    text = "[" + "__}, ".join(heads) + "__}]"
    ends = np.cumsum([len(head) + 5 for head in heads])  # each head and its "__}, "
    at = 1 + ends - 5
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8).copy(), at


def preemption_reply(victims: Mapping[str, MetaVictims | None]) -> dict[str, Any]:
    """``ExtenderPreemptionResult``: always the Meta form (UIDs), and only well-formed
    entries: a node whose entry or ``Pods`` is null or empty is left out. kube-scheduler
    1.20 dereferences every entry (a null one panics its preemption), and newer releases
    refuse a node without victims ("expected at least one victim pod")."""
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in v.uids], "NumPDBViolations": v.pdb_violations}
            for node, v in victims.items()
            if v is not None and v.uids
        }
    }


def error_body(message: str) -> dict[str, str]:
    """The body of a 400/413 answer (schedulers only log non-200 answers)."""
    return {"error": message}


# -------------------------------------------------------------------- Volcano


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
    obj = _object(body, "body")
    raw_node = lookup(obj, "node")
    if raw_node is None:
        raise WireError("body: no node")
    return _task(obj), _node_info(raw_node, "node")


def decode_volcano_prioritize_args(body: Any) -> tuple[Task, list[NodeArg]]:
    """``{"task": TaskInfo, "nodes": [NodeInfo, ...]}``."""
    obj = _object(body, "body")
    task = _task(obj)
    nodes = _array(lookup(obj, "nodes"), "nodes")
    return task, [_node_info(n, f"nodes[{i}]") for i, n in enumerate(nodes)]


def _task(obj: Mapping[str, Any]) -> Task:
    raw = lookup(obj, "task")
    if raw is None:
        raise WireError("body: no task")
    task = _object(raw, "task")
    uid = lookup(task, "UID")
    pod = lookup(task, "Pod")
    if pod is not None:
        pod = _object(pod, "task.Pod")
        if uid is None:
            uid = _object(pod.get("metadata") or {}, "task.Pod.metadata").get("uid")
    else:
        pod = _pod_of_resreq(task)
    if uid is None:
        uid = ""
    return Task(uid=_string(uid, "task.UID"), pod=pod)


def _pod_of_resreq(task: Mapping[str, Any]) -> dict[str, Any]:
    """A one-container Pod requesting what ``Resreq`` says (MilliCPU in millicores,
    Memory in bytes, every ScalarResources entry in milli-units: 1 GPU = 1000), each
    within the range of a quantity (int64 milli-units), else a :class:`WireError` naming it.

    Resreq carries no limits, so such a pod is Burstable (or BestEffort if it asks for
    nothing): the NUMA-alignment filter, which needs Guaranteed, does not apply to it."""
    raw = lookup(task, "Resreq")
    if raw is None:
        raise WireError("task: neither Pod nor Resreq")
    resreq = _object(raw, "task.Resreq")
    requests: dict[str, str] = {}
    cpu_m = _amount(lookup(resreq, "MilliCPU"), "task.Resreq.MilliCPU", quantity.MAX_MILLI)
    mem_b = _amount(lookup(resreq, "Memory"), "task.Resreq.Memory", quantity.MAX_MILLI // 1000)
    if cpu_m:
        requests["cpu"] = f"{cpu_m}m"
    if mem_b:
        requests["memory"] = str(mem_b)
    scalars = lookup(resreq, "ScalarResources")
    if scalars is not None:
        for name, milli in _object(scalars, "task.Resreq.ScalarResources").items():
            where = f"task.Resreq.ScalarResources[{name!r}]"
            if value := _amount(milli, where, quantity.MAX_MILLI):
                requests[name] = f"{value}m"
    annotations = lookup(task, "PodAnnotations")
    if annotations is not None:
        for key, value in _object(annotations, "task.PodAnnotations").items():
            _string(value, f"task.PodAnnotations[{key!r}]")
    name = lookup(task, "Name")
    namespace = lookup(task, "Namespace")
    return {
        "metadata": {
            "name": _string(name, "task.Name") if name is not None else "",
            "namespace": _string(namespace, "task.Namespace") if namespace is not None else "",
            "annotations": dict(annotations or {}),
        },
        "spec": {"containers": [{"name": "resreq", "resources": {"requests": requests}}]},
    }


def _node_info(raw: Any, where: str) -> NodeArg:
    info = _object(raw, where)
    node = lookup(info, "Node")
    if node is not None:
        node = _object(node, f"{where}.Node")
    name = lookup(info, "Name")
    if name is None and node is not None:
        return NodeArg(name=object_name(node, f"{where}.Node"), node=node)
    name = _string(name, f"{where}.Name")
    if not name:
        raise WireError(f"{where}.Name: empty")
    if node is not None and object_name(node, f"{where}.Node") != name:
        raise WireError(f"{where}: Name {name!r} and Node.metadata.name differ")
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
