"""Label selectors and node selector terms, matched as ``k8s.io/apimachinery`` and
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` match them.

Both are read once from JSON into frozen values; a selector that cannot be understood
(an operator the API server would not accept) is never guessed at: reading it raises
:class:`Malformed`, and the pod it belongs to is judged *unjudgeable*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

LABEL_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_OPERATORS: Final = LABEL_OPERATORS | {"Gt", "Lt"}


class Malformed(ValueError):
    """A selector or term that the API server would not have accepted."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key operator values`` requirement."""

    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``labels.Requirement.Matches``: ``NotIn`` and ``DoesNotExist`` hold where the
        key is absent; ``Gt``/``Lt`` compare the label and the single value as integers
        and fail where either is not one."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if not present or len(self.values) != 1:
            return False
        own, bound = _integer(labels[self.key]), _integer(next(iter(self.values)))
        if own is None or bound is None:
            return False
        return own > bound if self.operator == "Gt" else own < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: every requirement holds. An empty selector matches
    every object, as ``LabelSelectorAsSelector`` makes it (a nil one is never built:
    a term without a selector matches nothing, see :data:`NOTHING`)."""

    requirements: tuple[Requirement, ...]
    nothing: bool = False
    """The nil selector (``labels.Nothing()``): matches no object."""

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)

    def plus(self, more: tuple[Requirement, ...]) -> LabelSelector:
        """This selector and ``more`` (``matchLabelKeys``/``mismatchLabelKeys``)."""
        return LabelSelector(self.requirements + more, self.nothing)


NOTHING: Final = LabelSelector((), nothing=True)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A ``NodeSelectorTerm``: its ``matchExpressions`` on the node's labels and its
    ``matchFields`` (``metadata.name`` only) all hold. A term with neither matches no
    node (``nodeaffinity.nodeSelectorTerm``)."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        return all(r.matches(labels) for r in self.expressions) and all(
            r.matches({"metadata.name": name}) for r in self.fields
        )


def label_selector(raw: Any) -> LabelSelector:
    """The selector of a ``labelSelector`` JSON value; None/absent is :data:`NOTHING`."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        raise Malformed("labelSelector is not an object")
    requirements = [
        Requirement(str(k), "In", frozenset({str(v)}))
        for k, v in (raw.get("matchLabels") or {}).items()
    ]
    requirements.extend(_requirement(e, LABEL_OPERATORS) for e in raw.get("matchExpressions") or [])
    return LabelSelector(tuple(requirements))


def node_selector_term(raw: Any) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise Malformed("nodeSelectorTerm is not an object")
    fields = tuple(
        _requirement(e, frozenset({"In", "NotIn"})) for e in raw.get("matchFields") or []
    )
    if any(f.key != "metadata.name" for f in fields):
        raise Malformed("matchFields: only metadata.name is supported")
    return NodeSelectorTerm(
        tuple(_requirement(e, NODE_OPERATORS) for e in raw.get("matchExpressions") or []), fields
    )


def _requirement(raw: Any, operators: frozenset[str]) -> Requirement:
    if not isinstance(raw, Mapping):
        raise Malformed("a selector requirement is not an object")
    op = raw.get("operator")
    if op not in operators:
        raise Malformed(f"operator {op!r} is not one of {', '.join(sorted(operators))}")
    values = raw.get("values") or []
    if not isinstance(values, list):
        raise Malformed("values is not a list")
    return Requirement(str(raw.get("key") or ""), op, frozenset(str(v) for v in values))


def _integer(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``."""
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None
