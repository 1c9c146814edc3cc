"""``?watch=true``: a chunked stream of newline-delimited watch events.

Semantics follow the apiserver's watch cache:

* ``resourceVersion`` absent or "0": the current objects as ADDED, then changes after them.
* ``resourceVersion`` N: every change after N from the history; if some were compacted
  away, a single ERROR event carrying a 410 Expired Status, on an HTTP 200 stream (the
  apiserver reports watch errors in-band once the request is accepted; the Python client's
  ``Watch.stream`` turns that event into ``ApiException(status=410)``).
* Selectors apply to the old and the new state of each change, so an object that stops
  matching is seen as DELETED and one that starts matching as ADDED.
* ``allowWatchBookmarks``: a BOOKMARK every ``bookmark_interval_s`` and one before the
  stream ends at ``timeoutSeconds``, so a client can resume without replaying.
* ``sendInitialEvents=true`` (watch-list): the current objects as ADDED whatever the
  resourceVersion, then a BOOKMARK annotated ``k8s.io/initial-events-end``.
* Asked for a Table (``kubectl get -w``): each event's object is a one-row Table, the
  first with the column definitions and the rest without, as the apiserver saves bytes.

A watch ends at ``timeoutSeconds``, when the client goes away, on server shutdown, or as
an injected fault (:mod:`hack.kubeapi.faults`) says.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web

from hack.kubeapi import errors, selectors, table
from hack.kubeapi.cluster import Cluster
from hack.kubeapi.faults import WATCH_FAULT
from hack.kubeapi.resources import Resource
from hack.kubeapi.store import Change

POLL_S = 0.5  # how often an idle stream checks that its client is still there


class _Ended(Exception):  # noqa: N818 - control flow: an injected fault ended the stream
    pass


class _Cut(Exception):  # noqa: N818 - control flow: an injected fault cut the connection
    pass


def event(change: Change, matches: selectors.Matcher) -> dict[str, Any] | None:
    """The event a change is for a watcher with ``matches`` (the cacher's conversion)."""
    now = change.type != "DELETED" and matches(change.obj)
    before = change.old is not None and matches(change.old)
    if change.type == "DELETED":
        return {"type": "DELETED", "object": change.obj} if before else None
    if now:
        return {"type": "MODIFIED" if before else "ADDED", "object": change.obj}
    if before and change.old is not None:
        old = {
            **change.old,
            "metadata": {**change.old["metadata"], "resourceVersion": str(change.rv)},
        }
        return {"type": "DELETED", "object": old}
    return None


def _scope(res: Resource, namespace: str | None, change: Change) -> bool:
    if change.resource != res.group_resource:
        return False
    return namespace is None or change.obj["metadata"].get("namespace") == namespace


async def stream(
    request: web.Request, cluster: Cluster, res: Resource, namespace: str | None
) -> web.StreamResponse:
    query = request.query
    labels = selectors.parse_labels(query.get("labelSelector", ""))
    fields = selectors.parse_fields(query.get("fieldSelector", ""), res.selectable())

    def matches(obj: dict[str, Any]) -> bool:
        return labels(obj) and fields(obj)

    raw_rv = query.get("resourceVersion", "")
    if raw_rv not in ("", "0") and not raw_rv.isdigit():
        raise errors.bad_request(
            f'resourceVersion: Invalid value: "{raw_rv}": invalid resource version'
        )
    timeout_s = float(errors.int_query(query, "timeoutSeconds") or cluster.watch_timeout_s)
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
    initial_events = query.get("sendInitialEvents") in ("true", "1")
    as_table = table.negotiate(request.headers.get("Accept", ""))
    include = query.get("includeObject", "Metadata")

    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def waker() -> None:
        loop.call_soon_threadsafe(wake.set)

    unsubscribe = cluster.store.subscribe(waker)
    cluster.wakers.add(waker)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)

    fault = request.get(WATCH_FAULT)
    sent = 0

    async def send(ev: dict[str, Any]) -> None:
        nonlocal sent
        if as_table and ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
            now = cluster.clock.wall()
            rows = table.convert(ev["object"], include, as_table, now, columns=sent == 0)
            ev = {"type": ev["type"], "object": rows}
        await response.write(json.dumps(ev, separators=(",", ":")).encode() + b"\n")
        sent += 1
        await injected()

    async def injected() -> None:
        """An injected fault, once its events went out: end the stream as it says."""
        if fault is None or sent < fault.after:
            return
        if fault.kind == "expire_watch":
            expired = errors.expired("too old resource version (injected fault)")
            await response.write(
                json.dumps({"type": "ERROR", "object": expired.status}).encode() + b"\n"
            )
            raise _Ended()
        transport = request.transport
        if transport is not None:
            transport.abort()  # cut mid-stream: no final chunk
        raise _Cut()

    def bookmark(rv: int, initial_end: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta}
        return {"type": "BOOKMARK", "object": obj}

    try:
        await injected()
        if raw_rv in ("", "0") or initial_events:
            items, last = cluster.store.list(res, namespace)
            for obj in items:
                if matches(obj):
                    await send({"type": "ADDED", "object": obj})
            if initial_events and bookmarks:
                await send(bookmark(last, initial_end=True))
        else:
            last = int(raw_rv)
        deadline = loop.time() + timeout_s
        next_bookmark = loop.time() + cluster.bookmark_interval_s
        while not cluster.closing:
            wake.clear()
            try:
                changes, current = cluster.store.changes_since(last)
            except errors.ApiError as e:
                await send({"type": "ERROR", "object": e.status})
                break
            for change in changes:
                ev = event(change, matches) if _scope(res, namespace, change) else None
                if ev is not None:
                    await send(ev)
            last = max(last, current)
            now = loop.time()
            if now >= deadline:
                if bookmarks:
                    await send(bookmark(last))
                break
            if bookmarks and now >= next_bookmark:
                await send(bookmark(last))
                next_bookmark = now + cluster.bookmark_interval_s
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            wait_s = min(deadline, next_bookmark if bookmarks else deadline) - now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=min(max(wait_s, 0), POLL_S))
        await response.write_eof()
    except _Ended:
        await response.write_eof()
    except (ConnectionError, RuntimeError, _Cut):
        pass  # the client went away mid-write, or the connection was cut
    finally:
        unsubscribe()
        cluster.wakers.discard(waker)
    return response
