"""The leader tells the patrol's verdicts on the Nodes: ``stowage.io/consolidate`` and
``stowage.io/consolidate-reason`` annotations, an Event, and the
``stowage_consolidation_candidates`` gauge.

A node that becomes a candidate is patched and gets a ``ConsolidationCandidate`` Event with
the reason; one that no longer is has both annotations removed (merge patch of null) and a
``ConsolidationCleared`` Event. Marking is advisory; nothing is drained.

**Cordon** (``patrol.cordon``, ``disabled`` by default). ``dry-run``: each marked
candidate the patrol would cordon is logged and gets a ``ConsolidationWouldCordon``
Event, once while it stays one; no patch. ``enabled``: marked candidates, lowest mean
first, are cordoned (``spec.unschedulable`` and ``stowage.io/consolidate-cordoned`` in
one patch, a ``ConsolidationCordoned`` Event) while fewer than ``patrol.max_cordoned``
are; a node already unschedulable is someone else's cordon and is left alone. A node the
patrol cordoned is uncordoned (``ConsolidationUncordoned``) once it is no longer a marked
candidate, or once ``cordon`` is not ``enabled`` — and only such a node: the annotation,
read at the start of a term, is what says the patrol put the cordon there. Cordons share
the marks' fence and token bucket; lifting goes before cordoning more.

* **Fenced**: every patch passes the lease's fence right before it is written, and Events go
  through the fenced recorder; a follower writes nothing.
* **Rate-limited**: patches share one token bucket (``patrol.max_patches_per_s``); what does
  not fit waits for the next tick, new marks before clearings.
* **A new term trusts nothing it wrote before**: it reads which Nodes carry a mark now (one
  list of Nodes, as the term starts) and takes those as told, so a mark the old leader left
  on a node that is no longer a candidate is cleared (with its Event) and one on a node that
  still is stays as it is; every other node is taken as unmarked — no patch a node at takeover.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from common import annotations as ann
from common.clock import Clock
from coordinator.config import PatrolSettings
from coordinator.consolidation import cost
from coordinator.consolidation.patrol import SAMPLE_S, Candidate, Patrol
from coordinator.consolidation.windows import WINDOWS
from coordinator.kube.client import KubeError, metadata, name_of, translate
from coordinator.kube.events import EventRecorder, EventType, ObjectRef
from coordinator.kube.leader import Fence, LeaseLost
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket

log = logging.getLogger(__name__)

TICK_S: Final = 1.0
"""How often the leader writes what is due (samples are taken every :data:`SAMPLE_S`)."""
LIST_TIMEOUT_S: Final = 60.0
"""A list of every Node (once a term) with no answer by then is tried again next tick."""
MARKED: Final = "ConsolidationCandidate"
CLEARED: Final = "ConsolidationCleared"
CORDONED: Final = "ConsolidationCordoned"
UNCORDONED: Final = "ConsolidationUncordoned"
WOULD_CORDON: Final = "ConsolidationWouldCordon"

Marks = tuple[dict[str, str], set[str]]
"""What the Nodes carry at the start of a term: each mark's value by node, and the nodes
the patrol cordoned."""


class Marker:
    """What this term told each node (its annotation value, or None once cleared)."""

    def __init__(
        self,
        patrol: Patrol,
        marked: Callable[[], Marks],
        patch: Callable[[str, dict[str, Any]], None],
        recorder: EventRecorder,
        fence: Fence,
        settings: PatrolSettings,
        metrics: CoordinatorMetrics,
        clock: Clock,
    ) -> None:
        self._patrol = patrol
        self._marked = marked
        self._patch = patch
        self._recorder = recorder
        self._fence = fence
        self._settings = settings
        self.metrics = metrics
        self._clock = clock
        self._bucket = TokenBucket(settings.max_patches_per_s, settings.max_patches_per_s)
        self.told: dict[str, str | None] = {}
        self.cordoned: set[str] = set()
        """Nodes the patrol cordoned (carrying ``stowage.io/consolidate-cordoned``)."""
        self._would: set[str] = set()
        """Dry-run: candidates already told as 'would cordon'."""

    async def start_term(self) -> bool:
        """Take the marks the Nodes carry now as told; False (and nothing told) if they
        cannot be read now: the caller tries again next tick."""
        try:
            marked, cordoned = await asyncio.to_thread(self._marked)
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate("list nodes", e)
            log.warning("%s; patrol marks wait for the next tick", error)
            return False
        self.told = dict(marked)
        self.cordoned = set(cordoned)
        self._would = set()
        return True

    async def mark_due(self, candidates: list[Candidate], nodes: list[str]) -> int:
        """Write what is due for ``nodes`` (every known node), given the patrol's
        ``candidates``, within the patch budget; return how many patches were written."""
        self._bucket.refill(self._clock.monotonic())
        for gone in [n for n in self.told if n not in nodes]:
            del self.told[gone]
        now = self._clock.wall()
        due: list[tuple[str, str | None, str | None]] = []
        for c in candidates:
            if _kind(self.told.get(c.node)) != c.summary.window.name:
                due.append((c.node, _value(c, self._settings, now), c.reason))
        wanted = {c.node for c in candidates}
        due += [(n, None, None) for n in nodes if n not in wanted and self.told.get(n)]
        written = 0
        for node, value, reason in due:
            if not self._bucket.take():
                return written
            body = {
                "metadata": {
                    "annotations": {ann.CONSOLIDATE: value, ann.CONSOLIDATE_REASON: reason}
                }
            }
            done = await self._fenced_patch(node, body)
            if done is None:
                return written
            if done:
                written += 1
                await self._tell(node, value, reason)
        return written + await self._cordon_due(candidates, nodes)

    async def _cordon_due(self, candidates: list[Candidate], nodes: list[str]) -> int:
        """Lift the patrol's cordons that no longer hold, then cordon (or, dry-run, tell)
        marked candidates up to the cap; return how many patches were written."""
        mode, cap = self._settings.cordon, self._settings.max_cordoned
        known = set(nodes)
        qualifying = sorted(
            (c for c in candidates if self.told.get(c.node)),
            key=lambda c: (c.summary.mean_pct, c.node),
        )
        wanted = {c.node for c in qualifying} if mode == "enabled" else set()
        self.cordoned &= known
        written = 0
        for node in sorted(self.cordoned - wanted):
            if not self._bucket.take():
                return written
            body = {
                "spec": {"unschedulable": None},
                "metadata": {"annotations": {ann.CONSOLIDATE_CORDONED: None}},
            }
            done = await self._fenced_patch(node, body)
            if done is None:
                return written
            if done:
                written += 1
                self.cordoned.discard(node)
                why = (
                    "no longer a consolidation candidate"
                    if mode == "enabled"
                    else f"patrol.cordon is {mode}"
                )
                await self._event(node, UNCORDONED, f"uncordoned by the utilisation patrol: {why}")
        self._would &= {c.node for c in qualifying}
        for c in qualifying:
            if (
                c.node in self.cordoned
                or c.node in self._would
                or self._patrol.unschedulable(c.node)
            ):
                continue  # ours already, told already, or someone else's cordon
            if mode == "dry-run":
                if not self._bucket.take():
                    return written
                log.info("patrol would cordon %s: %s (patrol.cordon is dry-run)", c.node, c.reason)
                self._would.add(c.node)
                await self._event(c.node, WOULD_CORDON, f"would cordon (dry-run): {c.reason}")
            elif mode == "enabled" and len(self.cordoned) < cap:
                if not self._bucket.take():
                    return written
                value = ann.value({"window": c.summary.window.name}, self._clock.wall())
                body = {
                    "spec": {"unschedulable": True},
                    "metadata": {"annotations": {ann.CONSOLIDATE_CORDONED: value}},
                }
                done = await self._fenced_patch(c.node, body)
                if done is None:
                    return written
                if done:
                    written += 1
                    self.cordoned.add(c.node)
                    log.info("patrol cordoned %s: %s", c.node, c.reason)
                    await self._event(
                        c.node, CORDONED, f"cordoned by the utilisation patrol: {c.reason}"
                    )
        return written

    async def _event(self, node: str, reason: str, message: str) -> None:
        await asyncio.to_thread(
            self._recorder.record, ObjectRef.node(node), EventType.NORMAL, reason, message
        )

    async def _tell(self, node: str, value: str | None, reason: str | None) -> None:
        self.told[node] = value
        if value is not None and reason is not None:
            self.metrics.consolidation_marks.labels("marked").inc()
            await asyncio.to_thread(
                self._recorder.record,
                ObjectRef.node(node),
                EventType.NORMAL,
                MARKED,
                f"consolidation candidate: {reason}",
            )
        else:
            self.metrics.consolidation_marks.labels("cleared").inc()
            await asyncio.to_thread(
                self._recorder.record,
                ObjectRef.node(node),
                EventType.NORMAL,
                CLEARED,
                f"no longer a consolidation candidate: utilisation back to"
                f" {self._settings.threshold_pct:g}% or more, or too few samples",
            )

    async def _fenced_patch(self, node: str, body: dict[str, Any]) -> bool | None:
        """Patch ``node`` past the fence: True when written, False when the API refused
        (tried again next tick), None when the lease is lost (nothing more this tick)."""

        def fenced() -> None:
            self._fence.check(f"patch node {node}")
            self._patch(node, body)

        try:
            await asyncio.to_thread(fenced)
        except LeaseLost as e:
            log.warning("%s", e)
            return None
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate(f"patch node {node}", e)
            log.warning("%s; trying again next tick", error)
            return False
        return True


def marked_nodes(api_client: Any) -> Callable[[], Marks]:
    """The Nodes that carry a ``stowage.io/consolidate`` mark now, with its value, and
    those carrying the patrol's cordon, read through the real client (one list, at the
    start of a term)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)

    def marked() -> Marks:
        nodes = core.list_node(_request_timeout=LIST_TIMEOUT_S).items
        found: dict[str, str] = {}
        cordoned: set[str] = set()
        for node in nodes:
            annotations = metadata(node).annotations or {}
            value = annotations.get(ann.CONSOLIDATE)
            if value:
                found[name_of(node)] = value
            if annotations.get(ann.CONSOLIDATE_CORDONED):
                cordoned.add(name_of(node))
        return found, cordoned

    return marked


