"""Protobuf request bodies, for the objects kubectl's typed clients create.

``kubectl create namespace`` and ``kubectl create poddisruptionbudget`` send their object as
``application/vnd.kubernetes.protobuf`` (client-go's typed clients, which do not fall back
to JSON on 415). The body is the magic ``k8s\\0`` and a ``runtime.Unknown`` whose ``raw``
is the object, numbered as in the ``generated.proto`` files of ``k8s.io/api``. This module
decodes those kinds into the JSON shape the rest of the emulator handles, from a table of
the field numbers they use (checked against kubectl's own request bytes). Another kind, or
a set field the table lacks, is 415 naming it, so nothing is dropped silently. Answers
stay JSON, which these clients accept too.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from hack.kubeapi import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


@dataclass(frozen=True, slots=True)
class F:
    name: str
    kind: str  # string, bytes, int, bool, map (string to string), time, intorstring, message
    message: str = ""
    repeated: bool = False


META = {
    1: F("name", "string"),
    2: F("generateName", "string"),
    3: F("namespace", "string"),
    4: F("selfLink", "string"),
    5: F("uid", "string"),
    6: F("resourceVersion", "string"),
    7: F("generation", "int"),
    8: F("creationTimestamp", "time"),
    9: F("deletionTimestamp", "time"),
    10: F("deletionGracePeriodSeconds", "int"),
    11: F("labels", "map"),
    12: F("annotations", "map"),
    14: F("finalizers", "string", repeated=True),
}
MESSAGES: dict[str, dict[int, F]] = {
    "Unknown": {
        1: F("typeMeta", "message", "TypeMeta"),
        2: F("raw", "bytes"),
        3: F("contentEncoding", "string"),
        4: F("contentType", "string"),
    },
    "TypeMeta": {1: F("apiVersion", "string"), 2: F("kind", "string")},
    "ObjectMeta": META,
    "Namespace": {
        1: F("metadata", "message", "ObjectMeta"),
        2: F("spec", "message", "NamespaceSpec"),
        3: F("status", "message", "NamespaceStatus"),
    },
    "NamespaceSpec": {1: F("finalizers", "string", repeated=True)},
    "NamespaceStatus": {1: F("phase", "string")},
    "PodDisruptionBudget": {
        1: F("metadata", "message", "ObjectMeta"),
        2: F("spec", "message", "PodDisruptionBudgetSpec"),
        3: F("status", "message", "PodDisruptionBudgetStatus"),
    },
    "PodDisruptionBudgetSpec": {
        1: F("minAvailable", "intorstring"),
        2: F("selector", "message", "LabelSelector"),
        3: F("maxUnavailable", "intorstring"),
        4: F("unhealthyPodEvictionPolicy", "string"),
    },
    "PodDisruptionBudgetStatus": {
        1: F("observedGeneration", "int"),
        3: F("disruptionsAllowed", "int"),
        4: F("currentHealthy", "int"),
        5: F("desiredHealthy", "int"),
        6: F("expectedPods", "int"),
    },
    "LabelSelector": {
        1: F("matchLabels", "map"),
        2: F("matchExpressions", "message", "LabelSelectorRequirement", repeated=True),
    },
    "LabelSelectorRequirement": {
        1: F("key", "string"),
        2: F("operator", "string"),
        3: F("values", "string", repeated=True),
    },
    "Entry": {1: F("key", "string"), 2: F("value", "string")},
    "Time": {1: F("seconds", "int"), 2: F("nanos", "int")},
    "IntOrString": {1: F("type", "int"), 2: F("intVal", "int"), 3: F("strVal", "string")},
}
KINDS = {
    ("v1", "Namespace"): "Namespace",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
}


def unsupported(why: str) -> errors.ApiError:
    return errors.ApiError(
        errors.status(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - {why}; send application/json",
        )
    )


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise unsupported("a truncated protobuf varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The wire format as (field number, varint or length-delimited bytes) pairs."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            out.append((number, value - (1 << 64) if value >= 1 << 63 else value))
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise unsupported("a truncated protobuf field")
            out.append((number, data[at : at + size]))
            at += size
        else:
            raise unsupported(f"protobuf wire type {wire} is not used by these kinds")
    return out


def _message(name: str, data: bytes) -> dict[str, Any]:
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, raw in _fields(data):
        field = table.get(number)
        if field is None:
            if raw in (0, b""):
                continue  # an unset field the table does not name: nothing lost
            raise unsupported(f"field {number} of {name} is not decoded here")
        value = _value(field, raw, name)
        if field.repeated:
            out.setdefault(field.name, []).append(value)
        elif field.kind == "map":
            out.setdefault(field.name, {}).update(value)
        else:
            out[field.name] = value
    return out


def _value(field: F, raw: int | bytes, owner: str) -> Any:
    expects_int = field.kind in ("int", "bool")
    if expects_int != isinstance(raw, int):
        raise unsupported(f"field {field.name} of {owner} has the wrong wire type")
    if field.kind == "int":
        return raw
    if field.kind == "bool":
        return bool(raw)
    assert isinstance(raw, bytes)
    if field.kind == "bytes":
        return raw
    if field.kind == "string":
        return raw.decode()
    if field.kind == "map":
        entry = _message("Entry", raw)
        return {entry.get("key", ""): entry.get("value", "")}
    if field.kind == "time":
        seconds = _message("Time", raw).get("seconds", 0)
        if not seconds:
            return None  # the zero time, null in JSON
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if field.kind == "intorstring":
        value = _message("IntOrString", raw)
        return value.get("strVal", "") if value.get("type") == 1 else value.get("intVal", 0)
    return _message(field.message, raw)


ZERO = ("", 0, False, None)


def _prune(value: Any) -> Any:
    """Drop zero scalars and null times, as the JSON of the same Go object omits them
    (``omitempty``); objects stay, empty or not."""
    if isinstance(value, dict):
        kept = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if isinstance(v, dict | list) or v not in ZERO}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf body as the JSON object it stands for (with apiVersion and kind)."""
    if not body.startswith(MAGIC):
        raise unsupported("a protobuf body starts with k8s\\0")
    envelope = _message("Unknown", body[len(MAGIC) :])
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    name = KINDS.get((api_version, kind))
    if name is None or envelope.get("contentEncoding"):
        raise unsupported(f"{kind or 'an object'} {api_version} is decoded from JSON only")
    obj = _prune(_message(name, envelope.get("raw", b"")))
    return {"apiVersion": api_version, "kind": kind, **obj}
