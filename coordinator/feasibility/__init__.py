"""One feasibility model of kube-scheduler's default filters: could pod P run on node N
if pods V were gone?

The eviction planner, the preempt verb and pressure eviction ask it before anything is
evicted, so no pod is ever evicted for a preemptor that still could not land:

* :func:`objects.pod_of` / :func:`objects.node_of` read the fields the filters read from
  Pod and Node JSON into frozen :class:`Pod` and :class:`Node` values;
* a :class:`Snapshot` holds the nodes and the bound pods;
* :class:`Question` (or :func:`could_run` for one answer) gives a :class:`Verdict`:
  fits, refused (naming the upstream filter plugin and why) or unjudgeable (volumes,
  DRA claims: the model does not mirror those filters, and nothing is planned on them);
  :meth:`Question.barred` says whether the pod may preempt at all.

The filters mirrored, each in :mod:`.rules` with the upstream behaviour in its
docstring: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
NodeResourcesFit, InterPodAffinity (required terms), PodTopologySpread
(``DoNotSchedule``), and DefaultPreemption's eligibility.

Pure: it reads only what it is given (no clock, no I/O), so it can be asked from a worker
thread over a frozen snapshot, and by the simulator.
"""

from coordinator.feasibility.model import Question, could_run
from coordinator.feasibility.objects import Node, Pod, node_of, pod_of
from coordinator.feasibility.selectors import Malformed
from coordinator.feasibility.snapshot import Snapshot
from coordinator.feasibility.verdict import Outcome, Verdict

__all__ = [
    "Malformed",
    "Node",
    "Outcome",
    "Pod",
    "Question",
    "Snapshot",
    "Verdict",
    "could_run",
    "node_of",
    "pod_of",
]
