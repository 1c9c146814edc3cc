"""Consolidation: finding the nodes a cluster's churn leaves half-empty.

:mod:`.windows` keeps each node's utilisation over rolling windows (5 min, 1 h, 1 day) in
fixed-size buckets; :mod:`.patrol` samples it and judges which nodes stayed under the
threshold; :mod:`.marker` tells it on the Node (annotation, Event, metric), on the leader.
"""
