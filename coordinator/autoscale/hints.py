"""Per queue: the room it lacks, and which node group to grow by how many nodes; and the
pending pods no autoscaler will ever add a node for.

For each bounded queue (:mod:`coordinator.autoscale.capacity`), over a frozen view of the
cluster:

1. **Its work**: its pending pods (unbound, not gated, not terminating), or while none
   are pending its bound ones. Of these, the pods of its commonest *shape* — node
   selector, required node affinity and tolerations, the constraints that decide which
   nodes may take a pod — are the work the hint is for; pods of other shapes are
   counted (``other_shapes``) but not planned for, so one odd pod cannot steer where a
   queue grows. Pods the feasibility model cannot judge (volumes, DRA claims) are
   counted as ``unjudged`` and left out too.
2. **The standard job**: a job is a PodGroup's pods of that shape, or a pod in none; the
   standard job is, per resource, the median (the lower of two middles) of the work's
   jobs' requests together. **The standard pod** is the same median over its pods.
3. **Demand**: what the pending pods of the work request, plus ``reserve_jobs`` standard
   jobs (2: the design's "less room than two standard jobs → scale"), per resource, but
   never more than the queue's headroom — its capability less what it holds (a
   ResourceQuota's ``used`` already counts the pending pods, Volcano's ``allocated``
   does not) — where the queue bounds that resource: room the queue may not use is no
   reason to grow.
4. **Room**: the free room (allocatable less what bound pods request) of the nodes that
   pass kube-scheduler's node-level filters for the work's shape (cordon, taints, node
   selector and affinity: :mod:`coordinator.feasibility`) and have room for a standard
   pod now; room a standard pod cannot use (fragments) does not count.
5. **Gap** = demand less room, per resource, where positive. With no gap there is no
   hint. With one, the group to grow is one whose template (:mod:`.groups`) takes the
   work's largest pod (per resource, the most any of its pods requests) under the same
   filters and NodeResourcesFit, and of those the one needing the fewest nodes,
   ``ceil(gap / the template's allocatable)`` for the resource that needs most, capped
   at ``max_nodes``; ties by name. No group taking it: a hint of no group and 0 nodes,
   saying why.

**Deadlocks**: a pending pod whose node selector or required node affinity names a
group label (``autoscale.group_labels``) that no known group's labels satisfy waits for a
node no autoscaler will add (the queue's node-group label and the autoscaler's groups
disagree). Such pods are reported per queue and what they ask for, and left out of the
queue's work.

What steers a hint is what the pod's owner could already steer kube-scheduler with: its
requests and its scheduling constraints. Its labels and annotations are never read here
(the queue is its PodGroup's, as everywhere), inter-pod rules are not judged against a
template, and a hint never asks for more than the queue's capability allows, nor more
than ``max_nodes``.

Pure: reads only what it is given, in a worker thread.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from coordinator import feasibility
from coordinator.autoscale import capacity, groups
from coordinator.autoscale.capacity import Bound, Capacities
from coordinator.autoscale.groups import Group
from coordinator.config import AutoscaleSettings
from coordinator.feasibility.rules import resources
from coordinator.live import LiveCluster
from coordinator.state.podfacts import PodFacts
from coordinator.state.podgroups import Queues

Amounts = Mapping[str, int]
Shape = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class View:
    """What the hints are worked out from, copied on the event loop."""

    nodes: Mapping[str, feasibility.Node]
    pods: Sequence[PodFacts]
    """Every non-terminal pod, bound or pending."""
    queues: Queues
    bounds: Mapping[str, Bound]
    groups: Sequence[Group]


@dataclass(frozen=True, slots=True)
class Hint:
    queue: str
    source: str
    """How the queue is told: on its Volcano Queue, or by an Event about its Namespace
    (:mod:`.capacity`, :mod:`.teller`)."""
    pending: int
    """Pending pods of the work."""
    standard: Amounts
    """The standard job, per resource."""
    demand: Amounts
    room: Amounts
    gap: Amounts
    """Per resource, what the queue lacks (only positive amounts): empty, no hint."""
    group: str | None
    """The group to grow (``label:value``), None when there is no gap or no group fits."""
    nodes: int
    reason: str
    other_shapes: int = 0
    unjudged: int = 0

    @property
    def scale(self) -> bool:
        return bool(self.gap)


@dataclass(frozen=True, slots=True)
class Deadlock:
    queue: str
    wants: str
    """What the pods ask for on a group label (``karpenter.sh/nodepool=gpu-a100``)."""
    pods: int
    example: str
    """One of the pods, ``namespace/name``."""
    known: tuple[str, ...]
    """The groups known under the labels asked for."""

    @property
    def reason(self) -> str:
        groups = ", ".join(self.known) or "none"
        return (
            f"{self.pods} pending pod(s) of queue {self.queue} (e.g. {self.example}) select"
            f" {self.wants}, which no node group an autoscaler grows has (known: {groups});"
            " nothing will scale for them"
        )


@dataclass(frozen=True, slots=True)
class Hints:
    hints: tuple[Hint, ...] = ()
    deadlocks: tuple[Deadlock, ...] = ()
    groups: tuple[str, ...] = field(default=())
    """Every group known (``label:value``)."""


def view_of(cluster: LiveCluster, capacities: Capacities, settings: AutoscaleSettings) -> View:
    """A copy of what the hints read, taken on the event loop (dicts copied, their values
    frozen): the planning thread sees no later watch event."""
    nodes = dict(cluster.node_facts)
    return View(
        nodes=nodes,
        pods=list(cluster.facts.values()),
        queues=cluster.podgroups.queues(),
        bounds=capacities.bounds(),
        groups=groups.groups(nodes, settings.group_labels, settings.templates),
    )


def plan(view: View, settings: AutoscaleSettings) -> Hints:
    """Every bounded queue's hint (sorted by queue) and every deadlock (by queue, then
    what is asked for)."""
    keys = settings.group_labels
    bound_pods = {p.uid: p.scheduling for p in view.pods if p.node is not None}
    snapshot = feasibility.Snapshot(view.nodes, bound_pods)
    passing: dict[Shape, list[str]] = {}
    """Shape → the nodes its pods pass the node-level filters on: the same for every
    queue of that shape, judged once per round."""
    by_queue: dict[str, list[PodFacts]] = {}
    deadlocked: dict[tuple[str, str, frozenset[str]], list[PodFacts]] = {}
    for pod in view.pods:
        if pod.scheduling.terminating:
            continue
        queue = view.queues.of(pod) or pod.namespace
        if _pending(pod) and pod.scheduling.unjudgeable is None:
            wants = _deadlock(pod.scheduling, view.groups, keys)
            if wants is not None:
                deadlocked.setdefault((queue, *wants), []).append(pod)
                continue
        by_queue.setdefault(queue, []).append(pod)
    deadlocks = tuple(
        Deadlock(
            queue,
            wants,
            len(pods),
            min(p.key for p in pods),
            tuple(g.name for g in view.groups if g.key in asked),
        )
        for (queue, wants, asked), pods in sorted(deadlocked.items(), key=lambda kv: kv[0][:2])
    )
    hints = tuple(
        _hint(bound, by_queue.get(queue, []), snapshot, view.groups, settings, passing)
        for queue, bound in sorted(view.bounds.items())
    )
    return Hints(
        tuple(h for h in hints if h is not None), deadlocks, tuple(g.name for g in view.groups)
    )


def _pending(pod: PodFacts) -> bool:
    return pod.node is None and pod.scheduling.gates == 0


def _shape(pod: feasibility.Pod) -> Shape:
    return (tuple(sorted(pod.node_selector.items())), pod.node_terms, pod.tolerations)


def _hint(
    bound: Bound,
    pods: list[PodFacts],
    snapshot: feasibility.Snapshot,
    known: Sequence[Group],
    settings: AutoscaleSettings,
    passing: dict[Shape, list[str]],
) -> Hint | None:
    pending = [p for p in pods if _pending(p)]
    drawn = pending or [p for p in pods if p.node is not None]
    unjudged = sum(1 for p in drawn if p.scheduling.unjudgeable is not None)
    judged = [p for p in drawn if p.scheduling.unjudgeable is None]
    if not judged:
        return None  # nothing to draw a standard job from
    shapes = Counter(_shape(p.scheduling) for p in judged)
    top = shapes.most_common(1)[0][0]  # ties: the shape met first
    work = [p for p in judged if _shape(p.scheduling) == top]
    jobs: dict[str, dict[str, int]] = {}
    for p in work:
        total = jobs.setdefault(p.gang or p.uid, {})
        for r, a in p.scheduling.requests.items():
            total[r] = total.get(r, 0) + a
    standard = _median(list(jobs.values()))
    standard_pod = _median([dict(p.scheduling.requests) for p in work])
    largest = {
        r: max(p.scheduling.requests.get(r, 0) for p in work)
        for r in sorted({r for p in work for r in p.scheduling.requests})
    }
    held = bound.allocated
    if held is None:
        held = _sum(p.scheduling.requests for p in pods if p.node is not None)
    demand: dict[str, int] = {}
    asked = _sum(p.scheduling.requests for p in work if _pending(p)) if pending else {}
    for r in sorted({*standard, *asked}):
        want = asked.get(r, 0) + settings.reserve_jobs * standard.get(r, 0)
        if r in bound.capability:
            left = bound.capability[r] - held.get(r, 0)
            if bound.source == capacity.QUOTA:  # a quota's used counts its pending pods
                left += asked.get(r, 0)
            want = min(want, max(0, left))
        if want > 0:
            demand[r] = want
    # The work's shape, unbound (a bound pod's nodeName would keep it off every other node).
    shape = replace(work[0].scheduling, node=None, nominated=None)
    probe = replace(shape, requests=standard_pod)
    room, counted = _room(probe, snapshot, demand, passing)
    gap = {r: demand[r] - room.get(r, 0) for r in demand if demand[r] > room.get(r, 0)}
    waiting = len(work) if pending else 0
    why = (
        f"queue {bound.queue}: {waiting} pending pod(s) and {settings.reserve_jobs} standard"
        f" job(s) ({_text(standard)}) want {_text(demand)}, {counted} node(s) have"
        f" {_text(room)} free for them"
    )
    hint = Hint(
        queue=bound.queue,
        source=bound.source,
        pending=waiting,
        standard=standard,
        demand=demand,
        room=room,
        gap=gap,
        group=None,
        nodes=0,
        reason=f"{why}: room enough",
        other_shapes=len(judged) - len(work),
        unjudged=unjudged,
    )
    if not gap:
        return hint
    chosen = _group(replace(shape, requests=largest), gap, known)
    if isinstance(chosen, str):
        return replace(hint, reason=f"{why}; lacking {_text(gap)}, but {chosen}")
    group, count = chosen
    capped = count > settings.max_nodes
    count = min(count, settings.max_nodes)
    each = _text({r: group.template.allocatable.get(r, 0) for r in gap})
    reason = f"{why}; lacking {_text(gap)}: add {count} node(s) of {group.name} ({each} each)" + (
        f", capped at autoscale.max_nodes {settings.max_nodes}" if capped else ""
    )
    return replace(hint, group=group.name, nodes=count, reason=reason)


def _room(
    probe: feasibility.Pod,
    snapshot: feasibility.Snapshot,
    demand: Amounts,
    passing: dict[Shape, list[str]],
) -> tuple[dict[str, int], int]:
    """The free room, per resource of ``demand``, of the nodes where ``probe`` (the
    standard pod, with the work's shape) fits now; and how many such nodes. The nodes
    passing the node-level filters are looked up in, or added to, ``passing``."""
    question = feasibility.Question(probe, snapshot)
    names = passing.get(key := _shape(probe))
    if names is None:
        names = passing[key] = [n for n in sorted(snapshot.nodes) if question.static(n).fits]
    room = dict.fromkeys(demand, 0)
    counted = 0
    for name in names:
        if question.short(name):
            continue
        counted += 1
        node = snapshot.nodes[name]
        used = snapshot.requested.get(name)  # filled by the question's short() just now
        if used is None:
            used = snapshot.requested[name] = resources.requested(snapshot, name)
        for r in room:
            room[r] += max(0, node.allocatable.get(r, 0) - used.get(r, 0))
    return room, counted


def _group(
    largest: feasibility.Pod, gap: Amounts, known: Sequence[Group]
) -> tuple[Group, int] | str:
    """The group needing the fewest nodes to close ``gap`` among those whose template
    takes ``largest``, and how many; or why none does."""
    best: tuple[int, str, Group] | None = None
    refusals = []
    for group in known:
        template = group.template
        question = feasibility.Question(
            largest, feasibility.Snapshot({template.name: template}, {})
        )
        verdict = question.static(template.name)
        short = question.short(template.name) if verdict.fits else {}
        if not verdict.fits or short:
            why = verdict.reason if not verdict.fits else f"its nodes are short of {_text(short)}"
            refusals.append(f"{group.name}: {why.replace(template.name, 'a new node')}")
            continue
        per = [
            math.ceil(g / template.allocatable[r])
            for r, g in gap.items()
            if template.allocatable.get(r)
        ]
        if len(per) < len(gap):
            missing = [r for r in gap if not template.allocatable.get(r)]
            refusals.append(f"{group.name}: its nodes offer no {', '.join(missing)}")
            continue
        key = (max(per), group.name, group)
        if best is None or key[:2] < best[:2]:
            best = key
    if best is None:
        listed = "; ".join(refusals) if refusals else "no node carries a group label"
        return f"no known node group takes its largest pod ({listed})"
    return best[2], best[0]


def _deadlock(
    pod: feasibility.Pod, known: Sequence[Group], keys: Sequence[str]
) -> tuple[str, frozenset[str]] | None:
    """What ``pod`` asks for on group labels, and which labels, when no group satisfies
    it; None when it asks for none, or some group satisfies it. Only the selector's and
    the terms' parts on group labels are judged: a zone or a GPU model is not the groups'
    business."""
    asked = {k: v for k, v in pod.node_selector.items() if k in keys}
    terms = [[r for r in t.expressions if r.key in keys] for t in (pod.node_terms or ())]
    if not asked and not any(terms):
        return None
    for group in known:
        labels = group.template.labels
        if any(labels.get(k) != v for k, v in asked.items()):
            continue
        if pod.node_terms is None or any(all(r.matches(labels) for r in t) for t in terms):
            return None
    wanted = [f"{k}={v}" for k, v in sorted(asked.items())]
    alternatives = [
        " and ".join(f"{r.key} {r.operator} ({','.join(sorted(r.values))})" for r in t)
        for t in terms
        if t
    ]
    if alternatives:
        wanted.append(" or ".join(alternatives))
    named = frozenset(asked) | {r.key for t in terms for r in t}
    return ", ".join(wanted), named


def _median(rows: list[dict[str, int]]) -> dict[str, int]:
    names = sorted({r for row in rows for r in row})
    found = {r: statistics.median_low([row.get(r, 0) for row in rows]) for r in names}
    return {r: a for r, a in found.items() if a}


def _sum(requests: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for request in requests:
        for r, a in request.items():
            total[r] = total.get(r, 0) + a
    return total


def amount(resource: str, value: int) -> float:
    """An amount in the unit people read it in: cpu in cores, the rest as is."""
    return value / 1000 if resource == "cpu" else float(value)


def _text(amounts: Amounts) -> str:
    if not amounts:
        return "nothing"
    parts = []
    for r, v in sorted(amounts.items()):
        if r == "cpu":
            parts.append(f"cpu {v / 1000:g}")
        elif r in ("memory", "ephemeral-storage"):
            parts.append(f"{r} {v / 2**30:.1f}Gi")
        else:
            parts.append(f"{r} {v}")
    return ", ".join(parts)
