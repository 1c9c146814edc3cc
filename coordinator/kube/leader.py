"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Every replica serves reports and the extender; only the leader publishes annotations and
(later) throttles or evicts. The holder renews every ``retry_period_s``; a follower takes
over when it has seen no change to the Lease for ``lease_duration_s`` — judged on its own
clock from when it last *observed* a change, so clock skew between replicas does not
matter. A leader that cannot renew for ``renew_deadline_s`` (shorter than the lease)
stops acting before anyone else may start: never two leaders acting at once. Writes carry
the Lease's resourceVersion, so two replicas racing for it cannot both win (409).
On a clean shutdown the leader releases the Lease so a follower takes over at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from coordinator.config import LeaderSettings
from coordinator.kube.client import translate
from coordinator.metrics import CoordinatorMetrics

log = logging.getLogger(__name__)


def _now_micro() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        leases: Any,
        namespace: str,
        identity: str,
        settings: LeaderSettings,
        leader: asyncio.Event,
        metrics: CoordinatorMetrics,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``leases`` is a ``CoordinationV1Api``; ``leader`` is set while we lead."""
        self._api = leases
        self._namespace = namespace
        self._identity = identity
        self._settings = settings
        self._leader = leader
        self._metrics = metrics
        self._monotonic = monotonic
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None

    async def run(self) -> None:
        try:
            while True:
                try:
                    held = await asyncio.to_thread(self._try_acquire_or_renew)
                except Exception as e:
                    held = False
                    log.debug("%s", translate("lease", e))
                now = self._monotonic()
                if held:
                    self._renewed_at = now
                    if not self._leader.is_set():
                        log.info("became leader (%s)", self._identity)
                    self._set(True)
                elif self._leader.is_set() and (
                    self._renewed_at is None
                    or now - self._renewed_at >= self._settings.renew_deadline_s
                ):
                    log.warning("lost the lease: stopped leading")
                    self._set(False)
                delay = self._settings.retry_period_s * random.uniform(1.0, 1.2)
                await asyncio.sleep(delay)
        finally:
            was_leader = self._leader.is_set()
            self._set(False)
            if was_leader:
                await asyncio.shield(asyncio.to_thread(self._release))

    def _set(self, leading: bool) -> None:
        if leading:
            self._leader.set()
        else:
            self._leader.clear()
        self._metrics.leader.set(1 if leading else 0)

    def _try_acquire_or_renew(self) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        name = self._settings.lease_name
        try:
            lease = self._api.read_namespaced_lease(name, self._namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=name, namespace=self._namespace),
                spec=self._spec(transitions=0, acquired=_now_micro()),
            )
            try:
                self._api.create_namespaced_lease(self._namespace, body)
            except ApiException as conflict:
                if conflict.status == 409:
                    return False  # another replica created it first
                raise
            return True
        spec = lease.spec
        record = (spec.holder_identity, spec.renew_time, lease.metadata.resource_version)
        now = self._monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        mine = spec.holder_identity == self._identity
        expired = now - self._observed_at > (spec.lease_duration_seconds or 0)
        if not mine and spec.holder_identity and not expired:
            return False
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        acquired = spec.acquire_time if mine else _now_micro()
        lease.spec = self._spec(transitions, acquired)
        try:
            self._api.replace_namespaced_lease(name, self._namespace, lease)
        except ApiException as e:
            if e.status == 409:
                return False  # someone else wrote it since we read it
            raise
        return True

    def _spec(self, transitions: int, acquired: Any) -> Any:
        from kubernetes import client

        return client.V1LeaseSpec(
            holder_identity=self._identity,
            lease_duration_seconds=round(self._settings.lease_duration_s),
            acquire_time=acquired,
            renew_time=_now_micro(),
            lease_transitions=transitions,
        )

    def _release(self) -> None:
        """Hand the Lease back (empty holder) so a follower need not wait it out."""
        try:
            lease = self._api.read_namespaced_lease(self._settings.lease_name, self._namespace)
            if lease.spec.holder_identity != self._identity:
                return
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            self._api.replace_namespaced_lease(self._settings.lease_name, self._namespace, lease)
        except Exception as e:
            log.debug("%s", translate("release lease", e))
