"""What each pod holds on its node: bound pods as the pod watch has them, and pods the
extender *assumed* on the node it ranked first, until the watch says where they went.

An assumption is a guess made for a caller that may not be authenticated (Volcano's
extender plugin sends no credentials, nor does kube-scheduler's without mutual TLS), so it
is bounded: at most
``kube.max_assumed_per_node`` on one node and ``kube.max_assumed`` in all. A new
assumption past either bound evicts the oldest one (on that node, or anywhere): the
newest assumptions are the ones a burst of real pods still needs counted, while the
oldest have most likely been bound — and seen by the watch — already. Refusing new ones
instead would let a stream of made-up pods fill the bounds and keep every real pod's
assumption out until the made-up ones lapse. Either way a caller inventing pods can keep
only a bounded number of nodes looking fuller, never grow memory, and never for longer
than ``kube.assumed_ttl_s`` after it stops.

A :class:`Holdings` holds one caller's assumptions: kube-scheduler's, which may come
over a listener that asks for a client certificate, and Volcano's, whose plugin cannot
authenticate, are kept apart (:class:`coordinator.live.LiveCluster`), so each bound above
applies to each caller on its own and made-up Volcano pods push out only Volcano's
assumptions.

Every assumption lasts ``kube.assumed_ttl_s`` on the coordinator's monotonic clock, so
assumptions lapse in the order they were made: the oldest is always first in line.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from coordinator.config import KubeSettings
from coordinator.scoring.base import best_fit_devices
from coordinator.state.cluster import ClusterState, Placement
from coordinator.state.podrequest import PodRequest


@dataclass(frozen=True, slots=True)
class Held:
    """What one pod holds on its node, exactly as taken, so it can be given back."""

    node: str
    request: PodRequest
    devices: tuple[int, ...]
    cpu_m: int
    mem_b: int
    assumed_until: float | None = None
    """Monotonic deadline for an assumed pod; None once the API says it is bound."""


class Holdings:
    """Pods' shares of their nodes in one :class:`ClusterState`, by pod uid."""

    def __init__(self, settings: KubeSettings) -> None:
        self.settings = settings
        self.held: dict[str, Held] = {}
        """Pod uid → what it holds."""
        self.unplaced: dict[str, tuple[str, PodRequest]] = {}
        """Pods bound to a node not (yet) known, by uid: the node and what they request.
        The Node and Pod watches are independent, so a pod can arrive before its node
        (at start, or when a node object registers again); it counts once the node does."""
        self._assumed: dict[str, None] = {}
        """Uids of assumed pods, oldest first (a dict as an ordered set)."""
        self._assumed_on: dict[str, dict[str, None]] = {}
        """The same per node; a node without assumed pods has no entry."""
        self.io_heavy: dict[str, dict[str, int]] = {}
        """Pods marked I/O-heavy held here, by namespace, then node (no zero counts): what
        an I/O-heavy pod of that namespace spreads away from."""

    @property
    def assumed_count(self) -> int:
        return len(self._assumed)

    def assumed_on(self, node: str) -> int:
        """How many pods are assumed on ``node``."""
        return len(self._assumed_on.get(node, ()))

    def bind(self, state: ClusterState | None, uid: str, node: str, request: PodRequest) -> None:
        """The API server says the pod runs on ``node``: count it there (and nowhere else)."""
        current = self.held.get(uid)
        if current is not None:
            if current.node == node and current.assumed_until is None:
                return  # already counted where it is
            self.release(state, uid)
        self._hold(state, uid, node, request, assumed_until=None)

    def assume(
        self, state: ClusterState | None, uid: str, request: PodRequest, node: str, now: float
    ) -> None:
        """Count a pod on the node the extender ranked first until the watch catches up
        or ``assumed_ttl_s`` passes; past a bound the oldest assumption goes (see above)."""
        current = self.held.get(uid)
        if current is not None and current.assumed_until is None:
            return  # the watch was faster
        if current is not None:
            self.release(state, uid)
        on_node = self._assumed_on.get(node, {})
        while len(on_node) >= self.settings.max_assumed_per_node:
            self.release(state, next(iter(on_node)))
        while len(self._assumed) >= self.settings.max_assumed:
            self.release(state, next(iter(self._assumed)))
        self._hold(state, uid, node, request, assumed_until=now + self.settings.assumed_ttl_s)

    def unassume(self, state: ClusterState | None, uid: str) -> None:
        """Forget pod ``uid``'s assumption, if it has one (a bound pod stays counted)."""
        current = self.held.get(uid)
        if current is not None and current.assumed_until is not None:
            self.release(state, uid)

    def expire(self, state: ClusterState | None, now: float) -> None:
        """Release the assumptions whose deadline has come: the oldest first, stopping at
        the first one still running (deadlines are in assumption order)."""
        for uid in list(self._assumed):
            until = self.held[uid].assumed_until
            assert until is not None
            if until > now:
                break
            self.release(state, uid)

    def release(self, state: ClusterState | None, uid: str) -> None:
        """Give back what pod ``uid`` holds."""
        held = self._forget(uid)
        if state is not None:
            _give_back(state, uid, held)

    def lift(self, state: ClusterState) -> None:
        """Give back what every pod here holds but keep the records: the inverse of
        :meth:`replay`, for holdings that count in ``state`` only for a while (see
        :meth:`coordinator.live.LiveCluster.counting_volcano`)."""
        for uid, held in self.held.items():
            _give_back(state, uid, held)

    def leave(self, gone: Container[str]) -> None:
        """The nodes ``gone`` went away (their state is about to be rebuilt without them):
        bound pods on them wait for them to return (in :attr:`unplaced`), assumed ones are
        forgotten."""
        for uid in [u for u, h in self.held.items() if h.node in gone]:
            held = self._forget(uid)
            if held.assumed_until is None:
                self.unplaced[uid] = (held.node, held.request)

    def replay(self, state: ClusterState) -> None:
        """Take every pod's share again from a rebuilt ``state`` (its rows start empty),
        then place the pods that waited for a node ``state`` now has."""
        for uid, held in list(self.held.items()):
            self._take(state, uid, held.node, held.request, held.assumed_until)
        for uid, (node, request) in list(self.unplaced.items()):
            if node in state.index:  # its node is known now
                del self.unplaced[uid]
                if uid in self.held:  # assumed elsewhere: the API server's word wins
                    self.release(state, uid)
                self._hold(state, uid, node, request, assumed_until=None)

    def _forget(self, uid: str) -> Held:
        held = self.held.pop(uid)
        if held.request.io_heavy:
            on = self.io_heavy[namespace_of(held.request)]
            on[held.node] -= 1
            if not on[held.node]:
                del on[held.node]
                if not on:
                    del self.io_heavy[namespace_of(held.request)]
        if held.assumed_until is not None:
            del self._assumed[uid]
            on_node = self._assumed_on[held.node]
            del on_node[uid]
            if not on_node:
                del self._assumed_on[held.node]
        return held

    def _hold(
        self,
        state: ClusterState | None,
        uid: str,
        node: str,
        request: PodRequest,
        assumed_until: float | None,
    ) -> None:
        if state is None or node not in state.index:
            return
        self._take(state, uid, node, request, assumed_until)
        if request.io_heavy:
            on = self.io_heavy.setdefault(namespace_of(request), {})
            on[node] = on.get(node, 0) + 1
        if assumed_until is not None:
            self._assumed[uid] = None
            self._assumed_on.setdefault(node, {})[uid] = None

    def _take(
        self,
        state: ClusterState,
        uid: str,
        node: str,
        request: PodRequest,
        assumed_until: float | None,
    ) -> None:
        """Take a pod's resources from its node, as much as is there: the API server's word
        that it runs there beats our arithmetic."""
        i = state.index[node]
        cpu = min(request.cpu_m, int(state.cpu_free[i]))
        mem = min(request.mem_b, int(state.mem_free[i]))
        devices: tuple[int, ...] = ()
        milli = request.gpu_milli
        if request.gpus and int((state.gpu_free[i] >= milli).sum()) >= request.gpus:
            devices = best_fit_devices(state.gpu_free[i], request.gpus, milli)
        state.allocate(Placement(i, devices), cpu, mem, milli if devices else 0, request.tag)
        state.occupy(i, uid, namespace_of(request), request.priority_class)
        self.held[uid] = Held(node, request, devices, cpu, mem, assumed_until)


def namespace_of(request: PodRequest) -> str:
    """The namespace of a pod (its name is ``namespace/name``)."""
    return request.namespace


def _give_back(state: ClusterState, uid: str, held: Held) -> None:
    """Return to ``state`` exactly what pod ``uid`` took (``held``; nothing, if its node is
    gone)."""
    if held.node not in state.index:
        return
    i = state.index[held.node]
    state.vacate(i, uid)
    milli = held.request.gpu_milli if held.devices else 0
    state.release(Placement(i, held.devices), held.cpu_m, held.mem_b, milli, held.request.tag)
