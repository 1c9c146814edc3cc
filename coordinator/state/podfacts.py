"""What the planner needs to know about pods and PodDisruptionBudgets, read once from the
objects the watches deliver and kept small (a Pod object is kilobytes; its facts are a
few fields).

A pod's owner writes its labels, annotations and most of its spec, so no fact read here
may favour the pod against other namespaces' pods:

* Its **priority** is ``spec.priority``, which the Priority admission plugin resolves from
  ``priorityClassName`` (and refuses a pod that sets another value): PriorityClasses are
  cluster-scoped and written by operators. The level label may only lower the level it
  gives (:func:`coordinator.eviction.answers.level_of`).
* Its **gang** is its Volcano PodGroup (annotation ``scheduling.k8s.io/group-name`` or
  ``scheduling.volcano.sh/group-name``, which Volcano's controllers set on every pod of a
  job: :func:`coordinator.state.kubeobjects.podgroup_of`); how many members the gang needs to
  keep running is ``stowage.io/gang-min-member`` on the pod, and when that is not given,
  every running member: evicting any member then costs the whole gang, the safe
  assumption for a gang-scheduled job. Its **queue** is that PodGroup's ``spec.queue``
  (:mod:`coordinator.state.podgroups`), else its namespace; never a queue the pod names.
* Its **last checkpoint** is ``stowage.io/last-checkpoint`` or
  ``volcano.sh/last-checkpoint-time`` (RFC 3339, or Unix seconds). A pod annotated
  ``stowage.io/checkpointing: "true"`` claims to be writing one now; the claim shields it
  for a bounded time only (:mod:`coordinator.state.checkpointing`).
* A **PodDisruptionBudget** covers the pods of its namespace its selector matches, as the
  Eviction API matches them: a nil or empty selector covers none.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from coordinator import feasibility
from coordinator.state.kubeobjects import podgroup_of
from coordinator.state.podrequest import PodRequest

log = logging.getLogger(__name__)

CHECKPOINT_KEYS: Final = ("stowage.io/last-checkpoint", "volcano.sh/last-checkpoint-time")
CHECKPOINTING_KEY: Final = "stowage.io/checkpointing"
MIRROR_KEY: Final = "kubernetes.io/config.mirror"


@dataclass(frozen=True, slots=True)
class PodFacts:
    """One pod, as the planner judges it."""

    uid: str
    namespace: str
    name: str
    node: str | None
    """Where it is bound; None while pending."""
    priority: int
    """``spec.priority`` (what its PriorityClass resolved to); 0 when not set."""
    labels: Mapping[str, str]
    level_mark: str | None
    """The level named by the configured label or annotation, lower-cased, if any: its
    owner's word, which may only lower the level its priority gives."""
    gang: str | None
    """``namespace/podgroup``: the PodGroup whose ``spec.queue`` is the pod's queue."""
    gang_min: int | None
    checkpoint_at: float | None
    """Unix seconds of its last checkpoint, if known."""
    checkpointing: bool
    """Annotated ``stowage.io/checkpointing: "true"``: a claim, which shields the pod only
    as long as :class:`coordinator.state.checkpointing.CheckpointingClaims` allows."""
    started_at: float | None
    """Unix seconds of ``status.startTime``, if known."""
    request: PodRequest
    scheduling: feasibility.Pod
    """What kube-scheduler's filters read of it (:mod:`coordinator.feasibility`)."""
    daemon: bool = False
    """Owned by a DaemonSet (its controller ``ownerReferences``) or a kubelet's mirror pod:
    it belongs to its node, and a drain leaves it there, as ``kubectl drain
    --ignore-daemonsets`` does. Its owner's word, which spares only the pod itself."""
    controlled: bool = False
    """It has a controller (an ``ownerReferences`` entry with ``controller: true``), which
    recreates it once it is evicted: a drain moves only such pods (``kubectl drain``
    refuses the others too). Its owner's word, which can get only the pod itself evicted."""
    controller_uid: str | None = None
    """That controller's ``uid`` (None: no controller): what a reservation made for the
    pod's replacement is keyed by, with the namespace
    (:mod:`coordinator.live.nominations`). A pod's owner can name any uid there, but only
    within its own namespace, so it can claim no other tenant's room."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_facts(pod: Mapping[str, Any], request: PodRequest, level_label: str) -> PodFacts:
    """The facts of a Pod object whose request was read already. Malformed annotations
    (a checkpoint time that is not a time) are taken as absent, with a warning: they must
    not stop the watch, and absent is the cautious reading (more work at stake)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    notes = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    marks = {**notes, **labels}
    spec = pod.get("spec") or {}
    priority = spec.get("priority")
    group = podgroup_of(pod)
    mark = marks.get(level_label)
    controller = controller_of(pod)
    return PodFacts(
        uid=str(meta.get("uid") or ""),
        namespace=namespace,
        name=name,
        node=spec.get("nodeName") or None,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        labels=labels,
        level_mark=mark.strip().lower() if mark else None,
        gang=f"{namespace}/{group}" if group else None,
        gang_min=request.gang_size,
        checkpoint_at=next(
            (
                t
                for k in CHECKPOINT_KEYS
                if (t := _time(marks.get(k), f"pod {namespace}/{name}: {k}")) is not None
            ),
            None,
        ),
        checkpointing=marks.get(CHECKPOINTING_KEY, "").strip().lower() == "true",
        started_at=_time((pod.get("status") or {}).get("startTime"), None),
        request=request,
        scheduling=feasibility.pod_of(pod),
        daemon=MIRROR_KEY in notes
        or (controller is not None and controller.get("kind") == "DaemonSet"),
        controlled=controller is not None,
        controller_uid=controller_uid(pod),
    )


