"""The leader tells the hints: an Event, the metrics, and on a Volcano Queue an annotation.

Where a queue is told (:data:`QUEUE` or :data:`NAMESPACE`):

* a Volcano Queue's hint is annotated on the **Queue object** (cluster-scoped, the
  operators'): a JSON merge patch of ``metadata.annotations`` only, and an Event;
* a namespace queue's (bounded by ResourceQuotas) by an **Event about the Namespace**
  alone. Nothing is written on the Namespace or its ResourceQuotas: ``patch`` on
  Namespaces would let whoever holds the coordinator's token relabel any namespace
  (``pod-security.kubernetes.io/enforce=privileged``), and on ResourceQuotas raise a
  quota, so the shipped RBAC grants neither.

``stowage.io/scale-hint`` (:mod:`common.annotations`) carries the group, the nodes and the
gap while the queue lacks room, and ``stowage.io/scale-hint-reason`` why; both are
removed (a merge patch of null) once it has room again. A ``ScaleHint`` Event, on either
kind of queue, carries the same: its message is the annotation's value, a space, and the
reason (:func:`message`); ``ScaleHintCleared`` says the queue has room again. A changed
hint is told again. A deadlock (:class:`coordinator.autoscale.hints.Deadlock`) gets a
``ScaleDeadlock`` Warning, once while it lasts, on the Volcano Queue, else on the
namespace of the pods stuck.

* **Hints only.** Nothing here touches a Node, a node group or an autoscaler's objects.
* **Fenced**: every patch passes the lease's fence right before it is written, Events go
  through the fenced recorder; a follower tells nothing (it still keeps the metrics and
  ``/debug/hints``, from its own watches).
* **Rate-limited**: what tells a queue (a Queue's patch, a namespace's Event) and deadlock
  Events share one token bucket (``autoscale.max_patches_per_s``), beside the recorder's
  own; what does not fit waits for the next round, new hints before clearings. A
  namespace's Event the recorder held back or failed to write is told again next round.
* **A new term trusts nothing it wrote before**: it lists the Queues that carry a hint
  now and takes those as told, so an old leader's hint no longer due is cleared and one
  still due is rewritten only if it changed. What a term told the namespaces is kept in
  its memory only: a new leader tells a namespace's still-due hint once more, and a
  namespace whose hint an old leader told and that has room by now gets no
  ``ScaleHintCleared`` (its gauges are gone, ``/debug/hints`` shows it with room).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from common import annotations as ann
from common.clock import Clock
from coordinator.autoscale import capacity
from coordinator.autoscale.hints import Hint, Hints, amount
from coordinator.config import AutoscaleSettings
from coordinator.kube.client import KubeError, translate
from coordinator.kube.events import EventRecorder, EventType, ObjectRef, Recorded
from coordinator.kube.leader import Fence, LeaseLost
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket

log = logging.getLogger(__name__)

QUEUE: Final = "Queue"
NAMESPACE: Final = "Namespace"
VOLCANO_GROUP, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"
TOLD: Final = "ScaleHint"
CLEARED: Final = "ScaleHintCleared"
DEADLOCK: Final = "ScaleDeadlock"
LIST_TIMEOUT_S: Final = 60.0
PATCH_TIMEOUT_S: Final = 10.0

Target = tuple[str, str]
"""(:data:`QUEUE` or :data:`NAMESPACE`, its name)."""


def target_of(hint: Hint) -> Target:
    return (QUEUE if hint.source == capacity.VOLCANO else NAMESPACE, hint.queue)


def ref(target: Target) -> ObjectRef:
    kind, name = target
    if kind == QUEUE:
        return ObjectRef(kind=QUEUE, name=name, api_version=f"{VOLCANO_GROUP}/{VOLCANO_VERSION}")
    return ObjectRef(kind=NAMESPACE, name=name)


def pairs_of(hint: Hint) -> dict[str, str]:
    """The annotation's pairs (what a change is judged on; the time is added on writing):
    ``group=karpenter.sh/nodepool:gpu-a100,nodes=2,gap=nvidia.com/gpu:16`` (cpu in cores,
    resources joined by ``+``)."""
    gap = "+".join(f"{r}:{amount(r, v):g}" for r, v in sorted(hint.gap.items()))
    return {"group": hint.group or "none", "nodes": str(hint.nodes), "gap": gap}


def message(hint: Hint, now: float) -> str:
    """A ``ScaleHint`` Event's message: the annotation's value (no spaces in it), a space,
    and the reason — so a namespace, which has no annotation, is told the same pairs."""
    return f"{ann.value(pairs_of(hint), now)} {hint.reason}"


class Teller:
    """What this term told each queue (the hint's pairs)."""

    def __init__(
        self,
        annotated: Callable[[], dict[str, str]],
        patch: Callable[[str, dict[str, Any]], None],
        recorder: EventRecorder,
        fence: Fence,
        settings: AutoscaleSettings,
        clock: Clock,
    ) -> None:
        self._annotated = annotated
        self._patch = patch
        self._recorder = recorder
        self._fence = fence
        self._clock = clock
        # A round may spend what a round's time earns: a burst of one second's worth told
        # one queue a round (60 s), so 50 queues waited 50 minutes for their hints.
        per_round = settings.max_patches_per_s * settings.interval_s
        self._bucket = TokenBucket(settings.max_patches_per_s, max(1.0, per_round))
        self.told: dict[Target, dict[str, str]] = {}
        self._deadlocks: set[tuple[str, str]] = set()
        """Deadlocks told this term, (queue, what is asked): told once while they last."""

    async def start_term(self) -> bool:
        """Take the hints the Queues carry now as told, and no namespace's (none is
        written down); False when the Queues cannot be read (the caller tries again next
        round)."""
        try:
            found = await asyncio.to_thread(self._annotated)
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate("list scale hints", e)
            log.warning("%s; scale hints wait for the next round", error)
            return False
        self.told = {(QUEUE, name): ann.parse(v)[0] for name, v in found.items()}
        self._deadlocks = set()
        return True

    async def tell(self, hints: Hints) -> int:
        """Tell what is due within the budget; return how many queues were told (a
        Queue patched, a namespace's Event written)."""
        self._bucket.refill(self._clock.monotonic())
        now = self._clock.wall()
        due: list[tuple[Target, Hint | None]] = []
        """Each queue to tell, with its hint (None: to clear)."""
        wanted: set[Target] = set()
        for hint in hints.hints:
            if not hint.scale:
                continue
            target = target_of(hint)
            wanted.add(target)
            if self.told.get(target) != pairs_of(hint):
                due.append((target, hint))
        due += [(t, None) for t in sorted(self.told) if t not in wanted]
        written = 0
        for target, told in due:
            if not self._bucket.take():
                return written
            if target[0] == QUEUE:
                done = await self._annotate(target, told, now)
            else:
                done = await self._announce(target, told, now)
            if done is None:
                return written
            if not done:
                continue
            written += 1
            if told is None:
                del self.told[target]
            else:
                self.told[target] = pairs_of(told)
        await self._tell_deadlocks(hints)
        return written

    async def _annotate(self, target: Target, hint: Hint | None, now: float) -> bool | None:
        """A Queue: its annotations patched (null: removed), then the Event."""
        value = None if hint is None else ann.value(pairs_of(hint), now)
        reason = None if hint is None else ann.reason(hint.reason)
        notes = {ann.SCALE_HINT: value, ann.SCALE_HINT_REASON: reason}
        done = await self._fenced_patch(target, {"metadata": {"annotations": notes}})
        if done:
            await self._notice(target, hint, now)
        return done

    async def _announce(self, target: Target, hint: Hint | None, now: float) -> bool | None:
        """A namespace: the Event alone, so told only once it is written (or was, within
        the recorder's dedupe window); None when the lease is lost."""
        result = await self._notice(target, hint, now)
        if result is Recorded.NOT_LEADER:
            return None
        return result in (Recorded.SENT, Recorded.DUPLICATE)

    async def _notice(self, target: Target, hint: Hint | None, now: float) -> Recorded:
        if hint is None:
            return await self._event(target, EventType.NORMAL, CLEARED, "the queue has room again")
        return await self._event(target, EventType.NORMAL, TOLD, message(hint, now))

    async def _tell_deadlocks(self, hints: Hints) -> None:
        volcano = {h.queue for h in hints.hints if h.source == capacity.VOLCANO}
        current = {(d.queue, d.wants) for d in hints.deadlocks}
        self._deadlocks &= current
        for d in hints.deadlocks:
            if (d.queue, d.wants) in self._deadlocks:
                continue
            if not self._bucket.take():
                return
            namespace = d.example.partition("/")[0]
            target = (QUEUE, d.queue) if d.queue in volcano else (NAMESPACE, namespace)
            self._deadlocks.add((d.queue, d.wants))
            log.warning("scale deadlock: %s", d.reason)
            await self._event(target, EventType.WARNING, DEADLOCK, d.reason)

    async def _event(self, target: Target, kind: EventType, reason: str, text: str) -> Recorded:
        return await asyncio.to_thread(self._recorder.record, ref(target), kind, reason, text)

    async def _fenced_patch(self, target: Target, body: dict[str, Any]) -> bool | None:
        """A Queue's patch: True when written, False when the API refused (tried again
        next round), None when the lease is lost (nothing more this round)."""

        def fenced() -> None:
            self._fence.check(f"patch {target[0]} {target[1]}")
            self._patch(target[1], body)

        try:
            await asyncio.to_thread(fenced)
        except LeaseLost as e:
            log.warning("%s", e)
            return None
        except Exception as e:
            what = f"patch {target[0].lower()} {target[1]}"
            error = e if isinstance(e, KubeError) else translate(what, e)
            log.warning("%s; trying again next round", error)
            return False
        return True


def publish(hints: Hints, metrics: CoordinatorMetrics) -> None:
    """Set the hints' gauges; cleared first, so a queue with room leaves no series (no
    await between: a scrape sees all or none)."""
    metrics.scale_hint_nodes.clear()
    metrics.scale_hint_gap.clear()
    metrics.scale_deadlocked_pods.clear()
    for hint in hints.hints:
        if not hint.scale:
            continue
        metrics.scale_hint_nodes.labels(hint.queue, hint.group or "none").set(hint.nodes)
        for resource, value in hint.gap.items():
            metrics.scale_hint_gap.labels(hint.queue, resource).set(amount(resource, value))
    stuck: dict[str, int] = {}
    for d in hints.deadlocks:
        stuck[d.queue] = stuck.get(d.queue, 0) + d.pods
    for queue, pods in stuck.items():
        metrics.scale_deadlocked_pods.labels(queue).set(pods)


def annotated(api_client: Any) -> Callable[[], dict[str, str]]:
    """The Volcano Queues carrying a hint now, by name (one list, at the start of a
    term); a cluster without Volcano has no Queues (the list's 404)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api_client)

    def read() -> dict[str, str]:
        queues: Any
        try:
            queues = custom.list_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues", _request_timeout=LIST_TIMEOUT_S
            )
        except ApiException as e:
            if e.status != 404:
                raise
            queues = {"items": []}
        found: dict[str, str] = {}
        for q in queues.get("items") or []:
            meta = q.get("metadata") or {}
            value = (meta.get("annotations") or {}).get(ann.SCALE_HINT)
            if value and meta.get("name"):
                found[meta["name"]] = value
        return found

    return read


def patcher(api_client: Any) -> Callable[[str, dict[str, Any]], None]:
    """A JSON merge patch of a Volcano Queue, by name, through the real client."""
    from kubernetes import client

    custom = client.CustomObjectsApi(api_client)

    def patch(name: str, body: dict[str, Any]) -> None:
        custom.patch_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            name,
            body,
            _content_type="application/merge-patch+json",
            _request_timeout=PATCH_TIMEOUT_S,
        )

    return patch


async def run(
    plan: Callable[[], Any],
    teller: Teller,
    metrics: CoordinatorMetrics,
    leader: asyncio.Event,
    settings: AutoscaleSettings,
    view: Callable[[Hints], None],
) -> None:
    """Every ``interval_s``: work the hints out off the loop (``plan`` returns the
    blocking call) on every replica, keep them for ``/debug/hints`` (``view``) and the
    metrics, and on the leader tell them."""
    term = False
    while True:
        try:
            hints = await asyncio.to_thread(plan())
            view(hints)
            publish(hints, metrics)
            if leader.is_set():
                term = term or await teller.start_term()
                if term:
                    await teller.tell(hints)
            else:
                term = False
        except Exception:
            log.exception("scale hints failed; trying again next round")
        await asyncio.sleep(settings.interval_s)
