"""Per-node colocation facts and throttles of the whole cluster, and what goes out of them.

:class:`Colocation` is held by :class:`~coordinator.live.LiveCluster`: each applied report
is turned into :class:`~coordinator.colocation.inputs.NodeInput` and stepped through the
controller at the time its request was *received* (the coordinator's monotonic clock, as
every freshness judgement). A node whose latest report went stale
(:mod:`coordinator.live.freshness` judges it) loses its facts and its throttle is released
(:meth:`Colocation.release`), so a silent node is never left throttled by the coordinator —
and its agent, hearing nothing valid, returns to the defaults after the directive TTL.

With each report goes the time its LS stall rate covers (the controller counts it toward
the tightening dwell): the time since the node's previous report, but only where the two
are consecutive samples of one agent run (``seq`` one apart: no report missed, no restart
between, so the rate's interval is exactly theirs) and that report's facts are still held
(not released as stale), and the lesser of the gap between their receipts here (at most
the report TTL: :meth:`coordinator.live.freshness.Receipts.since_previous_s`) and between
their ``measured_at`` at the agent (a report delayed in transit does not stretch it).

Only the leader's decisions leave the process. Every replica steps every node (agents
report to all replicas), so a replica that takes over holds the same throttles the old
leader had from the same reports; the directives it answers are the only thing that
changes hands. A follower answers with ``ttl_s`` 0: an agent follows, among the answers
of all replicas, one still valid (:mod:`agent.fanout`), and an answer valid for no time at
all never is — the agent follows the leader. A replica that stops leading answers so from
its next report on, which replaces its earlier answer at the agent. Without leader
election (one replica, tests) the replica is its own leader. With more than one replica,
agents must fan out (``--fan-out``, as the DaemonSet runs them): an agent reaching one
replica at random through a Service would hold the leader's throttle only while the leader
happened to answer it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from common.schema import NodeReport
from coordinator.colocation.controller import (
    RELEASED,
    Change,
    Throttle,
    local_bounds,
    reclaimable_m,
    step,
)
from coordinator.colocation.inputs import NodeInput, node_input
from coordinator.config import ColocationPool, ColocationSettings
from coordinator.metrics import CoordinatorMetrics

log = logging.getLogger(__name__)

MAX_PENDING: Final = 4096
"""Changes waiting for their Event; past it the oldest are dropped (and counted as such by
the recorder's metric never seeing them): an Event is a notice, not a record."""


@dataclass(frozen=True, slots=True)
class BeDirective:
    """What a node's agent is told now about its best-effort pods: those fields of
    :class:`~common.schema.Directives`."""

    quota_m: int | None
    reason: str
    be_pods: list[str]
    local: Any


class Colocation:
    def __init__(self, settings: ColocationSettings, metrics: CoordinatorMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.facts: dict[str, NodeInput] = {}
        """Facts of each node's latest fresh report."""
        self.sampled: dict[str, tuple[int, float]] = {}
        """``seq`` and ``measured_at`` of each node's latest fresh report."""
        self.throttles: dict[str, Throttle] = {}
        self.labels: dict[str, Mapping[str, str]] = {}
        self.elected = False
        """Whether leader election runs; until it does, this replica is its own leader."""
        self.pending: deque[tuple[str, Throttle]] = deque(maxlen=MAX_PENDING)
        """Changes the leader has yet to write Events for."""
        self._pools: dict[str, ColocationPool] = {}
        """Each node's pool, found once per change of its labels (not once per report)."""
        self._throttled = 0

    # -------------------------------------------------------------- updates

    def set_labels(self, node: str, labels: Mapping[str, str]) -> None:
        """The node's labels, which select its pool."""
        if self.labels.get(node) != labels:
            self.labels[node] = labels
            self._pools.pop(node, None)

    def forget(self, node: str) -> None:
        """A node left the cluster."""
        throttle = self.throttles.get(node)
        if throttle is not None and throttle.quota_m is not None:
            self._throttled -= 1
            self.metrics.be_throttled_nodes.set(self._throttled)
        tables = (self.facts, self.sampled, self.throttles, self.labels)
        for table in (*tables, self._pools):
            table.pop(node, None)

    def pool_of(self, node: str) -> ColocationPool:
        """The node's pool; every node's is ``_OFF`` while colocation is off."""
        pool = self._pools.get(node)
        if pool is None:
            if not self.settings.enabled:
                pool = _OFF
            else:
                pool = self.settings.pool_of(dict(self.labels.get(node) or {}))
            self._pools[node] = pool
        return pool

    def observe(self, report: NodeReport, received_at: float, since_s: float | None) -> Throttle:
        """Step the node of an applied report (its request arrived at ``received_at``,
        ``since_s`` after the node's previous report, None before any)."""
        node = report.node
        facts = node_input(report, self.settings.qos_label, self.facts.get(node))
        self.facts[node] = facts
        covered = self._covered_s(report, since_s)
        self.sampled[node] = (report.seq, report.measured_at)
        return self._step(node, facts, received_at, covered)

    def _covered_s(self, report: NodeReport, since_s: float | None) -> float:
        """The time since the node's previous report that this one's rates cover (see the
        module); 0 where it is not known."""
        previous = self.sampled.get(report.node)
        if previous is None or since_s is None or report.seq != previous[0] + 1:
            return 0.0
        return max(0.0, min(since_s, report.measured_at - previous[1]))

    def release(self, node: str, now: float) -> None:
        """The node's report went stale: its facts go and its throttle is released."""
        if self.facts.pop(node, None) is not None:
            self.sampled.pop(node, None)
            self._step(node, None, now)

    def _step(
        self, node: str, facts: NodeInput | None, now: float, covered_s: float = 0.0
    ) -> Throttle:
        prev = self.throttles.get(node, RELEASED)
        throttle = step(prev, facts, self.pool_of(node), now, covered_s)
        self.throttles[node] = throttle
        if throttle.change is not _UNCHANGED:
            self.metrics.be_throttle_changes.labels(throttle.change.value).inc()
            self.pending.append((node, throttle))
            log.info("node %s: BE quota %s: %s", node, _quota(throttle.quota_m), throttle.reason)
            was, now_throttled = prev.quota_m is not None, throttle.quota_m is not None
            if was != now_throttled:
                self._throttled += 1 if now_throttled else -1
                self.metrics.be_throttled_nodes.set(self._throttled)
        return throttle

    # ------------------------------------------------------------- answers

    def be_directive(self, node: str) -> BeDirective:
        """What the node's agent is told now (by the leader)."""
        throttle = self.throttles.get(node, RELEASED)
        facts = self.facts.get(node)
        pool = self.pool_of(node)
        local = local_bounds(throttle, facts, pool)
        # The BE pods go wherever the agent may act on them: under the coordinator's quota,
        # and under local bounds alone (the fast path tightens them before any quota, and
        # must not take a BE pod's stall for an LS pod's).
        acting = throttle.quota_m is not None or local is not None
        be_pods = list(facts.be_pods) if facts is not None and acting else []
        return BeDirective(throttle.quota_m, throttle.reason, be_pods, local)

    def explain(self, node: str, now: float, received_s_ago: float | None) -> dict[str, Any]:
        """Why the node's BE pods are (or are not) throttled right now (its latest report
        received ``received_s_ago``, None before any)."""
        throttle = self.throttles.get(node, RELEASED)
        facts = self.facts.get(node)
        pool = self.pool_of(node)
        answer: dict[str, Any] = {
            "node": node,
            "pool": pool.name,
            "be_cpu_quota_m": throttle.quota_m,
            "reason": throttle.reason,
            "changed_s_ago": None if throttle.changed_at is None else now - throttle.changed_at,
            "tightening_in_s": _remaining(throttle.above_since, pool.tighten_after_s, now),
            "relaxing_in_s": _remaining(throttle.below_since, pool.relax_after_s, now)
            if throttle.quota_m is not None
            else None,
            "report_received_s_ago": received_s_ago,
            "thresholds": {
                "pressure_high_pct": pool.pressure_high_pct,
                "pressure_low_pct": pool.pressure_low_pct,
                "tighten_after_s": pool.tighten_after_s,
                "relax_after_s": pool.relax_after_s,
                "usage_threshold_pct": pool.usage_threshold_pct,
            },
            "facts": None,
            "reclaimable_m": reclaimable_m(facts, pool),
        }
        if facts is not None:
            enforcement = facts.enforcement
            answer["facts"] = {
                "pressure_pct": facts.pressure_pct,
                "pressure_source": facts.source.value,
                "allocatable_m": facts.allocatable_m,
                "node_used_m": facts.node_used_m,
                "ls_usage_m": facts.ls_usage_m,
                "be_usage_m": facts.be_usage_m,
                "be_pods": len(facts.be_pods),
                "ls_pods": facts.ls_pods,
                "agent_applied": None
                if enforcement is None
                else {
                    "be_cpu_quota_m": enforcement.be_cpu_quota_m,
                    "source": enforcement.source,
                    "local_actions": enforcement.local_actions,
                    "error": enforcement.error,
                },
            }
        return answer


_OFF: Final = ColocationPool(name="off", enabled=False)
_UNCHANGED: Final = Change.NONE


def _quota(quota_m: int | None) -> str:
    return "none" if quota_m is None else f"{quota_m}m"


def _remaining(since: float | None, dwell_s: float, now: float) -> float | None:
    return None if since is None else max(0.0, dwell_s - (now - since))
