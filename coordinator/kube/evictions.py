"""Evicting a pod through ``policy/v1`` ``pods/eviction`` — the one call that enforces
PodDisruptionBudgets on the API server's side.

Every eviction carries the victim's UID as a precondition: a pod recreated under the same
name (a StatefulSet's replacement) is never the one evicted. Dry run (``dryRun=All``) is
the default until ``evictions.enabled``: the API server then runs every check, PDBs
included, and persists nothing — so a dry run reports what a real run would have met.

What the answers mean (``pkg/registry/core/pod/storage/eviction.go``):

* 2xx: evicted (or, in dry run, would have been);
* 429: a budget forbids it now, or has not been observed yet (``Retry-After``): not
  evicted, the reason kept — a normal outcome, not an error;
* 404, or 409 on the UID precondition: the pod planned for is gone (or was replaced);
* anything else (403 corrupt budget, 500 two budgets, 5xx, no answer): a
  :class:`~coordinator.kube.client.KubeError` naming the call.

The leader's :class:`~coordinator.kube.leader.Fence` is checked right before each call
(:class:`~coordinator.kube.leader.LeaseLost` when the lease may have passed on).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from coordinator.kube.client import metadata, translate
from coordinator.kube.leader import Fence

log = logging.getLogger(__name__)

EVICTION_TIMEOUT_S = 10.0
"""An eviction with no answer by then counts as failed; it may still have happened, which
the pod watch will show (a retry carries the UID precondition, so it cannot hit a
replacement)."""


class Outcome(StrEnum):
    EVICTED = "evicted"
    """The API server accepted the eviction (the pod is going)."""
    DRY_RUN = "dry-run"
    """Dry run: every check passed, nothing was changed."""
    BLOCKED = "blocked"
    """429: a PodDisruptionBudget forbids it now (``reason`` says which)."""
    GONE = "gone"
    """The pod planned for no longer exists (404), or is a replacement (409 on the UID)."""


@dataclass(frozen=True, slots=True)
class EvictionResult:
    outcome: Outcome
    reason: str
    """What the API server said, for the Event, the metric and ``/debug``."""
    retry_after_s: float | None = None
    """``Retry-After`` of a 429 for a budget not observed yet."""


class Evictor:
    """Sends evictions with the real ``kubernetes`` client; synchronous (run it in a worker
    thread), one call per pod."""

    def __init__(self, api_client: Any, fence: Fence, grace_period_s: int | None = None) -> None:
        """``grace_period_s`` None leaves each pod its own ``terminationGracePeriodSeconds``."""
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._fence = fence
        self._grace_period_s = grace_period_s

    def evict(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> EvictionResult:
        """Evict pod ``namespace/name`` if it is still the pod ``uid``."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        what = f"evict pod {namespace}/{name}"
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(
                grace_period_seconds=self._grace_period_s,
                preconditions=client.V1Preconditions(uid=uid),
            ),
        )
        extra: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        self._fence.check(what)
        try:
            self._core.create_namespaced_pod_eviction(
                name, namespace, body, _request_timeout=EVICTION_TIMEOUT_S, **extra
            )
        except ApiException as e:
            error = translate(what, e)
            if e.status == 429:
                return EvictionResult(
                    Outcome.BLOCKED, _budget_cause(e.body, str(error)), error.retry_after_s
                )
            if e.status == 404:
                return EvictionResult(Outcome.GONE, f"{what}: the pod no longer exists")
            if e.status == 409:
                return EvictionResult(
                    Outcome.GONE, f"{what}: the pod was replaced (UID {uid} no longer there)"
                )
            raise error from e
        except Exception as e:
            raise translate(what, e) from e
        if dry_run:
            return EvictionResult(Outcome.DRY_RUN, f"{what}: would be evicted (dry run)")
        return EvictionResult(Outcome.EVICTED, f"{what}: evicted")

    def owner(self, victim: Any) -> str:
        """Who recreates ``victim`` once evicted: its controller (``Kind/ns/name``), else
        its first owner, else the pod itself (``Pod/ns/name``: a bare pod recreated under
        its name). Read from the API server when asked, so a replacement created a moment
        ago is judged by its own ownerReferences; a pod that cannot be read is itself."""
        namespace, name = victim.namespace, victim.name
        refs = []
        try:
            pod = self._core.read_namespaced_pod(
                name, namespace, _request_timeout=EVICTION_TIMEOUT_S
            )
            refs = list(metadata(pod).owner_references or [])
        except Exception as e:
            log.debug("%s", translate(f"read pod {namespace}/{name}", e))
        refs.sort(key=lambda r: not r.controller)
        if refs:
            return f"{refs[0].kind}/{namespace}/{refs[0].name}"
        return f"Pod/{namespace}/{name}"

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        """Set (or, with None, remove) annotations of a pod by JSON merge patch — the
        preemption plan awaiting approval on the pending pod, for people to read (it approves
        nothing: :mod:`coordinator.kube.approvals`). Fenced like an eviction;
        failures raise :class:`~coordinator.kube.client.KubeError`."""
        self._annotate(
            f"annotate pod {namespace}/{name}",
            self._core.patch_namespaced_pod,
            (name, namespace),
            annotations,
        )

    def annotate_node(self, name: str, annotations: Mapping[str, str | None]) -> None:
        """Set (or remove) annotations of a Node — a preemptor's nomination to the room its
        plan freed (:mod:`coordinator.live.nominations`), which every replica reads from
        its Node watch. Fenced; failures raise :class:`~coordinator.kube.client.KubeError`."""
        self._annotate(f"annotate node {name}", self._core.patch_node, (name,), annotations)

    def _annotate(
        self,
        what: str,
        patch: Any,
        where: tuple[str, ...],
        annotations: Mapping[str, str | None],
    ) -> None:
        self._fence.check(what)
        try:
            patch(
                *where,
                {"metadata": {"annotations": dict(annotations)}},
                _content_type="application/merge-patch+json",
                _request_timeout=EVICTION_TIMEOUT_S,
            )
        except Exception as e:
            raise translate(what, e) from e


def _budget_cause(body: Any, fallback: str) -> str:
    """The cause the API server gave for a 429 (``The disruption budget web needs 2 healthy
    pods and has 2 currently``): it names the budget, the bare message does not."""
    try:
        status = json.loads(body)
        causes = status["details"]["causes"]
        messages = [c["message"] for c in causes if isinstance(c.get("message"), str)]
    except (TypeError, ValueError, KeyError, AttributeError):
        return fallback
    return "; ".join(messages) if messages else fallback