def _value(candidate: Candidate, settings: PatrolSettings, now: float) -> str:
    s = candidate.summary
    pairs = {
        "window": s.window.name,
        "mean": f"{s.mean_pct:.1f}",
        "peak": f"{s.peak_pct:.1f}",
        "threshold": f"{settings.threshold_pct:g}",
    }
    return ann.value(pairs, now)


def _kind(told: str | None) -> str | None:
    """The window a told annotation value names (None when none was told)."""
    return None if not told else ann.parse(told)[0].get("window")


def count(candidates: list[Candidate], metrics: CoordinatorMetrics) -> None:
    """Set ``stowage_consolidation_candidates{window}`` from the patrol's verdicts."""
    for window in WINDOWS:
        n = sum(1 for c in candidates if c.summary.window is window)
        metrics.consolidation_candidates.labels(window.name).set(n)


async def run(
    patrol: Patrol,
    marker: Marker,
    nodes: Callable[[], list[str]],
    leader: asyncio.Event,
    clock: Clock,
    tick_s: float = TICK_S,
) -> None:
    """Sample every :data:`SAMPLE_S` and judge on every replica (each keeps its own
    windows, warm for a takeover); mark every ``tick_s`` on the leader only."""
    candidates: list[Candidate] = []
    next_sample = clock.monotonic()
    term = False
    while True:
        if clock.monotonic() >= next_sample:
            next_sample = clock.monotonic() + SAMPLE_S
            patrol.sample()
            # Judging 2,000 nodes takes ~0.1 s of numpy calls: off the event loop, which
            # still serves scheduler calls between them (sampling, ~30 ms, reads the live
            # cluster's dicts and stays on it). Nothing else touches the windows meanwhile.
            candidates = await asyncio.to_thread(patrol.candidates)
            patrol.judged = candidates
            count(candidates, marker.metrics)
            cost.publish(patrol.costs, clock.monotonic(), marker.metrics)
        if leader.is_set():
            term = term or await marker.start_term()
            if term:
                await marker.mark_due(candidates, nodes())
        else:
            term = False
        await asyncio.sleep(tick_s)
