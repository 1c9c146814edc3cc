"""The eviction planner: pure functions over a read-only snapshot of the cluster that pick
the smallest safe set of victims when a pending pod fits nowhere (preemption) or a node's
memory pressure stays high (pressure), and say why. Acting on a plan is the executor's
business; the API calls live in :mod:`coordinator.kube`."""
