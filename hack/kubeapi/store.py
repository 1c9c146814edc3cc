"""Objects, the global resourceVersion counter and the bounded change history.

Like etcd behind the apiserver, one counter orders every write to every type: each create,
update and delete takes the next value, stamps it on the object as a string, and appends a
``Change`` to the history. Watches replay the history after a given resourceVersion; once a
change falls out of the bounded window, watching from before it is impossible and the
watch answers 410 Expired, which is the case list-then-watch clients must handle.

A write that changes nothing (a patch setting what is already there) keeps the old
resourceVersion and records nothing, as the apiserver skips no-op updates.

The store is synchronous and guarded by a lock so that tests on other threads may seed and
inspect it while the server runs; listeners (watch streams) are told after each write.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hack.kubeapi import errors, objects
from hack.kubeapi.resources import Resource

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (group_resource, namespace, name)


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str  # group_resource
    obj: Obj  # after the write; for DELETED the last state, stamped with the delete's rv
    old: Obj | None


def meta(obj: Obj) -> Obj:
    return obj.setdefault("metadata", {})


class Store:
    def __init__(self, history: int = 1000) -> None:
        self._lock = threading.RLock()
        self._objects: dict[Key, Obj] = {}
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=history)
        self._compacted = 0  # rv of the newest change dropped from the history
        self._listeners: set[Callable[[], None]] = set()

    @property
    def rv(self) -> int:
        with self._lock:
            return self._rv

    # ------------------------------------------------------------------ reads

    def find(self, res: Resource, namespace: str, name: str) -> Obj | None:
        with self._lock:
            obj = self._objects.get((res.group_resource, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def get(self, res: Resource, namespace: str, name: str) -> Obj:
        obj = self.find(res, namespace, name)
        if obj is None:
            raise errors.not_found(res.group_resource, name)
        return obj

    def list(self, res: Resource, namespace: str | None = None) -> tuple[list[Obj], int]:
        """Objects sorted by namespace and name (etcd key order) and the rv they reflect."""
        with self._lock:
            items = [
                copy.deepcopy(obj)
                for (gr, ns, _), obj in sorted(self._objects.items())
                if gr == res.group_resource and (namespace is None or ns == namespace)
            ]
            return items, self._rv

    def changes_since(self, rv: int) -> tuple[list[Change], int]:
        """Changes after ``rv`` and the rv they bring a watcher to; 410 Expired when some of
        them have been compacted away."""
        with self._lock:
            if rv < self._compacted:
                oldest = self._history[0].rv if self._history else self._rv + 1
                raise errors.expired(f"too old resource version: {rv} ({oldest - 1})")
            return [c for c in self._history if c.rv > rv], self._rv

    # ----------------------------------------------------------------- writes

    def create(self, res: Resource, obj: Obj, *, dry_run: bool = False) -> Obj:
        """Store a new object; with ``dry_run``, only what would be stored (no
        resourceVersion, nothing recorded), as the apiserver's dry-run storage answers."""
        obj = copy.deepcopy(obj)
        md = meta(obj)
        key = (res.group_resource, md.get("namespace", "") if res.namespaced else "", md["name"])
        with self._lock:
            if key in self._objects:
                raise errors.already_exists(res.group_resource, key[2])
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            if not res.namespaced:
                md.pop("namespace", None)
            md["uid"] = objects.new_uid()
            md["creationTimestamp"] = objects.now()
            md.pop("deletionTimestamp", None)
            if res.has_generation:
                md["generation"] = 1
            if dry_run:
                md.pop("resourceVersion", None)
                return copy.deepcopy(obj)
            self._commit("ADDED", res, key, obj, None)
        self._notify()
        return copy.deepcopy(obj)

    def update(
        self,
        res: Resource,
        namespace: str,
        name: str,
        change: Callable[[Obj], Obj],
        *,
        dry_run: bool = False,
    ) -> Obj:
        """Read-modify-write under the lock. ``change`` gets a copy of the stored object and
        returns the new one; a ``metadata.resourceVersion`` in it is a precondition (409 when
        stale), an empty one makes the write unconditional. ``dry_run``: the result, unsaved."""
        key = (res.group_resource, namespace if res.namespaced else "", name)
        with self._lock:
            old = self._objects.get(key)
            if old is None:
                raise errors.not_found(res.group_resource, name)
            new = change(copy.deepcopy(old))
            expected = meta(new).get("resourceVersion")
            if expected and expected != old["metadata"]["resourceVersion"]:
                raise errors.conflict(res.group_resource, name, errors.MODIFIED)
            md = meta(new)
            for field in ("name", "namespace", "uid", "creationTimestamp", "generation"):
                if field in old["metadata"]:
                    md[field] = old["metadata"][field]
                else:
                    md.pop(field, None)
            md["resourceVersion"] = old["metadata"]["resourceVersion"]
            new["apiVersion"], new["kind"] = res.api_version, res.kind
            if new == old:
                return copy.deepcopy(old)
            if res.has_generation and new.get("spec") != old.get("spec"):
                md["generation"] = old["metadata"].get("generation", 0) + 1
            if dry_run:
                return copy.deepcopy(new)
            self._commit("MODIFIED", res, key, new, old)
        self._notify()
        return copy.deepcopy(new)

    def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        last: Callable[[Obj], None] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Remove at once (no graceful termination); the preconditions are those of
        ``DeleteOptions.preconditions``. ``last`` may amend the final state first."""
        key = (res.group_resource, namespace if res.namespaced else "", name)
        with self._lock:
            old = self._objects.get(key)
            if old is None:
                raise errors.not_found(res.group_resource, name)
            md = old["metadata"]
            if uid and uid != md["uid"]:
                why = (
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {md['uid']}"
                )
                raise errors.conflict(res.group_resource, name, why)
            if resource_version and resource_version != md["resourceVersion"]:
                why = (
                    f"Precondition failed: ResourceVersion in precondition: {resource_version}, "
                    f"ResourceVersion in object meta: {md['resourceVersion']}"
                )
                raise errors.conflict(res.group_resource, name, why)
            final = copy.deepcopy(old)
            if last is not None:
                last(final)
            if dry_run:
                return final
            self._commit("DELETED", res, key, final, old)
        self._notify()
        return copy.deepcopy(final)

    def _commit(self, kind: str, res: Resource, key: Key, obj: Obj, old: Obj | None) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if kind == "DELETED":
            del self._objects[key]
        else:
            self._objects[key] = obj
        if len(self._history) == self._history.maxlen:
            self._compacted = self._history[0].rv
        self._history.append(Change(self._rv, kind, res.group_resource, copy.deepcopy(obj), old))

    # -------------------------------------------------------------- listeners

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (from the writing thread) after every write; returns the undo."""
        with self._lock:
            self._listeners.add(listener)
        return lambda: self._listeners.discard(listener)

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()
