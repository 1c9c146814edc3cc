"""``--keep``: the demo's scheduler keeps placing pods, so none stays Pending for want of one.

Pods created with ``kubectl`` (``schedulerName`` ``default-scheduler``, the default, or
``stowage-scheduler``) go through the same filter → prioritize → bind as the replay's.
Once a second the pods are listed: pods gone (deleted, finished) give their room back,
pods bound by someone else are counted where they are, and each pod not yet bound is
tried — a pod that found no node is tried again only after some room was given back, as
kube-scheduler requeues unschedulable pods on cluster events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final

from coordinator.config import CoordinatorSettings
from coordinator.state.kubeobjects import ObjectError, pod_request
from hack.demo.httpjson import JsonClient
from hack.demo.scheduler import WithExtender
from hack.demo.workload import SCHEDULER_NAME

SCHEDULERS: Final = frozenset({"default-scheduler", SCHEDULER_NAME})
POLL_S: Final = 1.0
GONE_PHASES: Final = frozenset({"Succeeded", "Failed"})


def schedule_until(stop: threading.Event, scheduler: WithExtender, api: JsonClient) -> None:
    """Schedule pending pods once a second until ``stop`` is set (or Ctrl-C)."""
    queue = PendingPods(scheduler)
    while not stop.is_set():
        for line in queue.sync(api.get("/api/v1/pods")["items"]):
            print(line, flush=True)
        stop.wait(POLL_S)


class PendingPods:
    """The scheduler's side of one listing of every pod (see the module docstring)."""

    def __init__(self, scheduler: WithExtender) -> None:
        self.scheduler = scheduler
        self.contiguity_b = CoordinatorSettings().signals.contiguity_threshold_b
        self.generation = 0
        """Bumped whenever room is given back."""
        self.tried: dict[str, int] = {}
        """Unbound pods by uid: the generation they last found no node in."""
        self.refused: set[str] = set()
        """Pods that cannot be counted (said once)."""

    def sync(self, pods: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bring the cache in line with ``pods`` and schedule those waiting; one line
        per pod placed, left Pending or not understood."""
        cache = self.scheduler.cache
        live = {p["metadata"]["uid"]: p for p in pods if not _gone(p)}
        for uid in [u for u in cache.bound if u not in live]:
            cache.release(uid)
            self.generation += 1
        lines = []
        for uid, pod in live.items():
            node = (pod.get("spec") or {}).get("nodeName")
            if uid in cache.bound or uid in self.refused:
                continue
            if node and node not in cache.state.index:
                continue
            name = f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"
            try:
                request = pod_request(pod, self.contiguity_b)
            except ObjectError as e:
                self._refuse(uid, f"{name}: not scheduled: {e}", lines)
                continue
            if node:  # bound by someone else (or created with spec.nodeName)
                try:
                    cache.bind(uid, request, cache.state.index[node])
                except ValueError as e:  # more than the node has left
                    self._refuse(uid, f"{name}: not counted on {node}: {e}", lines)
                continue
            if (pod.get("spec") or {}).get("schedulerName", "default-scheduler") not in SCHEDULERS:
                continue
            if self.tried.get(uid) == self.generation:
                continue
            placed = self.scheduler.place(pod, request)
            if placed is None:
                self.tried[uid] = self.generation
                lines.append(f"{name}: no node can take it now (stays Pending)")
            else:
                self.tried.pop(uid, None)
                lines.append(f"{name}: bound to {cache.state.names[placed]}")
        return lines

    def _refuse(self, uid: str, line: str, lines: list[str]) -> None:
        if uid not in self.refused:
            self.refused.add(uid)
            lines.append(line)


def _gone(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    return (
        bool(meta.get("deletionTimestamp")) or (pod.get("status") or {}).get("phase") in GONE_PHASES
    )
