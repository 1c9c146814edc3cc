"""Autoscaling hints that know bin packing: per queue, the room it lacks against what it
may hold, and the node group (and how many nodes) that would take its pending work —
told on the queue, as an Event and as metrics, for a cluster autoscaler's expander or
a Karpenter NodePool's weight to act on (``docs/autoscaling.md``). Nothing here acts on a
node.

* :mod:`.capacity`: what each queue may hold (Volcano Queues, else ResourceQuotas);
* :mod:`.groups`: the node groups, from their nodes' labels, and what a new node of each
  would look like;
* :mod:`.hints`: the pure planner (gap, group, count, deadlocks);
* :mod:`.teller`: the leader tells them (an Event, the metrics, and an annotation on a
  Volcano Queue; a namespace gets none), fenced and rate-limited;
* :mod:`.view`: ``GET /debug/hints`` for ``/ui`` and ``stowage top --hints``.
"""
