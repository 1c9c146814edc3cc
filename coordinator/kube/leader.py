"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

Every replica serves reports and the extender; only the leader publishes annotations and
(later) throttles or evicts. The holder renews every ``retry_period_s``; a follower takes
over when it has seen no change to the Lease for ``lease_duration_s`` — judged on its own
clock from when it last *observed* a change, so clock skew between replicas does not
matter. A leader that cannot renew for ``renew_deadline_s`` (shorter than the lease)
stops acting before anyone else may start: never two leaders acting at once. Writes carry
the Lease's resourceVersion, so two replicas racing for it cannot both win (409).
Every other write to the API server passes the elector's :class:`Fence` first, which says
on the local clock whether that deadline has passed — also when the loop has not yet run
to notice (a paused process). On a clean shutdown the leader releases the Lease so a
follower takes over at once. A Lease that cannot be reached is logged as a warning when
that starts or changes, not on every retry.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from common.errors import StowageError
from coordinator.config import LeaderSettings
from coordinator.kube.client import translate
from coordinator.metrics import CoordinatorMetrics

log = logging.getLogger(__name__)


def _now_micro() -> dt.datetime:
    """Now, for a Lease's MicroTime fields (the client writes them to the microsecond)."""
    return dt.datetime.now(dt.UTC)


class LeaseLost(StowageError):
    """A write refused before it was sent: by this replica's own clock, its lease may
    have passed to another replica."""


class Fence:
    """The one check every write to the API server (but the Lease's own) makes first.

    A leader that has not renewed within ``renew_deadline_s`` must stop acting, as
    client-go's leader election has it: after ``lease_duration_s`` without seeing the
    Lease change, a follower may take over. The elector's loop notices a lost lease only
    when it next runs — a process paused (SIGSTOP, a long GC, a stalled VM) wakes up with
    its publisher's timers due as well, and would write what it believed before the pause.
    So the writer asks here, immediately before each request, judging on the local
    monotonic clock from when the last successful renewal *started* (the request may have
    sat anywhere on the way), so the answer is conservative.
    """

    def __init__(self, renew_deadline_s: float, monotonic: Callable[[], float]) -> None:
        self._renew_deadline_s = renew_deadline_s
        self._monotonic = monotonic
        self._renewed_at: float | None = None

    def renewed(self, attempt_started: float) -> None:
        """A renewal (or acquisition) sent at ``attempt_started`` succeeded."""
        self._renewed_at = attempt_started

    def revoke(self) -> None:
        """Not leading (stepped down, never led, shutting down)."""
        self._renewed_at = None

    def is_held(self, now_mono: float | None = None) -> bool:
        """Whether the lease is ours for certain at ``now_mono`` (default: now)."""
        if self._renewed_at is None:
            return False
        now = self._monotonic() if now_mono is None else now_mono
        return now - self._renewed_at < self._renew_deadline_s

    def check(self, what: str) -> None:
        """Raise :class:`LeaseLost` unless the lease is held now; ``what`` names the write."""
        if not self.is_held():
            raise LeaseLost(f"{what}: not written: the lease is not held (renew deadline passed)")


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
        rng: random.Random | None = None,
    ) -> None:
        """``leases`` is a ``CoordinationV1Api``; ``leader`` is set while we lead.
        ``monotonic`` (and ``rng``, for the retry jitter) are injected for tests."""
        self._api = leases
        self._namespace = namespace
        self._identity = identity
        self._settings = settings
        self._leader = leader
        self._metrics = metrics
        self._monotonic = monotonic
        self._rng = rng or random.Random()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._failing: str | None = None
        self._timeout = {"_request_timeout": settings.renew_deadline_s}
        """Each Lease call gives up by the renew deadline, as client-go bounds a renewal:
        an answer later than that could not keep the lease anyway."""
        self.fence = Fence(settings.renew_deadline_s, monotonic)
        """What every writer other than this elector checks right before each write."""

    async def run(self) -> None:
        try:
            while True:
                await self.step()
                delay = self._settings.retry_period_s * self._rng.uniform(1.0, 1.2)
                await asyncio.sleep(delay)
        finally:
            was_leader = self._leader.is_set()
            self._set(False)
            if was_leader:
                await asyncio.shield(asyncio.to_thread(self._release))

    async def step(self) -> None:
        """One try to acquire or renew the Lease, and what follows from its outcome."""
        attempt = self._monotonic()
        error: StowageError | None = None
        try:
            held = await asyncio.to_thread(self._try_acquire_or_renew)
        except Exception as e:
            held, error = False, translate("lease", e)
        self._note(error)
        if held:
            self.fence.renewed(attempt)
            if not self._leader.is_set():
                log.info("became leader (%s)", self._identity)
            self._set(True)
        elif self._leader.is_set() and not self.fence.is_held(self._monotonic()):
            log.warning("lost the lease: stopped leading")
            self._set(False)

    def _note(self, error: StowageError | None) -> None:
        """Log a failure to reach the Lease where an operator sees it — once when it starts
        or changes, not on every retry — and once when it clears."""
        message = None if error is None else str(error)
        if message == self._failing:
            return
        if message is not None:
            log.warning("%s (retrying every %gs)", message, self._settings.retry_period_s)
        else:
            log.warning("lease: reachable again")
        self._failing = message

    def _set(self, leading: bool) -> None:
        if leading:
            self._leader.set()
        else:
            self.fence.revoke()
            self._leader.clear()
        self._metrics.leader.set(1 if leading else 0)

    def _try_acquire_or_renew(self) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        name = self._settings.lease_name
        try:
            lease = self._api.read_namespaced_lease(name, self._namespace, **self._timeout)
        except ApiException as e:
            if e.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=name, namespace=self._namespace),
                spec=self._spec(transitions=0, acquired=_now_micro()),
            )
            try:
                self._api.create_namespaced_lease(self._namespace, body, **self._timeout)
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
            self._api.replace_namespaced_lease(name, self._namespace, lease, **self._timeout)
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
            lease = self._api.read_namespaced_lease(
                self._settings.lease_name, self._namespace, **self._timeout
            )
            if lease.spec.holder_identity != self._identity:
                return
            lease.spec.holder_identity = ""
            lease.spec.lease_duration_seconds = 1
            self._api.replace_namespaced_lease(
                self._settings.lease_name, self._namespace, lease, **self._timeout
            )
        except Exception as e:
            log.warning("%s", translate("release lease", e))