def controller_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's controller: its ``ownerReferences`` entry with ``controller: true``."""
    owners = (pod.get("metadata") or {}).get("ownerReferences")
    return next(
        (
            ref
            for ref in (owners if isinstance(owners, list) else ())
            if isinstance(ref, Mapping) and ref.get("controller") is True
        ),
        None,
    )


def controller_uid(pod: Mapping[str, Any]) -> str | None:
    """The uid of the pod's controller (None: none, or one without a uid)."""
    ref = controller_of(pod)
    uid = None if ref is None else ref.get("uid")
    return uid if isinstance(uid, str) and uid else None


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget: the pods it covers and how many may go now."""

    namespace: str
    name: str
    match_labels: Mapping[str, str]
    expressions: tuple[tuple[str, str, frozenset[str]], ...]
    """``(key, operator, values)`` of ``matchExpressions``."""
    allowed: int
    """``status.disruptionsAllowed``; 0 until the disruption controller has observed it."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: PodFacts) -> bool:
        if pod.namespace != self.namespace:
            return False
        labels = pod.labels
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for key, op, values in self.expressions:
            present = key in labels
            if op == "In" and labels.get(key) not in values:
                return False
            if op == "NotIn" and present and labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


def budget_of(pdb: Mapping[str, Any]) -> Budget | None:
    """The budget of a PodDisruptionBudget object; None for one that covers no pod (nil
    or empty selector, or an operator the API server would not accept)."""
    meta = pdb.get("metadata") or {}
    selector = (pdb.get("spec") or {}).get("selector") or {}
    labels = {str(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()}
    expressions = []
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return None
        values = frozenset(str(v) for v in expr.get("values") or [])
        expressions.append((str(expr.get("key") or ""), str(op), values))
    if not labels and not expressions:
        return None
    status = pdb.get("status") or {}
    generation = meta.get("generation")
    observed = status.get("observedGeneration")
    allowed = status.get("disruptionsAllowed")
    if not isinstance(allowed, int) or (
        isinstance(generation, int) and (not isinstance(observed, int) or observed < generation)
    ):
        allowed = 0  # not yet observed: the Eviction API answers 429 until it is
    return Budget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        match_labels=labels,
        expressions=tuple(expressions),
        allowed=allowed,
    )


class Budgets:
    """The PodDisruptionBudgets of the cluster, fed by their watch. Until the first list
    has arrived (``synced``) nothing is known to be safe, and the planner plans nothing."""

    def __init__(self) -> None:
        self.by_key: dict[str, Budget] = {}
        self.synced = False

    def replace(self, pdbs: Iterable[Mapping[str, Any]]) -> None:
        self.by_key = {}
        for pdb in pdbs:
            self.upsert(pdb)
        self.synced = True

    def upsert(self, pdb: Mapping[str, Any]) -> None:
        meta = pdb.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        budget = budget_of(pdb)
        if budget is None:
            self.by_key.pop(key, None)
        else:
            self.by_key[key] = budget

    def remove(self, pdb: Mapping[str, Any]) -> None:
        meta = pdb.get("metadata") or {}
        self.by_key.pop(f"{meta.get('namespace') or 'default'}/{meta.get('name')}", None)


def _time(raw: Any, where: str | None) -> float | None:
    """Unix seconds of an RFC 3339 time or a number; None (and a warning naming ``where``)
    for anything else."""
    if raw is None or raw == "":
        return None
    text = str(raw).strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(seconds):
            return seconds
        text = ""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        if where:
            log.warning("%s: %r is not a time (RFC 3339 with a zone, or Unix seconds)", where, raw)
        return None
    return moment.timestamp()
