"""The shape of every served kind, read from the ``kubernetes`` client's model classes.

The client is generated from the apiserver's OpenAPI document, and each model class keeps
what it was generated from: ``openapi_types`` (attribute to type, e.g. ``List[V1Container]``),
``attribute_map`` (attribute to JSON field name) and, on the pydantic field, the field's
description and whether it is required. That is the schema the emulator serves as OpenAPI
(:mod:`hack.kubeapi.openapi`) and decodes bodies against (:mod:`hack.kubeapi.fields`), so
neither is hand-written and both follow the client version installed.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kubernetes import client

from hack.kubeapi.resources import Resource


@dataclass(frozen=True, slots=True)
class Type:
    """A field's type: a primitive (``str``, ``int``, ``bool``, ``float``, ``datetime``,
    ``date``, ``bytes`` (base64 in JSON), ``object`` for anything such as int-or-string), a
    model, or a list or string-keyed map of a type."""

    kind: str  # "primitive", "model", "list" or "map"
    name: str = ""  # the primitive's or the model class's name
    item: Type | None = None  # the element type of a list or map


@dataclass(frozen=True, slots=True)
class Field:
    json_name: str
    type: Type
    description: str
    required: bool


PRIMITIVES = frozenset({"str", "int", "float", "bool", "datetime", "date", "bytes", "object"})
_CONTAINER = re.compile(r"^(List|Dict)\[(?:str, )?(.+)\]$")
_VERSION_PREFIX = re.compile(r"^(?:Core|Events)?V\d+(?:(?:alpha|beta)\d+)?(?=[A-Z])")


@functools.cache
def parse(text: str) -> Type:
    """``openapi_types`` notation: ``str``, ``V1PodSpec``, ``List[X]``, ``Dict[str, X]``."""
    container = _CONTAINER.match(text)
    if container:
        kind = "list" if container[1] == "List" else "map"
        return Type(kind, item=parse(container[2]))
    if text in PRIMITIVES:
        return Type("primitive", text)
    if not hasattr(client, text):
        raise KeyError(f"no model class {text} in the kubernetes client")
    return Type("model", text)


@functools.cache
def fields(model: str) -> dict[str, Field]:
    """The model's fields by JSON name, in the client's order."""
    cls = getattr(client, model)
    out = {}
    for attr, type_text in cls.openapi_types.items():
        info = cls.model_fields.get(attr)
        json_name = cls.attribute_map[attr]
        out[json_name] = Field(
            json_name,
            parse(type_text),
            (info.description or "") if info is not None else "",
            bool(info is not None and info.is_required()),
        )
    return out


def description(model: str) -> str:
    """The model's own description: its docstring up to the generated ``Attributes:``."""
    doc = getattr(client, model).__doc__ or ""
    return " ".join(doc.split("Attributes:")[0].split())


def short_name(model: str) -> str:
    """The Go type's name: ``V1PodSpec`` is ``PodSpec``, ``CoreV1Event`` is ``Event``."""
    return _VERSION_PREFIX.sub("", model)


def model_for(group: str, version: str, kind: str) -> str | None:
    """The model class of a kind (``Event`` in the core group is ``CoreV1Event``, as the
    events.k8s.io one is ``EventsV1Event``); None when the client has none."""
    prefix = version.capitalize()
    candidates = [f"Core{prefix}{kind}"] if not group else []
    candidates.append(f"{prefix}{kind}")
    for name in candidates:
        if hasattr(client, name):
            return name
    return None


def model_of(res: Resource) -> str | None:
    return model_for(res.group, res.version, res.kind)
