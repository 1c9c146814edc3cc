"""List-then-watch of Nodes and Pods, feeding the live cluster on the event loop.

Each resource runs in its own thread (the client is synchronous): list everything, hand
the list over as a replacement, then watch from the list's resourceVersion. A watch ends
after ``timeoutSeconds`` and resumes from the last resourceVersion seen (bookmarks keep it
fresh); a 410 Gone (history compacted) or any error relists after a short backoff; a full
relist also happens every ``resync_s``. Lists and watch events stay JSON (the client's
model objects cost milliseconds each to build, and nothing here needs them), decoded with
msgspec, and the events of one read of the stream reach the event loop in one call: the
watch threads hold the GIL, and the loop that answers kube-scheduler waits, as little as
they can.

An *optional* resource (a custom resource whose CRD may not be installed, such as Volcano's
PodGroups) that the API server does not serve answers its list with a 404: that reads as
an empty list, is logged once, and the list is tried again every ``resync_s`` (the CRD
may be installed later). A 404 for any other resource is an error like the rest.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from coordinator.kube.client import KubeError, translate
from coordinator.metrics import CoordinatorMetrics

log = logging.getLogger(__name__)

_DECODER = msgspec.json.Decoder()

WATCH_TIMEOUT_S = 60
BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0)


@dataclass
class Feed:
    """Where a resource's objects go: a full list, then single changes."""

    replace: Callable[[list[Mapping[str, Any]]], None]
    upsert: Callable[[Mapping[str, Any]], None]
    delete: Callable[[Mapping[str, Any]], None]
    synced: Callable[[], None]
    optional: bool = False
    """The API server may not serve the resource (a CRD not installed): a 404 on the list
    reads as an empty list instead of an error."""


class Gone(Exception):  # noqa: N818 - a control signal: relist
    """The watch's resourceVersion is too old (410): list again."""


class NotServed(Exception):  # noqa: N818 - a control signal: none, list again later
    """An optional resource's list answered 404: the API server does not serve it."""


class Reflector:
    """Keeps one resource's objects flowing into a :class:`Feed`."""

    def __init__(
        self,
        resource: str,
        list_call: Callable[..., Any],
        feed: Feed,
        loop: asyncio.AbstractEventLoop,
        metrics: CoordinatorMetrics,
        resync_s: float,
    ) -> None:
        self.resource = resource
        self._list = list_call
        self._feed = feed
        self._loop = loop
        self._metrics = metrics
        self._resync_s = resync_s
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{resource}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop. It does at its next event or when the watch's
        ``timeoutSeconds`` ends it (closing the stream from here could block the caller
        until then: urllib3 responses are not made to be closed across threads)."""
        self.stopping.set()

    def _run(self) -> None:
        failures = 0
        served = True
        while not self.stopping.is_set():
            try:
                version = self._relist()
                failures = 0
                if not served:
                    log.info("watch %s: now served by the API server", self.resource)
                    served = True
                deadline = time.monotonic() + self._resync_s
                while not self.stopping.is_set() and time.monotonic() < deadline:
                    version = self._watch(version)
            except Gone:
                self._metrics.watch_restarts.labels(self.resource, "expired").inc()
            except NotServed as e:
                if served:
                    log.warning("watch %s: not served (%s); taken as none", self.resource, e)
                    served = False
                self._call(self._feed.replace, [])
                self._call(self._feed.synced)
                self.stopping.wait(self._resync_s)
            except Exception as e:  # any failure: back off, relist; never die
                if self.stopping.is_set():
                    return
                error = e if isinstance(e, KubeError) else translate(self.resource, e)
                self._metrics.watch_restarts.labels(self.resource, "error").inc()
                delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)] * random.uniform(0.8, 1.2)
                if failures == 0:
                    log.warning("watch %s failed, relisting: %s", self.resource, error)
                failures += 1
                self.stopping.wait(delay)

    def _relist(self) -> str:
        from kubernetes.client.exceptions import ApiException

        try:
            response = self._list(_preload_content=False, _request_timeout=60)
        except ApiException as e:
            if e.status == 404 and self._feed.optional:
                raise NotServed(translate(self.resource, e)) from e
            raise
        body = _DECODER.decode(response.data)
        items = body.get("items") or []
        self._call(self._feed.replace, items)
        self._call(self._feed.synced)
        return str((body.get("metadata") or {}).get("resourceVersion") or "")

    def _watch(self, version: str) -> str:
        from kubernetes.client.exceptions import ApiException

        try:
            response = self._list(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_TIMEOUT_S,
                _preload_content=False,
                _request_timeout=WATCH_TIMEOUT_S + 10,
            )
        except ApiException as e:
            if e.status == 410:
                raise Gone() from e
            raise
        try:
            for events in _event_batches(response):
                changes: list[tuple[Callable[[Mapping[str, Any]], None], Mapping[str, Any]]] = []
                try:
                    for event in events:
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                raise Gone()
                            raise KubeError(f"watch {self.resource}: {obj.get('message')}", 0)
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        if kind in ("ADDED", "MODIFIED"):
                            changes.append((self._feed.upsert, obj))
                        elif kind == "DELETED":
                            changes.append((self._feed.delete, obj))
                finally:
                    if changes:  # what came before an error still counts, in order
                        self._call(_apply_each, changes)
                if self.stopping.is_set():
                    break
        finally:
            response.release_conn()
        return version

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        """Run on the event loop, where the live cluster lives; wait, to keep order."""
        done = asyncio.run_coroutine_threadsafe(_invoke(fn, *args), self._loop)
        done.result()


async def _invoke(fn: Callable[..., None], *args: Any) -> None:
    fn(*args)


def _apply_each(
    changes: list[tuple[Callable[[Mapping[str, Any]], None], Mapping[str, Any]]],
) -> None:
    """The changes of one read of the stream, in order, in one turn of the event loop."""
    for fn, obj in changes:
        fn(obj)


def _event_batches(response: Any) -> Iterator[list[dict[str, Any]]]:
    """Newline-delimited JSON watch events from a streaming response, a read's worth at a
    time: the events that arrived together (a burst of bindings sends dozens) are handed
    to the event loop in one call instead of one call — and one wait for the loop — each.
    Decoded with msgspec, which holds the GIL a fraction of the time ``json`` does: the
    loop answering the scheduler waits for it."""
    pending = b""
    for chunk in response.stream(65536, decode_content=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        events = [_DECODER.decode(line) for line in lines if line.strip()]
        if events:
            yield events
    if pending.strip():
        yield [_DECODER.decode(pending)]
