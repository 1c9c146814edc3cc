"""The object-metadata validation every write passes (``ValidateObjectMeta``).

Only metadata is checked: names, label keys and values, annotation keys and the 256 KiB
annotation budget, because those are the limits code publishing annotations can run into
(a report that grows past the budget must fail here as it would in a cluster). Spec
validation per type is out of scope.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hack.kubeapi import errors
from hack.kubeapi.resources import Resource

ANNOTATIONS_MAX_B = 256 * (1 << 10)
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_LABEL = re.compile(rf"^{_DNS1123_LABEL}$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)


def _qualified_name_problem(key: str) -> str | None:
    """``IsQualifiedName``: optional DNS-subdomain prefix, a name part of at most 63."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "a qualified name must consist of at most one '/'"
    if prefix == "" and "/" in key:
        return "prefix part must be non-empty"
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return f"prefix part {SUBDOMAIN_MSG}"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_PART.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None


def _cause(
    field: str, value: Any, detail: str, reason: str = "FieldValueInvalid"
) -> dict[str, str]:
    prefix = (
        "Too long"
        if reason == "FieldValueTooLong"
        else f"Invalid value: {value!r}".replace("'", '"')
    )
    return {"reason": reason, "message": f"{prefix}: {detail}", "field": field}


def validate(res: Resource, obj: Mapping[str, Any]) -> None:
    md = obj.get("metadata") or {}
    name = str(md.get("name", ""))
    causes: list[dict[str, str]] = []
    pattern, msg = (
        (_LABEL, LABEL_MSG) if res.plural == "namespaces" else (_SUBDOMAIN, SUBDOMAIN_MSG)
    )
    if not pattern.match(name) or len(name) > 253:
        causes.append(_cause("metadata.name", name, msg))
    for key, value in (md.get("labels") or {}).items():
        problem = _qualified_name_problem(key)
        if problem:
            causes.append(_cause("metadata.labels", key, problem))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                _cause(
                    "metadata.labels",
                    value,
                    "a valid label must be an empty "
                    "string or consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
    annotations = md.get("annotations") or {}
    for key in annotations:
        problem = _qualified_name_problem(key.lower())
        if problem:
            causes.append(_cause("metadata.annotations", key, problem))
    if any(not isinstance(v, str) for v in annotations.values()):
        causes.append(_cause("metadata.annotations", "", "annotation values must be strings"))
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_MAX_B:
        causes.append(
            _cause(
                "metadata.annotations",
                "",
                f"must have at most {ANNOTATIONS_MAX_B} bytes",
                "FieldValueTooLong",
            )
        )
    if res.plural == "events" and not res.group:
        causes.extend(_event_namespace(obj))
    if causes:
        raise errors.invalid(res.kind, name, causes, res.group)


def _event_namespace(event: Mapping[str, Any]) -> list[dict[str, str]]:
    """A core/v1 Event lives in its object's namespace; one about a cluster-scoped object
    (a Node) in ``default`` (or none), as the API server's ``legacyValidateEvent`` holds."""
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    involved = str((event.get("involvedObject") or {}).get("namespace") or "")
    if involved == "" and namespace in ("", "default"):
        return []
    if involved == namespace:
        return []
    return [_cause("involvedObject.namespace", involved, "does not match event.namespace")]
