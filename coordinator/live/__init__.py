"""The coordinator's live picture of the cluster, by concern:

* :mod:`~coordinator.live.cluster` — :class:`LiveCluster`: Nodes and Pods from the
  watches, agent reports and their freshness, over one cluster state;
* :mod:`~coordinator.live.holdings` — what each bound or assumed pod holds, and the
  bounds and expiry of assumptions;
* :mod:`~coordinator.live.decisions` — filter and prioritize answers over the state;
* :mod:`~coordinator.live.rows` — the rows of the node lists schedulers offer.
"""

from coordinator.live.cluster import LiveCluster
from coordinator.live.decisions import MAX_EXTENDER_SCORE, FilterResult
from coordinator.live.holdings import Held

__all__ = ["MAX_EXTENDER_SCORE", "FilterResult", "Held", "LiveCluster"]
