"""The leader tells the hints: an annotation on the queue, an Event, and the metrics.

Where a queue is told (:data:`QUEUE` or :data:`NAMESPACE`):

* a Volcano Queue's hint goes on the **Queue object** (cluster-scoped, the operators');
* a namespace queue's (bounded by ResourceQuotas) on the **Namespace**: the object that
  is the queue, readable by whoever may read the namespace; the ResourceQuotas are left
  to their own writers (and the quota controller). Both writes are a JSON merge patch of
  ``metadata.annotations`` only.

``stowage.io/scale-hint`` (:mod:`common.annotations`) carries the group, the nodes and the
gap while the queue lacks room, and ``stowage.io/scale-hint-reason`` why; both are
removed (a merge patch of null, a ``ScaleHintCleared`` Event) once it has room again. A
changed hint is patched again with a ``ScaleHint`` Event. A deadlock
(:class:`coordinator.autoscale.hints.Deadlock`) gets a ``ScaleDeadlock`` Warning, once
while it lasts, on the Volcano Queue, else on the namespace of the pods stuck.

* **Hints only.** Nothing here touches a Node, a node group or an autoscaler's objects.
* **Fenced**: every patch passes the lease's fence right before it is written, Events go
  through the fenced recorder; a follower tells nothing (it still keeps the metrics and
  ``/debug/hints``, from its own watches).
* **Rate-limited**: patches and deadlock Events share one token bucket
  (``autoscale.max_patches_per_s``); what does not fit waits for the next round, new
  hints before clearings.
* **A new term trusts nothing it wrote before**: it lists the Queues and Namespaces that
  carry a hint now and takes those as told, so an old leader's hint no longer due is
  cleared and one still due is rewritten only if it changed.
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
from coordinator.kube.client import KubeError, metadata, name_of, translate
from coordinator.kube.events import EventRecorder, EventType, ObjectRef
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


class Teller:
    """What this term told each queue (its annotation's pairs)."""

    def __init__(
        self,
        annotated: Callable[[], dict[Target, str]],
        patch: Callable[[Target, dict[str, Any]], None],
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
        self._bucket = TokenBucket(settings.max_patches_per_s, max(1.0, settings.max_patches_per_s))
        self.told: dict[Target, dict[str, str]] = {}
        self._deadlocks: set[tuple[str, str]] = set()
        """Deadlocks told this term, (queue, what is asked): told once while they last."""

    async def start_term(self) -> bool:
        """Take the hints the objects carry now as told; False when they cannot be read
        (the caller tries again next round)."""
        try:
            found = await asyncio.to_thread(self._annotated)
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate("list scale hints", e)
            log.warning("%s; scale hints wait for the next round", error)
            return False
        self.told = {t: ann.parse(v)[0] for t, v in found.items()}
        self._deadlocks = set()
        return True

    async def tell(self, hints: Hints) -> int:
        """Write what is due within the budget; return how many patches were written."""
        self._bucket.refill(self._clock.monotonic())
        now = self._clock.wall()
        due: list[tuple[Target, str | None, str | None]] = []
        wanted: set[Target] = set()
        for hint in hints.hints:
            if not hint.scale:
                continue
            target = target_of(hint)
            wanted.add(target)
            if self.told.get(target) != pairs_of(hint):
                due.append((target, ann.value(pairs_of(hint), now), hint.reason))
        due += [(t, None, None) for t in sorted(self.told) if t not in wanted]
        written = 0
        for target, value, reason in due:
            if not self._bucket.take():
                return written
            notes = {ann.SCALE_HINT: value, ann.SCALE_HINT_REASON: reason and ann.reason(reason)}
            done = await self._fenced_patch(target, {"metadata": {"annotations": notes}})
            if done is None:
                return written
            if not done:
                continue
            written += 1
            if value is None:
                del self.told[target]
                await self._event(target, EventType.NORMAL, CLEARED, "the queue has room again")
            else:
                self.told[target] = ann.parse(value)[0]
                await self._event(target, EventType.NORMAL, TOLD, reason or "")
        await self._tell_deadlocks(hints)
        return written

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

    async def _event(self, target: Target, kind: EventType, reason: str, message: str) -> None:
        await asyncio.to_thread(self._recorder.record, ref(target), kind, reason, message)

    async def _fenced_patch(self, target: Target, body: dict[str, Any]) -> bool | None:
        """True when written, False when the API refused (tried again next round), None
        when the lease is lost (nothing more this round)."""

        def fenced() -> None:
            self._fence.check(f"patch {target[0]} {target[1]}")
            self._patch(target, body)

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


def annotated(api_client: Any) -> Callable[[], dict[Target, str]]:
    """The Volcano Queues and Namespaces carrying a hint now (one list of each, at the
    start of a term); a cluster without Volcano has no Queues (the list's 404)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)

    def read() -> dict[Target, str]:
        found: dict[Target, str] = {}
        for ns in core.list_namespace(_request_timeout=LIST_TIMEOUT_S).items:
            value = (metadata(ns).annotations or {}).get(ann.SCALE_HINT)
            if value:
                found[(NAMESPACE, name_of(ns))] = value
        queues: Any
        try:
            queues = custom.list_cluster_custom_object(
                "scheduling.volcano.sh", "v1beta1", "queues", _request_timeout=LIST_TIMEOUT_S
            )
        except ApiException as e:
            if e.status != 404:
                raise
            queues = {"items": []}
        for q in queues.get("items") or []:
            meta = q.get("metadata") or {}
            value = (meta.get("annotations") or {}).get(ann.SCALE_HINT)
            if value and meta.get("name"):
                found[(QUEUE, meta["name"])] = value
        return found

    return read


def patcher(api_client: Any) -> Callable[[Target, dict[str, Any]], None]:
    """A JSON merge patch of a Queue or a Namespace through the real client."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)

    def patch(target: Target, body: dict[str, Any]) -> None:
        kind, name = target
        if kind == QUEUE:
            custom.patch_cluster_custom_object(
                "scheduling.volcano.sh",
                "v1beta1",
                "queues",
                name,
                body,
                _content_type="application/merge-patch+json",
                _request_timeout=PATCH_TIMEOUT_S,
            )
        else:
            core.patch_namespace(
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
