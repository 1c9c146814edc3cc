"""A fingerprint of everything a request could change in a :class:`LiveCluster`, to show
that a refused request changed nothing.

It walks the cluster's own attributes rather than listing them, so a column or ledger
added later is covered without touching the tests: node specs, held and assumed pods,
signals, report times, and every array and list of the numeric state. Left out are what
is not state: settings, clock, metrics, the policy and the scoring engine with its caches.
Floats are compared by ``repr`` and arrays by their bytes, so NaN (unknown) equals itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from coordinator.live import LiveCluster

NOT_STATE = frozenset({"settings", "clock", "metrics", "policy", "engine", "_row_memo"})


def fingerprint(cluster: LiveCluster) -> Any:
    """A comparable value: equal before and after a request iff it changed nothing."""
    return _freeze(cluster, set())


def _freeze(value: Any, seen: set[int]) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, dict):
        return ("dict", tuple((repr(k), _freeze(v, seen)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_freeze(v, seen) for v in value))
    if isinstance(value, set | frozenset):
        return ("set", tuple(sorted(repr(v) for v in value)))
    if dataclasses.is_dataclass(value) or not type(value).__module__.startswith("coordinator"):
        return repr(value)
    if id(value) in seen:
        return ("seen", type(value).__name__)
    seen.add(id(value))
    attributes = _attributes(value)
    return (
        type(value).__name__,
        tuple((k, _freeze(v, seen)) for k, v in sorted(attributes.items()) if k not in NOT_STATE),
    )


def _attributes(value: Any) -> dict[str, Any]:
    if hasattr(value, "__dict__"):
        return dict(vars(value))
    slots = [name for cls in type(value).__mro__ for name in getattr(cls, "__slots__", ())]
    return {name: getattr(value, name) for name in slots if hasattr(value, name)}
