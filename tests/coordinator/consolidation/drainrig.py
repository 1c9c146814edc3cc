"""Pods as a drain finds them: each with a controller (a ReplicaSet) that recreates it
elsewhere once it is evicted; the eviction rig's pods otherwise."""

from __future__ import annotations

from typing import Any

from tests.coordinator.eviction import evictrig

REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}


def pod(name: str, **fields: Any) -> dict[str, Any]:
    """:func:`tests.coordinator.eviction.evictrig.pod`, controlled by a ReplicaSet."""
    obj = evictrig.pod(name, **fields)
    obj["metadata"]["ownerReferences"] = [{**REPLICASET, "controller": True}]
    return obj
