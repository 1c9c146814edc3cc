"""The demo's kube-scheduler, in two configurations placing the same pods.

* :class:`WithExtender`: kube-scheduler with Stowage as its HTTP extender
  (``nodeCacheCapable: true``, the weight ``daemonset/scheduler/`` configures), through
  real HTTP — its own fit filter over the nodes one pass looks at, ``POST
  /scheduler/filter`` with the names left, ``POST /scheduler/prioritize`` (not when one
  node is left, as kube-scheduler skips it), its plugins' scores plus the extender's
  weighted score, and the pod bound through the API's ``pods/binding`` subresource.
  Of the nodes the extender passes, those without room device by device in this
  scheduler's own count are dropped: the coordinator counts devices the same way, but a
  binding can reach it (through its pod watch) a moment after the next pod's filter.
* :class:`DefaultScoring`: the same scheduler without the extender, in process: its
  default scoring alone over the nodes that have room for the pod device by device (a
  GPU-sharing-aware filter, as any cluster that shares GPUs needs), so the two differ in
  how they score and nothing else.

Both see the same node order, look at nodes the same way (:class:`kubescore.NodeWalk`)
and draw ties from their own generator seeded alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from coordinator.state.podrequest import PodRequest
from hack.demo import kubescore
from hack.demo.httpjson import DemoError, JsonClient
from hack.demo.schedcache import SchedulerCache

EXTENDER_WEIGHT: Final = 20
"""The extender's ``weight`` in ``daemonset/scheduler/kube-scheduler-config.yaml``."""
EXTENDER_PREFIX: Final = "/scheduler"


class DefaultScoring:
    """kube-scheduler's default scoring alone (see the module docstring)."""

    def __init__(self, cache: SchedulerCache, seed: int) -> None:
        self.cache = cache
        self.walk = kubescore.NodeWalk(len(cache))
        self.rng = np.random.default_rng(seed)

    def place(self, key: str, pod: PodRequest) -> int | None:
        """Bind the pod to the best node (its index), or None where none has room."""
        found = self.walk.take(self.cache.has_room(pod))
        if not len(found):
            return None
        i = int(found[kubescore.pick(self.cache.plugin_scores(pod, found), self.rng)])
        self.cache.bind(key, pod, i)
        return i


class WithExtender:
    """kube-scheduler calling Stowage's extender (see the module docstring)."""

    def __init__(
        self,
        cache: SchedulerCache,
        seed: int,
        api: JsonClient,
        coordinator: JsonClient,
        weight: int = EXTENDER_WEIGHT,
    ) -> None:
        self.cache = cache
        self.walk = kubescore.NodeWalk(len(cache))
        self.rng = np.random.default_rng(seed)
        self.api = api
        self.coordinator = coordinator
        self.weight = weight

    def place(self, pod_object: Mapping[str, Any], pod: PodRequest) -> int | None:
        """Schedule the Pod (as the API server has it) that asks for ``pod``: bind it
        and return its node's index, or None where no node can take it (it stays
        Pending)."""
        cache = self.cache
        found = self.walk.take(cache.fits(pod))
        if not len(found):
            return None
        names = cache.state.names
        offered = [names[i] for i in found.tolist()]
        reply = self._extender("filter", pod_object, offered)
        if not isinstance(reply, dict) or reply.get("Error"):
            raise DemoError(f"extender filter: {reply!r:.300}")
        index = cache.state.index
        room = cache.has_room(pod)
        passing = [n for n in reply.get("NodeNames") or [] if room[index[n]]]
        if not passing:
            return None
        if len(passing) == 1:
            chosen = index[passing[0]]
        else:
            rows = np.array([index[n] for n in passing], dtype=np.int64)
            scores = self._extender("prioritize", pod_object, passing)
            by_host = {entry["Host"]: int(entry["Score"]) for entry in scores}
            extender = np.array([by_host.get(n, 0) for n in passing], dtype=np.int64)
            totals = kubescore.with_extender(cache.plugin_scores(pod, rows), extender, self.weight)
            chosen = int(rows[kubescore.pick(totals, self.rng)])
        self.bind(pod_object, names[chosen])
        cache.bind(pod_object["metadata"]["uid"], pod, chosen)
        return chosen

    def bind(self, pod_object: Mapping[str, Any], node: str) -> None:
        """``POST …/pods/NAME/binding``, as kube-scheduler's DefaultBinder does."""
        meta = pod_object["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.api.post(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)

    def _extender(self, verb: str, pod_object: Mapping[str, Any], names: list[str]) -> Any:
        args = {"Pod": pod_object, "Nodes": None, "NodeNames": names}
        return self.coordinator.post(f"{EXTENDER_PREFIX}/{verb}", args)
