"""Most reports leave out what the coordinator already has or does not act on each cycle.

A report goes out every 10 s, and the coordinator reads every one: at 10,000 nodes that
is 1,000 reports a second, and its cost per report is set by how many values a report
holds. Two parts of a GPU node's report are most of its values and need not go every time
(the same reasoning as kubelet's, which posts its full node status only on change or every
few minutes):

* **pods** — over half of the report (≈ 11 of 22 KB with 30 pods), and they change every
  few minutes. Between whole reports they go only when they differ from the section last
  delivered; otherwise the section is the absent reason :data:`UNCHANGED`: the section of
  the last report that carried it still holds.
* **memory-contiguity detail** — per-zone buddy counts and unusable-space indexes, hugepage
  pools, compaction counters: a third of the remaining values. The coordinator acts on
  the per-NUMA-node summary (``memfrag.nodes``), which every report carries; the detail
  explains it and is for people and dashboards. Between whole reports those three fields
  are the absent reason :data:`REFRESH_ONLY`: the detail of the last whole report, as of
  its ``measured_at``, is the latest.

The report goes out whole every ``refresh_reports`` reports and after any failed or
refused delivery (the coordinator may not have what was left out: a restarted one, or one
behind a load balancer that sent the last whole report elsewhere, catches up within that
many intervals).
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import structs

from common.schema import UNCHANGED, Absent, MemfragSection, NodeReport, PodsSection

REFRESH_ONLY: Final = Absent("refresh-only")
"""The reason a memfrag detail field is absent: it goes out with whole reports only."""


class ReportDelta:
    """What one coordinator was last sent, and how many reports ago the last whole one."""

    def __init__(self, refresh_reports: int) -> None:
        self.refresh_reports = refresh_reports
        """Send the report whole at least every this many reports; 0 or 1: always."""
        self._whole_delivered = False
        self._since_whole = 0
        self._pods: PodsSection | None = None
        """The pods section the coordinator last accepted whole."""

    def outgoing(self, report: NodeReport) -> NodeReport:
        """``report`` as it goes out: whole when due, else without what may be left out."""
        if (
            not self._whole_delivered
            or self.refresh_reports <= 1
            or self._since_whole + 1 >= self.refresh_reports
        ):
            return report
        changes: dict[str, Any] = {}
        pods, last = report.pods, self._pods
        if (
            isinstance(pods, PodsSection)
            and last is not None
            and pods.source == last.source
            and pods.pods == last.pods
        ):
            changes["pods"] = UNCHANGED
        if isinstance(report.memfrag, MemfragSection):
            changes["memfrag"] = structs.replace(
                report.memfrag, zones=REFRESH_ONLY, hugepages=REFRESH_ONLY, compaction=REFRESH_ONLY
            )
        return structs.replace(report, **changes) if changes else report

    def delivered(self, report: NodeReport, sent: NodeReport) -> None:
        """``sent`` (made of ``report`` by :meth:`outgoing`) was accepted."""
        if sent is report:
            self._whole_delivered, self._since_whole = True, 0
        else:
            self._since_whole += 1
        if isinstance(sent.pods, PodsSection):
            self._pods = sent.pods
        elif sent.pods != UNCHANGED:  # the node could not list its pods: nothing to compare
            self._pods = None

    def forget(self) -> None:
        """A delivery failed or was refused: send the next report whole."""
        self._whole_delivered, self._since_whole, self._pods = False, 0, None
