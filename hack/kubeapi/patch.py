"""The three PATCH content types the apiserver accepts for built-in types.

* JSON merge patch (RFC 7386): objects merge recursively, ``null`` deletes, anything else
  (lists included) replaces.
* Strategic merge patch: merge patch plus the list and directive rules that built-in types
  declare. For maps (``metadata.annotations``/``labels``) it is the same as merge patch, which
  matters because the Python client sends it for every dict body. Lists whose Go field has
  ``patchStrategy:"merge"`` merge by key (``MERGE_KEYS``); ``$patch: replace|delete`` and
  ``$deleteFromPrimitiveList/`` work; ``$setElementOrder/`` and ``$retainKeys`` are accepted
  and ignored (they only order or prune what the merge already produces).
* JSON patch (RFC 6902): add, remove, replace, move, copy, test, with RFC 6901 ``~0``/``~1``.

Failures raise ``errors.ApiError`` with the codes the apiserver uses for them.
"""

from __future__ import annotations

import copy
from typing import Any

from hack.kubeapi import errors

# Lists merged by key under strategic merge patch, by field name (the Go tags of
# core/v1, policy/v1 and metav1 for the fields the served types have).
MERGE_KEYS = {
    "conditions": "type",
    "addresses": "type",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "podIPs": "ip",
    "hostIPs": "ip",
}
# Lists of scalars merged as sets.
MERGE_SETS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 ``MergePatch(Target, Patch)``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive is not None:
        raise errors.bad_request(f"Unknown patch type: {directive}")
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith(("$setElementOrder/", "$retainKeys")):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [v for v in result.get(name) or [] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if not isinstance(current, list):
        current = []
    if field in MERGE_SETS:
        return copy.deepcopy(current) + [v for v in patch if v not in current]
    key = MERGE_KEYS.get(field)
    if key is None:
        if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
            return [v for v in copy.deepcopy(patch) if not (isinstance(v, dict) and "$patch" in v)]
        return copy.deepcopy(patch)
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [v for v in copy.deepcopy(patch) if not (isinstance(v, dict) and "$patch" in v)]
    result = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise errors.bad_request(f"map: {item} does not contain declared merge key: {key}")
        index = next((i for i, c in enumerate(result) if c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: v for k, v in copy.deepcopy(item).items() if v is not None})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _invalid(message: str) -> errors.ApiError:
    """Errors applying a JSON patch are 422s in the apiserver (``interpretJSONPatchError``)."""
    return errors.ApiError(errors.status(422, "Invalid", message))


def _parent(doc: Any, parts: list[str], op: str) -> tuple[Any, str]:
    if not parts:
        raise _invalid(f"{op} operation on the document root is not supported")
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _invalid(f"{op} operation does not apply: doc is missing path: {'/'.join(parts)}")
    return node, parts[-1]


def _get(doc: Any, parts: list[str], op: str) -> Any:
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _invalid(f"{op} operation does not apply: doc is missing key: /{'/'.join(parts)}")


def _remove(doc: Any, parts: list[str], op: str) -> Any:
    value = _get(doc, parts, op)
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return value


def _add(doc: Any, parts: list[str], value: Any, op: str) -> None:
    parent, last = _parent(doc, parts, op)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list) and last == "-":
        parent.append(value)
    elif isinstance(parent, list) and last.isdigit() and int(last) <= len(parent):
        parent.insert(int(last), value)
    else:
        raise _invalid(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902, applied to a copy; the first failing operation fails the whole patch."""
    if not isinstance(operations, list):
        raise errors.bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        )
    doc = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict):
            raise errors.bad_request("invalid JSON patch operation")
        op = operation.get("op")
        parts = _pointer(str(operation.get("path", "")))
        if op == "add":
            _add(doc, parts, copy.deepcopy(operation.get("value")), op)
        elif op == "remove":
            _remove(doc, parts, op)
        elif op == "replace":
            _get(doc, parts, op)
            _remove(doc, parts, op)
            _add(doc, parts, copy.deepcopy(operation.get("value")), op)
        elif op in ("move", "copy"):
            source = _pointer(str(operation.get("from", "")))
            taken = _remove(doc, source, op) if op == "move" else _get(doc, source, op)
            _add(doc, parts, copy.deepcopy(taken), op)
        elif op == "test":
            if _get(doc, parts, op) != operation.get("value"):
                raise _invalid(f"testing value /{'/'.join(parts)} failed: test failed")
        else:
            raise _invalid(f"Unexpected kind: {op}")
    return doc
