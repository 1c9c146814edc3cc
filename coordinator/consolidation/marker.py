"""The leader tells the patrol's verdicts on the Nodes: ``stowage.io/consolidate`` and
``stowage.io/consolidate-reason`` annotations, an Event, and the
``stowage_consolidation_candidates`` gauge.

A node that becomes a candidate is patched and gets a ``ConsolidationCandidate`` Event with
the reason; one that no longer is has both annotations removed (merge patch of null) and a
``ConsolidationCleared`` Event. Marking is advisory — nothing is cordoned or drained.

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
from coordinator.kube.client import KubeError, translate
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


class Marker:
    """What this term told each node (its annotation value, or None once cleared)."""

    def __init__(
        self,
        patrol: Patrol,
        marked: Callable[[], dict[str, str]],
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

    async def start_term(self) -> bool:
        """Take the marks the Nodes carry now as told; False (and nothing told) if they
        cannot be read now: the caller tries again next tick."""
        try:
            marked = await asyncio.to_thread(self._marked)
        except Exception as e:
            error = e if isinstance(e, KubeError) else translate("list nodes", e)
            log.warning("%s; patrol marks wait for the next tick", error)
            return False
        self.told = dict(marked)
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
                break
            try:
                await asyncio.to_thread(self._fenced_patch, node, value, reason)
            except LeaseLost as e:
                log.warning("%s", e)
                break
            except Exception as e:
                error = e if isinstance(e, KubeError) else translate(f"patch node {node}", e)
                log.warning("%s; trying again next tick", error)
                continue
            written += 1
            await self._tell(node, value, reason)
        return written

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

    def _fenced_patch(self, node: str, value: str | None, reason: str | None) -> None:
        self._fence.check(f"patch node {node}")
        body = {
            "metadata": {"annotations": {ann.CONSOLIDATE: value, ann.CONSOLIDATE_REASON: reason}}
        }
        self._patch(node, body)


def marked_nodes(api_client: Any) -> Callable[[], dict[str, str]]:
    """The Nodes that carry a ``stowage.io/consolidate`` mark now, with its value, read
    through the real client (one list, at the start of a term)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)

    def marked() -> dict[str, str]:
        nodes = core.list_node(_request_timeout=LIST_TIMEOUT_S).items
        found = {}
        for node in nodes:
            value = (node.metadata.annotations or {}).get(ann.CONSOLIDATE)
            if value:
                found[node.metadata.name] = value
        return found

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
            count(candidates, marker.metrics)
            cost.publish(patrol.costs, clock.monotonic(), marker.metrics)
        if leader.is_set():
            term = term or await marker.start_term()
            if term:
                await marker.mark_due(candidates, nodes())
        else:
            term = False
        await asyncio.sleep(tick_s)
