"""What a pod asks for, counted the way the scheduler counts it.

Kubernetes' ``PodRequests``/``PodLimits`` and ``ComputePodQOS``
(``k8s.io/component-helpers/resource``, ``pkg/apis/core/v1/helper/qos``) over a pod in its
JSON form (camelCase keys, as the API server, the kubelet and kube-scheduler's extender
calls send it). The agent and the coordinator both use these, so a pod counts the same
in a node report and in a scheduling decision.

Quantities are summed exactly (:class:`fractions.Fraction`) and rounded up once at the
end, as Go rounds ``MilliValue()``/``Value()`` of the summed quantity. A malformed or
negative quantity raises :class:`~common.errors.QuantityError`, and so does a total beyond
int64 milli-units, the range of any one quantity (:data:`common.quantity.MAX_MILLI`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from common import quantity
from common.errors import QuantityError

GPU: Final = "nvidia.com/gpu"
MIG_PREFIX: Final = "nvidia.com/mig-"
"""The NVIDIA device plugin's MIG instances in its mixed strategy: ``nvidia.com/mig-<profile>``."""
HUGEPAGES_PREFIX: Final = "hugepages-"
_QOS_RESOURCES: Final = frozenset({"cpu", "memory"})
_POD_LEVEL_RESOURCES: Final = frozenset({"cpu", "memory"})
_NOT_EXTENDED: Final = frozenset({"cpu", "memory", "ephemeral-storage", GPU})

Amounts = dict[str, Fraction]
"""Resource name -> exact quantity, like Go's ``v1.ResourceList``."""
Pod = Mapping[str, Any]
"""A pod as JSON (``metadata``, ``spec``, ``status``)."""


@dataclass(frozen=True, slots=True)
class Totals:
    """Requests or limits rounded the way Kubernetes reports them."""

    cpu_m: int
    mem_b: int
    gpu: int
    hugepages_b: int
    extended: dict[str, int] = field(default_factory=dict)


def requests(pod: Pod) -> Amounts:
    """``PodRequests``: containers, then pod-level cpu/memory if set, plus overhead."""
    spec = pod.get("spec") or {}
    total = _aggregate(spec, _requests_of)
    pod_level = _requests_of(spec.get("resources"))
    total.update({k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES})
    _add(total, _amounts(spec.get("overhead")))
    return _bounded(total, "requests")


def limits(pod: Pod) -> Amounts:
    """``PodLimits``: like requests, but overhead only raises limits that exist (0 = none)."""
    spec = pod.get("spec") or {}
    total = _aggregate(spec, _limits_of)
    pod_level = _limits_of(spec.get("resources"))
    total.update({k: v for k, v in pod_level.items() if k in _POD_LEVEL_RESOURCES})
    for name, value in _amounts(spec.get("overhead")).items():
        if name in total:
            total[name] += value
    return _bounded(total, "limits")


def qos_class(pod: Pod) -> str:
    """``status.qosClass`` if set, else ``ComputePodQOS``.

    Guaranteed: every container limits cpu and memory and the summed requests equal the
    summed limits; BestEffort: no cpu/memory request or limit anywhere; else Burstable.
    Pod-level resources, when set, replace the containers.
    """
    reported = (pod.get("status") or {}).get("qosClass")
    if reported:
        return str(reported)
    spec = pod.get("spec") or {}
    pod_level = spec.get("resources") or {}
    if pod_level.get("requests") or pod_level.get("limits"):
        groups = [pod_level]
    else:
        containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        groups = [c.get("resources") for c in containers]
    req: Amounts = {}
    lim: Amounts = {}
    guaranteed = True
    for rr in groups:
        _add(req, {k: v for k, v in _requests_of(rr).items() if k in _QOS_RESOURCES and v})
        own_limits = {k: v for k, v in _limits_of(rr).items() if k in _QOS_RESOURCES and v}
        _add(lim, own_limits)
        guaranteed = guaranteed and own_limits.keys() == _QOS_RESOURCES
    if not req and not lim:
        return "BestEffort"
    return "Guaranteed" if guaranteed and req == lim else "Burstable"


def totals(amounts: Amounts) -> Totals:
    """Round once, up, like ``MilliValue()`` for cpu and ``Value()`` for the rest."""
    hugepages = sum((v for k, v in amounts.items() if k.startswith(HUGEPAGES_PREFIX)), Fraction(0))
    extended = {
        k: math.ceil(v)
        for k, v in amounts.items()
        if k not in _NOT_EXTENDED and not k.startswith(HUGEPAGES_PREFIX)
    }
    return Totals(
        cpu_m=math.ceil(amounts.get("cpu", 0) * 1000),
        mem_b=math.ceil(amounts.get("memory", 0)),
        gpu=math.ceil(amounts.get(GPU, 0)),
        hugepages_b=math.ceil(hugepages),
        extended=extended,
    )


def _amounts(raw: Mapping[str, Any] | None) -> Amounts:
    out: Amounts = {}
    for name, text in (raw or {}).items():
        value = quantity.parse_value(str(text))
        if value < 0:
            raise QuantityError(f"{name}: negative quantity {text!r}")
        out[name] = value
    return out


def _bounded(total: Amounts, what: str) -> Amounts:
    """``total``, each amount within :data:`quantity.MAX_MILLI` like any one quantity:
    containers within range each can add up past it, and the sums go into int64 arrays."""
    for name, value in total.items():
        if math.ceil(value * 1000) > quantity.MAX_MILLI:
            raise QuantityError(
                f"{name}: total {what} out of range (at most {quantity.MAX_MILLI} milli-units)"
            )
    return total


def _requests_of(rr: Mapping[str, Any] | None) -> Amounts:
    """Requests, with API defaulting applied: a limit without a request is also the request."""
    if not rr:
        return {}
    return _amounts({**(rr.get("limits") or {}), **(rr.get("requests") or {})})


def _limits_of(rr: Mapping[str, Any] | None) -> Amounts:
    return _amounts(rr.get("limits")) if rr else {}


def _add(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, value), value)


def _aggregate(
    spec: Mapping[str, Any], pick: Callable[[Mapping[str, Any] | None], Amounts]
) -> Amounts:
    """``AggregateContainerRequests``: what the pod needs at its peak, container by container.

    Regular containers run together, so they add up. Init containers run one at a time,
    each alongside the sidecars (``restartPolicy: Always``) started before it; sidecars
    keep running, so they also add to the total. The peak is the larger of the two phases.
    """
    total: Amounts = {}
    for c in spec.get("containers") or []:
        _add(total, pick(c.get("resources")))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for c in spec.get("initContainers") or []:
        own = pick(c.get("resources"))
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            during = sidecars
        else:
            during = dict(own)
            _add(during, sidecars)
        _max(init_peak, during)
    _max(total, init_peak)
    return total
