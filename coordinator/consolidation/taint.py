"""The drain taint on a Node, written through the real client: ``stowage.io/disrupted``
with effect ``NoSchedule``, put before a drain's first eviction and taken off when the
drain is abandoned.

``spec.taints`` is a list that merge patches replace whole and that other writers (the
node lifecycle controller's ``not-ready``, an operator's ``kubectl taint``) change too,
so the write is a JSON patch of the whole list guarded by a ``test`` of the
``resourceVersion`` it was read at: a node changed in between is refused by the API
server, nothing is lost, and the drainer tries again next cycle. Other taints are kept
as they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from coordinator.consolidation.drain import DISRUPTED
from coordinator.kube.client import metadata

TIMEOUT_S: Final = 10.0

TAINT: Final = {"key": DISRUPTED, "effect": "NoSchedule"}


def taint_writer(api_client: Any) -> Callable[[str, bool], bool]:
    """``write(node, present)``: put the taint on ``node`` (``present``) or take it off;
    True when a patch was written, False when the node already was so. Raises the
    client's errors (the caller fences and logs)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)

    def write(node: str, present: bool) -> bool:
        obj = core.read_node(node, _request_timeout=TIMEOUT_S)
        spec_taints = None if obj.spec is None else obj.spec.taints
        taints = api_client.sanitize_for_serialization(spec_taints or [])
        has = any(t.get("key") == DISRUPTED for t in taints)
        if has == present:
            return False
        kept = [t for t in taints if t.get("key") != DISRUPTED]
        body: list[dict[str, Any]] = [
            {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": metadata(obj).resource_version,
            },
            {"op": "add", "path": "/spec/taints", "value": [*kept, TAINT] if present else kept},
        ]
        core.patch_node(
            node, body, _content_type="application/json-patch+json", _request_timeout=TIMEOUT_S
        )
        return True

    return write
