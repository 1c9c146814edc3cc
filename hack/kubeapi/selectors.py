"""Label and field selectors: parsed once per request, matched against stored objects.

Label selectors take the string syntax of ``labels.Parse`` (``a=b``, ``a!=b``, ``a in (x,y)``,
``a notin (x)``, ``a``, ``!a``); PDBs carry the structured ``LabelSelector`` form. Field
selectors take ``=``, ``==`` and ``!=`` on the fields each type registers; any other field
is a 400, as the apiserver refuses selectors it cannot serve rather than ignoring them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from hack.kubeapi import errors

Matcher = Callable[[Mapping[str, Any]], bool]
_SET_RE = re.compile(
    r"^\s*(!?)([^\s!=<>(),]+)\s*(?:(in|notin)\s*\(([^)]*)\)|(==|=|!=)\s*(\S*))?\s*$"
)


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t for t in (t.strip() for t in terms) if t]


def _requirement(key: str, op: str, values: list[str]) -> Callable[[Mapping[str, str]], bool]:
    if op == "exists":
        return lambda labels: key in labels
    if op == "!":
        return lambda labels: key not in labels
    if op in ("=", "==", "in"):
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values  # !=, notin: absent keys match


def parse_labels(text: str) -> Matcher:
    """A matcher over whole objects for a ``labelSelector`` query string."""
    reqs = []
    for term in _split_terms(text or ""):
        m = _SET_RE.match(term)
        if not m or (m.group(1) and (m.group(3) or m.group(5))):
            raise errors.bad_request(f"unable to parse requirement: {term!r}")
        neg, key, set_op, set_values, op, value = m.groups()
        if set_op:
            values = [v.strip() for v in set_values.split(",") if v.strip()]
            reqs.append(_requirement(key, set_op, values))
        elif op:
            reqs.append(_requirement(key, op, [value]))
        else:
            reqs.append(_requirement(key, "!" if neg else "exists", []))
    return lambda obj: all(r(_labels(obj)) for r in reqs)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def label_selector(selector: Mapping[str, Any] | None) -> Matcher | None:
    """A matcher for a structured ``LabelSelector``; None for nil or empty, which a PDB
    treats as matching nothing (``selector.Empty()``), and for an invalid selector."""
    if not selector:
        return None
    reqs = [_requirement(k, "=", [v]) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(
            expr.get("operator", "")
        )
        if op is None:
            return None
        reqs.append(_requirement(expr.get("key", ""), op, list(expr.get("values") or [])))
    if not reqs:
        return None
    return lambda obj: all(r(_labels(obj)) for r in reqs)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """A field as the field-selector conversion prints it: bools lower-case, absent empty."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_fields(text: str, allowed: tuple[str, ...]) -> Matcher:
    reqs: list[tuple[str, bool, str]] = []
    for term in _split_terms(text or ""):
        m = re.match(r"^([^=!]+)(==|=|!=)(.*)$", term)
        if not m:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        path, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if path not in allowed:
            raise errors.bad_request(f"field label not supported: {path}")
        reqs.append((path, op != "!=", value))
    return lambda obj: all((field_value(obj, p) == v) == eq for p, eq, v in reqs)
