"""Kubernetes Events, written only by the leader, rate-limited and free of secrets.

Anything the coordinator decides that an operator should see on an object — a best-effort
throttle on a Node, an eviction planned for a pod — is written as a ``core/v1`` Event
with :meth:`EventRecorder.record`, so ``kubectl describe node`` and ``kubectl events``
show it next to kubelet's own.

* **Fenced.** Every write first passes the leader's :class:`~coordinator.kube.leader.Fence`:
  a replica that is not (or may no longer be) the leader writes nothing, so two replicas
  never report the same decision twice nor a follower one the leader did not make.
* **Rate-limited**, as client-go's event correlator is: one cluster-wide token bucket
  (``events.max_per_s``, ``events.burst``), one bucket per object (``per_object_burst``
  saved, one more every ``per_object_refill_s``) so a flapping node cannot crowd out the
  others, and the same reason and message on the same object within ``dedupe_s`` is
  written once. What is held back is counted (``stowage_events{result}``), never queued:
  an Event is a notice, and a late one would tell an operator something no longer true.
* **Dry of secrets.** Messages pass :func:`scrub` (bearer tokens and JWTs become
  ``[redacted]``) and are cut to :data:`MAX_MESSAGE` characters, the ``events.k8s.io``
  limit, before they leave the process.
* **Where.** An Event about a namespaced object (a pod) goes to that object's namespace,
  one about a cluster-scoped object (a Node) to ``default``, as the API server requires
  (it refuses a Node's Event elsewhere: "involvedObject.namespace: does not match
  event.namespace") and as kubelet and client-go write them. The ClusterRole grants
  ``create`` on Events in every namespace. ``kubectl describe node`` shows them.

A failed write is logged once per kind of failure and counted; it never raises to the
caller: a decision stands whether or not its notice could be written.

The recorder is synchronous (the ``kubernetes`` client is): call it from a worker thread.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from common.clock import Clock
from coordinator.config import EventSettings
from coordinator.kube.client import translate
from coordinator.kube.leader import Fence, LeaseLost
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket

log = logging.getLogger(__name__)

COMPONENT: Final = "stowage-coordinator"
MAX_MESSAGE: Final = 1024
"""``events.k8s.io/v1`` refuses notes longer than 1 kB; client-go cuts messages there too."""
MAX_REASON: Final = 128
EVENT_TIMEOUT_S: Final = 10.0
MAX_TRACKED: Final = 10_000
"""Most objects (and object-message pairs) remembered for rate limits and duplicates; the
oldest is forgotten first, so made-up objects cannot grow the recorder without bound."""

CLUSTER_SCOPED_NAMESPACE: Final = "default"
"""Where Events about cluster-scoped objects go (the only namespace the API server takes)."""
_REASON: Final = re.compile(r"[A-Z][A-Za-z0-9]*")
_SECRETS: Final = (
    re.compile(r"(?i)\bbearer\s+[^\s,;]+"),
    re.compile(r"\beyJ[\w-]+\.[\w-]+\.[\w-]*"),  # a JWT: base64url of '{"' and two more parts
    re.compile(r"(?i)\b(token|password|secret)=[^\s,;&]+"),
)


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


class Recorded(StrEnum):
    """What became of one :meth:`EventRecorder.record` call (the metric's ``result``)."""

    SENT = "sent"
    DUPLICATE = "duplicate"
    """The same reason and message on the same object within ``dedupe_s``."""
    RATE_LIMITED = "rate_limited"
    NOT_LEADER = "not_leader"
    FAILED = "failed"


RESULTS: Final = tuple(r.value for r in Recorded)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about (``involvedObject``)."""

    kind: str
    name: str
    namespace: str = ""
    """Empty for cluster-scoped objects (Nodes)."""
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def node(cls, name: str, uid: str = "") -> ObjectRef:
        return cls(kind="Node", name=name, uid=uid)


def scrub(message: str) -> str:
    """``message`` without anything that looks like a credential, cut to
    :data:`MAX_MESSAGE` characters."""
    for pattern in _SECRETS:
        message = pattern.sub(_redact, message)
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…"


def _redact(match: re.Match[str]) -> str:
    text = match.group(0)
    key, sep, _ = text.partition("=")
    if sep and not text.lower().startswith("bearer"):
        return f"{key}=[redacted]"
    if text.lower().startswith("bearer"):
        return "Bearer [redacted]"
    return "[redacted]"


class EventRecorder:
    """Writes Events through the real ``kubernetes`` client (``create_namespaced_event``).

    ``api`` is a ``CoreV1Api``; time comes from ``clock`` (wall for the Event's
    timestamps and name, monotonic for the rate limits)."""

    def __init__(
        self,
        api: Any,
        fence: Fence,
        clock: Clock,
        settings: EventSettings,
        metrics: CoordinatorMetrics,
        *,
        instance: str = "",
    ) -> None:
        self._api = api
        self._fence = fence
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self._instance = instance
        self._bucket = TokenBucket(settings.max_per_s, settings.burst)
        self._per_object: dict[tuple[str, str, str], TokenBucket] = {}
        self._last_sent: dict[tuple[Any, ...], float] = {}
        self._failing: str | None = None
        self._serial = 0
        self._lock = threading.Lock()  # record() may be called from several worker threads

    def record(
        self, obj_ref: ObjectRef, type: EventType | str, reason: str, message: str
    ) -> Recorded:
        """Write one Event about ``obj_ref`` unless the lease, a rate limit or a recent
        duplicate holds it back; return what became of it."""
        kind = EventType(type)  # ValueError for anything but Normal and Warning
        if not _REASON.fullmatch(reason) or len(reason) > MAX_REASON:
            raise ValueError(f"event reason {reason!r}: expected UpperCamelCase, ≤ {MAX_REASON}")
        message = scrub(message)
        with self._lock:
            result = self._admit(obj_ref, kind, reason, message)
            if result is Recorded.SENT:
                self._serial += 1
                serial = self._serial
        if result is Recorded.SENT:
            result = self._send(obj_ref, kind, reason, message, serial)
        self._metrics.events.labels(result.value).inc()
        return result

    def _admit(self, ref: ObjectRef, kind: EventType, reason: str, message: str) -> Recorded:
        """The checks before a write, in the order that spends nothing needlessly."""
        now = self._clock.monotonic()
        if not self._fence.is_held(now):
            return Recorded.NOT_LEADER
        obj = (ref.kind, ref.namespace, ref.name)
        key = (*obj, kind, reason, message)
        sent = self._last_sent.get(key)
        if sent is not None and now - sent < self._settings.dedupe_s:
            return Recorded.DUPLICATE
        bucket = self._per_object.get(obj)
        if bucket is None:
            bucket = self._per_object[obj] = TokenBucket(
                1.0 / self._settings.per_object_refill_s, self._settings.per_object_burst
            )
            _bound(self._per_object)
        bucket.refill(now)
        self._bucket.refill(now)
        if bucket.tokens < 1 or not self._bucket.take():
            return Recorded.RATE_LIMITED
        bucket.take()
        self._last_sent.pop(key, None)
        self._last_sent[key] = now
        _bound(self._last_sent)
        return Recorded.SENT

    def _send(
        self, ref: ObjectRef, kind: EventType, reason: str, message: str, serial: int
    ) -> Recorded:
        from kubernetes import client

        wall = self._clock.wall()
        at = dt.datetime.fromtimestamp(wall, dt.UTC)
        namespace = ref.namespace or CLUSTER_SCOPED_NAMESPACE
        # client-go names Events "<object>.<unique hex>"; the serial keeps two Events of one
        # instant apart.
        name = f"{ref.name}.{int(wall * 1e9):x}{serial:x}"
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            involved_object=client.V1ObjectReference(
                kind=ref.kind,
                name=ref.name,
                namespace=ref.namespace or None,
                uid=ref.uid or None,
                api_version=ref.api_version,
            ),
            reason=reason,
            message=message,
            type=kind.value,
            count=1,
            first_timestamp=at,
            last_timestamp=at,
            source=client.V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            reporting_instance=self._instance or None,
        )
        what = f"event {reason} on {ref.kind.lower()} {ref.name}"
        try:
            self._fence.check(what)  # as late as it can be: the lease may have lapsed since
            self._api.create_namespaced_event(namespace, body, _request_timeout=EVENT_TIMEOUT_S)
        except LeaseLost:
            return Recorded.NOT_LEADER
        except Exception as e:
            error = str(translate(what, e))
            if error != self._failing:  # once per kind of failure, not once per Event
                log.warning("%s", error)
                self._failing = error
            return Recorded.FAILED
        self._failing = None
        return Recorded.SENT


def _bound(table: dict[Any, Any]) -> None:
    """Forget the oldest entry of ``table`` once it holds more than :data:`MAX_TRACKED`."""
    if len(table) > MAX_TRACKED:
        del table[next(iter(table))]
