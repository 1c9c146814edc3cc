"""What the feasibility model reads of Pods and Nodes: the fields kube-scheduler's
default filters read, taken once from the JSON the watches deliver and kept frozen.

A field of the wrong shape is never guessed at: the pod is kept with
:attr:`Pod.unjudgeable` saying why, and the model then plans nothing for it or around
it (:mod:`coordinator.feasibility.model`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from common import podspec, quantity
from common.errors import QuantityError
from coordinator.feasibility.selectors import (
    LabelSelector,
    Malformed,
    NodeSelectorTerm,
    Requirement,
    label_selector,
    node_selector_term,
)

UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"
JUDGED_VOLUMES: Final = frozenset(
    {"configMap", "secret", "emptyDir", "downwardAPI", "projected", "hostPath", "name"}
)
"""Volume sources no default filter reads (the ``name`` key is every volume's own).
Any other source (a PVC, an ephemeral volume, a cloud disk) is for the volume filters
(VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits), which the model
does not mirror."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    """``Exists`` or ``Equal`` (the API's default for an empty operator)."""
    value: str
    effect: str
    """Empty: every effect."""

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint``: the effect (empty matches all), the key (empty
        with ``Exists`` matches every key), then ``Exists`` or an equal value."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port bound on the node: ``(protocol, hostIP, hostPort)``."""

    protocol: str
    ip: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """``HostPortInfo.CheckConflict``: the same protocol and port, and the same IP
        or either one ``0.0.0.0`` (every address)."""
        return (
            self.port == other.port
            and self.protocol == other.protocol
            and (self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip))
        )


@dataclass(frozen=True, slots=True)
class PodTerm:
    """A required inter-pod (anti-)affinity term: pods matching :attr:`selector` in
    :attr:`namespaces` (None: every namespace), within :attr:`topology_key`'s domain."""

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str

    def selects(self, pod: Pod) -> bool:
        return (self.namespaces is None or pod.namespace in self.namespaces) and (
            self.selector.matches(pod.labels)
        )


@dataclass(frozen=True, slots=True)
class Spread:
    """A ``topologySpreadConstraint`` with ``whenUnsatisfiable: DoNotSchedule``."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    """``nodeAffinityPolicy`` (default ``Honor``): only nodes the pod's node affinity
    matches count."""
    honor_taints: bool
    """``nodeTaintsPolicy`` (default ``Ignore``): when ``Honor``, only nodes whose taints
    the pod tolerates count."""


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as kube-scheduler's filters read it."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    node: str | None
    """``spec.nodeName``."""
    priority: int
    requests: Mapping[str, int]
    """Resource name → what the pod needs at its peak (:func:`common.podspec.requests`:
    containers, init containers and sidecars, pod-level resources, overhead), cpu in
    milli-cores, the rest in units, rounded up."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_terms: tuple[NodeSelectorTerm, ...] | None = None
    """Required node affinity terms, ORed; None: no required node affinity."""
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    affinity: tuple[PodTerm, ...] = ()
    anti_affinity: tuple[PodTerm, ...] = ()
    spread: tuple[Spread, ...] = ()
    preemption_policy: str = "PreemptLowerPriority"
    gates: int = 0
    """How many ``schedulingGates`` hold it back."""
    nominated: str | None = None
    """``status.nominatedNodeName``."""
    terminating: bool = False
    """``metadata.deletionTimestamp`` is set."""
    unjudgeable: str | None = None
    """Why the model cannot say where this pod could run (volumes, DRA claims, a field it
    cannot read); None when it can."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Node:
    """A node as kube-scheduler's filters read it."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Mapping[str, int]
    """Resource name → ``status.allocatable`` (cpu in milli-cores), ``pods`` included."""


# ------------------------------------------------------------------- reading


def node_of(node: Mapping[str, Any]) -> Node:
    """The filters' view of a Node object. Fields of the wrong shape read as absent
    except the allocatable amounts, which raise :class:`Malformed` (the caller skips
    such a node, as it skips it for the scoring state)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in (spec.get("taints") or [])
        if isinstance(t, Mapping)
    )
    try:
        allocatable = amounts(status.get("allocatable") or status.get("capacity") or {})
    except Malformed as e:
        raise Malformed(f"status.allocatable: {e}") from e
    return Node(
        name=str(meta.get("name") or ""),
        labels=_strings(meta.get("labels")),
        taints=taints,
        unschedulable=spec.get("unschedulable") is True,
        allocatable=allocatable,
    )


def pod_of(pod: Mapping[str, Any]) -> Pod:
    """The filters' view of a Pod object; never raises: what cannot be read makes the
    pod :attr:`Pod.unjudgeable`."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    namespace = str(meta.get("namespace") or "default")
    labels = _strings(meta.get("labels"))
    priority = spec.get("priority")
    base = Pod(
        uid=str(meta.get("uid") or ""),
        namespace=namespace,
        name=str(meta.get("name") or ""),
        labels=labels,
        node=spec.get("nodeName") or None,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        requests={},
        preemption_policy=str(spec.get("preemptionPolicy") or "PreemptLowerPriority"),
        gates=len(spec.get("schedulingGates") or ()),
        nominated=status.get("nominatedNodeName") or None,
        terminating=meta.get("deletionTimestamp") is not None,
    )
    try:
        return _judged(base, spec, namespace, labels)
    except (Malformed, QuantityError, AttributeError, TypeError, ValueError) as e:
        return replace(base, unjudgeable=f"pod {base.key}: {e}")


def _judged(base: Pod, spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> Pod:
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = None
    if node_affinity is not None:
        terms = tuple(node_selector_term(t) for t in node_affinity.get("nodeSelectorTerms") or [])
    own = {"namespace": namespace, "labels": labels}
    return replace(
        base,
        requests=_rounded(podspec.requests({"spec": spec})),
        node_selector=_strings(spec.get("nodeSelector")),
        node_terms=terms,
        tolerations=tuple(_toleration(t) for t in spec.get("tolerations") or []),
        host_ports=_host_ports(spec),
        affinity=_pod_terms(affinity.get("podAffinity"), own),
        anti_affinity=_pod_terms(affinity.get("podAntiAffinity"), own),
        spread=tuple(
            s
            for c in spec.get("topologySpreadConstraints") or []
            if (s := _spread(c, labels)) is not None
        ),
        unjudgeable=_unjudged(spec),
    )


def _unjudged(spec: Mapping[str, Any]) -> str | None:
    """What the model does not mirror: volume sources for the volume filters, and DRA
    resource claims (the DynamicResources filter)."""
    if spec.get("resourceClaims"):
        return "it claims DRA resources (spec.resourceClaims), which the model does not judge"
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - JUDGED_VOLUMES
        if kinds:
            return (
                f"volume {volume.get('name')!r} is a {sorted(kinds)[0]}, which only the"
                " volume filters judge"
            )
    return None


def _toleration(raw: Mapping[str, Any]) -> Toleration:
    op = str(raw.get("operator") or "Equal")
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=op,
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports of the regular containers and of the sidecars (restartable init
    containers), which run alongside them for the pod's life."""
    containers = [
        *(spec.get("containers") or []),
        *(c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"),
    ]
    ports = []
    for container in containers:
        for port in container.get("ports") or []:
            number = port.get("hostPort")
            if isinstance(number, int) and number > 0:
                ports.append(
                    HostPort(
                        str(port.get("protocol") or "TCP"),
                        str(port.get("hostIP") or "0.0.0.0"),
                        number,
                    )
                )
    return tuple(ports)


def _pod_terms(raw: Any, own: Mapping[str, Any]) -> tuple[PodTerm, ...]:
    """The required terms of a ``podAffinity`` or ``podAntiAffinity``. A term's namespaces
    are its ``namespaces`` list, or every namespace when ``namespaceSelector`` is ``{}``,
    or the pod's own when neither is given; a non-empty ``namespaceSelector`` selects by
    Namespace labels, which the model does not keep: :class:`Malformed` (unjudgeable).
    ``matchLabelKeys``/``mismatchLabelKeys`` join the selector with the pod's own values."""
    if not raw:
        return ()
    terms = []
    for term in raw.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        selector = label_selector(term.get("labelSelector"))
        names = term.get("namespaces") or []
        chosen = term.get("namespaceSelector")
        if chosen and (chosen.get("matchLabels") or chosen.get("matchExpressions")):
            raise Malformed("a pod affinity term selects namespaces by their labels")
        namespaces: frozenset[str] | None = frozenset(str(n) for n in names)
        if chosen is not None:
            namespaces = None  # an empty namespaceSelector: every namespace
        elif not names:
            namespaces = frozenset({own["namespace"]})
        selector = selector.plus(_label_keys(term, own["labels"]))
        key = str(term.get("topologyKey") or "")
        if not key:
            raise Malformed("a pod affinity term without topologyKey")
        terms.append(PodTerm(selector, namespaces, key))
    return tuple(terms)


def _spread(raw: Mapping[str, Any], labels: Mapping[str, str]) -> Spread | None:
    if raw.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
        return None
    skew = raw.get("maxSkew")
    if not isinstance(skew, int) or skew < 1:
        raise Malformed("topologySpreadConstraint.maxSkew is not a positive integer")
    key = str(raw.get("topologyKey") or "")
    if not key:
        raise Malformed("topologySpreadConstraint without topologyKey")
    min_domains = raw.get("minDomains") or 1
    selector = label_selector(raw.get("labelSelector")).plus(_label_keys(raw, labels))
    return Spread(
        max_skew=skew,
        topology_key=key,
        selector=selector,
        min_domains=min_domains if isinstance(min_domains, int) else 1,
        honor_affinity=raw.get("nodeAffinityPolicy", "Honor") != "Ignore",
        honor_taints=raw.get("nodeTaintsPolicy", "Ignore") == "Honor",
    )


def _label_keys(raw: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[Requirement, ...]:
    """``matchLabelKeys`` as ``key In (own value)``, ``mismatchLabelKeys`` as ``NotIn``;
    keys the pod has no label for are skipped, as upstream skips them."""
    out = [
        Requirement(k, "In", frozenset({labels[k]}))
        for k in raw.get("matchLabelKeys") or []
        if k in labels
    ]
    out.extend(
        Requirement(k, "NotIn", frozenset({labels[k]}))
        for k in raw.get("mismatchLabelKeys") or []
        if k in labels
    )
    return tuple(out)


def amounts(raw: Mapping[str, Any]) -> dict[str, int]:
    """A resource list (``{"cpu": "500m", "memory": "1Gi"}``) in the model's units: cpu in
    milli-cores, the rest in units, rounded up; :class:`Malformed` for a quantity that is
    not one. Node allocatable and queue capabilities alike."""
    try:
        return _rounded({str(k): quantity.parse_value(str(v)) for k, v in raw.items()})
    except (QuantityError, AttributeError) as e:
        raise Malformed(str(e)) from e


def _rounded(amounts: podspec.Amounts) -> dict[str, int]:
    """Like ``MilliValue()`` for cpu and ``Value()`` for the rest."""
    return {k: math.ceil(v * 1000) if k == "cpu" else math.ceil(v) for k, v in amounts.items() if v}


def _strings(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}
