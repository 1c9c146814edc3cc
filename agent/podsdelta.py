"""Pods go out only when they changed: most reports say ``"pods": "unchanged"``.

The pods bound to a node change every few minutes; reports go out every 10 s. The pods
section is over half of a GPU node's report (≈ 11 of 22 KB with 30 pods), and half the
coordinator's cost of reading one, so sending it every time doubles what a fleet costs
the coordinator for nothing. The section is sent whole when it differs from the one last
delivered to this coordinator, after any failed delivery (the coordinator may not have
it), and every ``refresh_reports`` reports regardless (a restarted coordinator, or one
behind a load balancer that saw the last whole section go elsewhere, catches up within
that many intervals). In between the section is the absent reason ``unchanged``: the
section of the last report that carried it still holds.
"""

from __future__ import annotations

from typing import Final

import msgspec

from common.schema import Absent, NodeReport, PodsSection

UNCHANGED: Final = Absent("unchanged")


class PodsDelta:
    """What one coordinator was last sent whole, and how many reports ago."""

    def __init__(self, refresh_reports: int) -> None:
        self.refresh_reports = refresh_reports
        """Send the section whole at least every this many reports; 0: always."""
        self._delivered: PodsSection | None = None
        self._since_whole = 0

    def outgoing(self, report: NodeReport) -> NodeReport:
        """``report``, its pods section replaced by ``unchanged`` where that says the same."""
        pods, last = report.pods, self._delivered
        if (
            isinstance(pods, PodsSection)
            and last is not None
            and self._since_whole + 1 < self.refresh_reports
            and pods.source == last.source
            and pods.pods == last.pods
        ):
            return msgspec.structs.replace(report, pods=UNCHANGED)
        return report

    def delivered(self, report: NodeReport, sent: NodeReport) -> None:
        """``sent`` (made of ``report`` by :meth:`outgoing`) was accepted."""
        if sent is not report:  # said unchanged
            self._since_whole += 1
        elif isinstance(report.pods, PodsSection):
            self._delivered, self._since_whole = report.pods, 0
        else:  # the node could not list its pods: nothing stands to compare with
            self.forget()

    def forget(self) -> None:
        """A delivery failed or was refused: send the next section whole."""
        self._delivered, self._since_whole = None, 0
