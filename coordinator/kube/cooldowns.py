"""The Lease that shares the queue cooldowns with every replica
(:mod:`coordinator.live.cooldowns`): the leader writes it, every replica watches it.

A Lease, not a ConfigMap: an approval of a preemption plan is a ConfigMap in the same
namespace, and the coordinator must stay unable to write one
(:mod:`coordinator.kube.approvals`); it already holds its leader Lease there. The
annotation is set by JSON merge patch; the first write creates the Lease. Every write
passes the leader's :class:`~coordinator.kube.leader.Fence` first.
"""

from __future__ import annotations

from typing import Any, Final

from coordinator.kube.client import translate
from coordinator.kube.leader import Fence
from coordinator.live.cooldowns import KEY, LEASE

WRITE_TIMEOUT_S: Final = 10.0


class CooldownLease:
    """Writes the annotation :data:`~coordinator.live.cooldowns.KEY` of the Lease
    :data:`~coordinator.live.cooldowns.LEASE` in ``namespace``; synchronous."""

    def __init__(self, api_client: Any, namespace: str, fence: Fence) -> None:
        from kubernetes import client

        self._leases = client.CoordinationV1Api(api_client)
        self._namespace = namespace
        self._fence = fence

    def write(self, value: str | None) -> None:
        """Set the annotation to ``value`` (None removes it). Raises
        :class:`~coordinator.kube.leader.LeaseLost` when not leading,
        :class:`~coordinator.kube.client.KubeError` when the API server did not take it."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        what = f"write lease {self._namespace}/{LEASE}"
        self._fence.check(what)
        body = {"metadata": {"annotations": {KEY: value}}}
        try:
            self._leases.patch_namespaced_lease(
                LEASE, self._namespace, body,
                _content_type="application/merge-patch+json", _request_timeout=WRITE_TIMEOUT_S,
            )  # fmt: skip
            return
        except ApiException as e:
            if e.status != 404 or value is None:
                raise translate(what, e) from e
        except Exception as e:
            raise translate(what, e) from e
        self._fence.check(what)
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name=LEASE, annotations={KEY: value}),
            spec=client.V1LeaseSpec(),
        )
        try:
            self._leases.create_namespaced_lease(
                self._namespace, lease, _request_timeout=WRITE_TIMEOUT_S
            )
        except Exception as e:
            raise translate(what, e) from e
