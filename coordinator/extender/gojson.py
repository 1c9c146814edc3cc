"""JSON read as kube-scheduler's and Volcano's Go code reads it (and written back), and
the error for what cannot be read: what both schedulers' messages share
(:mod:`.kubewire`, :mod:`.volcanowire`).

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

Each ``expect_*`` check takes the path of the field it reads (``NodeNames[1]``,
``task.Resreq.MilliCPU``): anything that does not have the expected shape raises
:class:`WireError`, whose message names the field, and the endpoints answer it as HTTP
400 before changing anything. That includes JSON nested deeper than
:data:`MAX_JSON_DEPTH` (the decoder recurses once per level, so a body of nested brackets
would otherwise end in ``RecursionError``) and amounts beyond what Kubernetes counts in
int64 milli-units.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import msgspec
import numpy as np

MAX_JSON_DEPTH: Final = 100
"""The deepest nesting of arrays and objects a request may have. The deepest real one, a
Volcano prioritize call (body → nodes → NodeInfo → Tasks → TaskInfo → Pod → spec →
affinity → … → values, or a Node's managedFields), nests about 15 levels; Go's decoder
allows 10,000, but msgspec recurses per level within Python's recursion limit (1,000 frames,
shared with the handler's own stack), so the bound is set well below that."""


class WireError(ValueError):
    """A request that cannot be understood; ``status`` is the HTTP answer (400 or 413)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


_DECODER: Final = msgspec.json.Decoder()
_ENCODER: Final = msgspec.json.Encoder()


def parse_json(body: bytes | msgspec.Raw) -> Any:
    """The JSON document in ``body``, as ``json.loads`` reads it but strict as Go is (no
    NaN or Infinity) and several times faster: request bodies run to hundreds of KiB.
    Nested deeper than :data:`MAX_JSON_DEPTH`, it is refused before it is decoded."""
    check_depth(bytes(body))
    return decode_shallow(body)


def decode_shallow(body: bytes | msgspec.Raw) -> Any:
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


def expect_object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise WireError(f"{where}: expected an object, got {kind(value)}")
    return value


def expect_array(value: Any, where: str) -> list[Any]:
    """A JSON array; null reads as empty, as a Go nil slice does."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(f"{where}: expected an array, got {kind(value)}")
    return value


def expect_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise WireError(f"{where}: expected a string, got {kind(value)}")
    return value


def expect_amount(value: Any, where: str, most: int) -> int:
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


def object_name(obj: Mapping[str, Any], where: str) -> str:
    """``metadata.name`` of a Kubernetes object, which must be a non-empty string."""
    meta = expect_object(obj.get("metadata"), f"{where}.metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise WireError(f"{where}.metadata.name: expected a non-empty string, got {kind(name)}")
    return name


def error_body(message: str) -> dict[str, str]:
    """The body of a 400/413 answer (schedulers only log non-200 answers)."""
    return {"error": message}
