"""``--keep``: the demo's scheduler keeps placing pods, so none stays Pending for want of one.

Pods created with ``kubectl`` (``schedulerName`` ``default-scheduler``, the default, or
``stowage-scheduler``) go through the same filter → prioritize → bind as the replay's.
The pods are listed, then watched (as kube-scheduler's informer does); at each change,
pods gone (deleted, finished) give their room back, pods bound by someone else are
counted where they are, and each pod not yet bound is tried — a pod that found no node is
tried again only after some room was given back, as kube-scheduler requeues
unschedulable pods on cluster events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from coordinator.config import CoordinatorSettings
from coordinator.state.kubeobjects import ObjectError, pod_request
from hack.demo.httpjson import DemoError, JsonClient
from hack.demo.scheduler import WithExtender
from hack.demo.workload import REPLAY_LABEL, SCHEDULER_NAME

SCHEDULERS: Final = frozenset({"default-scheduler", SCHEDULER_NAME})
WATCH_S: Final = 300
"""How long one pod watch lasts before the pods are listed again."""
GONE_PHASES: Final = frozenset({"Succeeded", "Failed"})


def schedule_until_interrupted(
    scheduler: WithExtender, api: JsonClient, tried: Iterable[str] = ()
) -> None:
    """Schedule pending pods as the pod watch reports changes, until Ctrl-C (``tried``
    as :class:`PendingPods` takes it)."""
    queue = PendingPods(scheduler, tried)
    while True:
        follow(queue, api)


def follow(queue: PendingPods, api: JsonClient, watch_s: int = WATCH_S) -> None:
    """List the pods and schedule, then do it again at every change the watch from that
    list reports, until the watch ends (at ``watch_s``, expired, or cut): the caller
    lists again. A failing list or scheduling call is the caller's :class:`DemoError`."""
    listing = api.get("/api/v1/pods")
    pods = {p["metadata"]["uid"]: p for p in listing["items"]}
    _say(queue.sync(pods.values()))
    version = listing["metadata"]["resourceVersion"]
    changes = api.watch(f"/api/v1/pods?watch=1&resourceVersion={version}&timeoutSeconds={watch_s}")
    while True:
        try:
            change = next(changes)
        except (StopIteration, DemoError):  # it ended (410 Expired ends it too) or was cut
            return
        kind = change.get("type")
        if kind not in ("ADDED", "MODIFIED", "DELETED"):  # BOOKMARK; ERROR, the last one
            continue
        uid = change["object"]["metadata"]["uid"]
        if kind == "DELETED":
            pods.pop(uid, None)
        else:
            pods[uid] = change["object"]
        _say(queue.sync(pods.values()))


def _say(lines: list[str]) -> None:
    for line in lines:
        print(line, flush=True)


class PendingPods:
    """The scheduler's side of one listing of every pod (see the module docstring)."""

    def __init__(self, scheduler: WithExtender, tried: Iterable[str] = ()) -> None:
        """``tried``: pods that found no node just now (the replay's), not to be tried
        again before room is given back."""
        self.scheduler = scheduler
        self.contiguity_b = CoordinatorSettings().signals.contiguity_threshold_b
        self.generation = 0
        """Bumped whenever room is given back."""
        self.tried: dict[str, int] = dict.fromkeys(tried, self.generation)
        """Unbound pods by uid: the generation they last found no node in."""
        self.refused: set[str] = set()
        """Pods that cannot be counted (said once)."""

    def sync(self, pods: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bring the cache in line with ``pods`` and schedule those waiting; one line
        per pod placed, left Pending or not understood — the replay's pods left Pending
        in one line together."""
        cache = self.scheduler.cache
        live = {p["metadata"]["uid"]: p for p in pods if not _gone(p)}
        for uid in [u for u in cache.bound if u not in live]:
            cache.release(uid)
            self.generation += 1
        lines: list[str] = []
        replay_waiting = 0
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
                if _labels(pod).get(REPLAY_LABEL) == "replay":
                    replay_waiting += 1
                else:
                    lines.append(f"{name}: no node can take it now (stays Pending)")
            else:
                self.tried.pop(uid, None)
                lines.append(f"{name}: bound to {cache.state.names[placed]}")
        if replay_waiting:
            lines.append(f"{replay_waiting} of the replay's pods tried again: still no room")
        return lines

    def _refuse(self, uid: str, line: str, lines: list[str]) -> None:
        if uid not in self.refused:
            self.refused.add(uid)
            lines.append(line)


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _gone(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    return (
        bool(meta.get("deletionTimestamp")) or (pod.get("status") or {}).get("phase") in GONE_PHASES
    )
