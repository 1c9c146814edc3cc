"""Field validation of request bodies (``fieldValidation``), as the apiserver decodes them.

The apiserver decodes a body into its Go type, so a field the type does not have is
dropped, and since 1.27 the ``fieldValidation`` query parameter says what else happens:

* ``Ignore``: dropped silently;
* ``Warn`` (the default): dropped, and each one named in a ``Warning: 299`` header, which
  kubectl prints (the Python client ignores it);
* ``Strict``: the request fails with 400 BadRequest naming every unknown and duplicate field
  (``Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field
  "spec.containers[0].imagee"``), which is what ``kubectl apply`` asks for by default.

Types come from the ``kubernetes`` client's models (:mod:`hack.kubeapi.models`); a value
of the wrong JSON type is left as it is (the apiserver would refuse it; out of scope here).
Duplicate keys are found while the body is parsed (:func:`loads`).
"""

from __future__ import annotations

import json
from typing import Any

from hack.kubeapi import errors, models
from hack.kubeapi.resources import Resource

DIRECTIVES = ("", "Ignore", "Strict", "Warn")


class _Keys(dict[str, Any]):
    """A JSON object that remembers the keys it was given more than once."""

    duplicates: tuple[str, ...] = ()


def _pairs(pairs: list[tuple[str, Any]]) -> _Keys:
    obj = _Keys(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        obj.duplicates = tuple(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


def loads(raw: bytes) -> Any:
    """``json.loads`` that keeps the last of duplicate keys (as Go does) and notes them."""
    return json.loads(raw, object_pairs_hook=_pairs)


def directive(query: Any, verb: str) -> str:
    """The request's ``fieldValidation``, defaulted to Warn; 422 for an unknown one, as the
    apiserver validates its Create/Update/PatchOptions."""
    value = query.get("fieldValidation", "")
    if value not in DIRECTIVES:
        raise errors.unsupported_option(verb, "fieldValidation", value, DIRECTIVES)
    return value or "Warn"


def problems(model: str, obj: Any, path: str = "") -> list[str]:
    """Drop the fields ``model`` does not have from ``obj`` (in place); what was wrong,
    unknown and duplicate fields, as the strict decoder names them."""
    found: list[str] = []
    _walk(models.Type("model", model), obj, path, found)
    return found


def _walk(type_: models.Type, value: Any, path: str, found: list[str]) -> None:
    if type_.kind == "model" and isinstance(value, dict):
        known = models.fields(type_.name)
        found.extend(f'duplicate field "{path}{k}"' for k in getattr(value, "duplicates", ()))
        for key in list(value):
            field = known.get(key)
            if field is None:
                found.append(f'unknown field "{path}{key}"')
                del value[key]
            else:
                _walk(field.type, value[key], f"{path}{key}.", found)
    elif type_.kind == "list" and isinstance(value, list) and type_.item is not None:
        for i, item in enumerate(value):
            _walk(type_.item, item, f"{path.rstrip('.')}[{i}].", found)
    elif type_.kind == "map" and isinstance(value, dict) and type_.item is not None:
        for key, item in value.items():
            _walk(type_.item, item, f"{path}{key}.", found)


def decode(res: Resource, obj: Any, how: str, *, patched: bool = False) -> list[str]:
    """Apply the directive ``how`` to a body (or a patch's result) for ``res``: the
    warnings to send, or 400 under Strict. Types without a model pass unchanged."""
    model = models.model_of(res)
    if model is None or not isinstance(obj, dict):
        return []
    found = problems(model, obj)
    if not found or how == "Ignore":
        return []
    if how == "Strict":
        strict = f"strict decoding error: {', '.join(found)}"
        if patched:
            raise errors.bad_request(strict)
        raise errors.bad_request(
            f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: {strict}'
        )
    return found
