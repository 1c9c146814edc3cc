"""What kube-scheduler sends its extender and what it expects back
(``k8s.io/kube-scheduler/extender/v1``): ``ExtenderArgs`` for filter and prioritize,
``ExtenderPreemptionArgs`` for preempt, and their replies.

Requests are read as Go reads them (:mod:`.gojson`). Replies are written strictly, in the
capitalised form kube-scheduler's own encoder produces (``NodeNames``, ``FailedNodes``,
``FailedAndUnresolvableNodes``, ``Error``; ``[{"Host": …, "Score": …}]``;
``{"NodeNameToMetaVictims": …}``). The two hot paths keep what repeats between calls:
:class:`ExtenderArgsReader` the last ``NodeNames`` array, :class:`HostPriorityWriter` the
reply template of the last list of names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # what json.dumps uses
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt

from coordinator.extender import gojson
from coordinator.live import MAX_EXTENDER_SCORE


def _pod(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    pod = gojson.lookup(obj, "Pod")
    if pod is None:
        raise gojson.WireError(f"{where}: no Pod")
    return gojson.expect_object(pod, f"{where}.Pod")


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
    obj = gojson.expect_object(body, "body")
    pod = _pod(obj, "body")
    raw_names = gojson.lookup(obj, "NodeNames")
    if raw_names is not None:
        if isinstance(raw_names, CheckedNames):
            return ExtenderArgs(pod=pod, names=raw_names, nodes=None)
        raw_names = gojson.expect_array(raw_names, "NodeNames")
        names = [gojson.expect_string(n, f"NodeNames[{i}]") for i, n in enumerate(raw_names)]
        return ExtenderArgs(pod=pod, names=names, nodes=None)
    node_list = gojson.lookup(obj, "Nodes")
    if node_list is None:
        raise gojson.WireError("body: neither NodeNames nor Nodes given")
    items = gojson.expect_array(
        gojson.lookup(gojson.expect_object(node_list, "Nodes"), "items"), "Nodes.items"
    )
    nodes = [gojson.expect_object(item, f"Nodes.items[{i}]") for i, item in enumerate(items)]
    names = [gojson.object_name(node, f"Nodes.items[{i}]") for i, node in enumerate(nodes)]
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
    :func:`~coordinator.extender.gojson.check_depth` words it."""

    def __init__(self) -> None:
        self._raw = b""
        self._names = CheckedNames()

    def read(self, body: bytes) -> ExtenderArgs:
        try:
            members = _TOP_LEVEL.decode(body)
        except msgspec.ValidationError:  # JSON, but not an object
            gojson.check_depth(body)
            return decode_extender_args(gojson.decode_shallow(body))
        except RecursionError:  # deeper than any bound: gojson.check_depth says so
            gojson.check_depth(body)
            raise gojson.WireError(
                f"body: nested deeper than {gojson.MAX_JSON_DEPTH} levels"
            ) from None
        except msgspec.DecodeError as e:
            raise gojson.WireError(f"body is not JSON: {e}") from e
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
    gojson.check_depth(bytes(raw), outer=1)
    return gojson.decode_shallow(raw)


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
    obj = gojson.expect_object(body, "body")
    pod = _pod(obj, "body")
    meta = gojson.lookup(obj, "NodeNameToMetaVictims")
    if meta is not None:
        field = "NodeNameToMetaVictims"
        victims = {
            node: _victims(entry, f"{field}[{node!r}]", _meta_uid)
            for node, entry in gojson.expect_object(meta, field).items()
        }
        return PreemptionArgs(pod=pod, victims=victims)
    full = gojson.lookup(obj, "NodeNameToVictims")
    field = "NodeNameToVictims"
    victims = {
        node: _victims(entry, f"{field}[{node!r}]", _pod_uid)
        for node, entry in (gojson.expect_object(full, field) if full is not None else {}).items()
    }
    return PreemptionArgs(pod=pod, victims=victims)


def _victims(entry: Any, where: str, uid_of: Any) -> MetaVictims | None:
    if entry is None:
        return None
    obj = gojson.expect_object(entry, where)
    pods = gojson.lookup(obj, "Pods")
    uids = None
    if pods is not None:
        uids = tuple(
            uid_of(gojson.expect_object(p, f"{where}.Pods[{i}]"), f"{where}.Pods[{i}]")
            for i, p in enumerate(gojson.expect_array(pods, f"{where}.Pods"))
        )
    violations = gojson.lookup(obj, "NumPDBViolations")
    if violations is None:
        violations = 0
    if isinstance(violations, bool) or not isinstance(violations, int):
        raise gojson.WireError(
            f"{where}.NumPDBViolations: expected an integer, got {gojson.kind(violations)}"
        )
    return MetaVictims(uids=uids, pdb_violations=violations)


def _meta_uid(pod: Mapping[str, Any], where: str) -> str:
    return gojson.expect_string(gojson.lookup(pod, "UID"), f"{where}.UID")


def _pod_uid(pod: Mapping[str, Any], where: str) -> str:
    uid = gojson.expect_object(pod.get("metadata"), f"{where}.metadata").get("uid")
    if not isinstance(uid, str) or not uid:
        raise gojson.WireError(
            f"{where}.metadata.uid: expected a non-empty string, got {gojson.kind(uid)}"
        )
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
