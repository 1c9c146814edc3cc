"""What every request handler shares: the store, the tokens and the serving options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from aiohttp import web

from common.clock import Clock, SystemClock
from hack.kubeapi.kubelet import PodAddresses
from hack.kubeapi.store import Store
from hack.kubeapi.tokens import TokenBook


@dataclass(eq=False)
class Cluster:
    store: Store
    tokens: TokenBook
    require_auth: bool = False
    """Off by default, as tests mostly exercise behaviour, not credentials. When on, every
    call but /version and the health checks needs a token valid for the API audience."""
    watch_timeout_s: float = 1800.0
    """A watch without ``timeoutSeconds`` ends after this (the apiserver picks 30-60 min)."""
    bookmark_interval_s: float = 60.0
    """How often a watch with ``allowWatchBookmarks`` gets a BOOKMARK (apiserver: ~1 min)."""
    kubelet: bool = True
    """Start pods bound to existing nodes (:mod:`hack.kubeapi.kubelet`); off: they stay
    Pending, for tests that write pod status themselves."""
    pod_addresses: PodAddresses = field(default_factory=PodAddresses)
    clock: Clock = field(default_factory=SystemClock)
    """What ``kubectl get`` ages (the AGE column) are measured against."""
    closing: bool = False
    wakers: set[Callable[[], None]] = field(default_factory=set)

    def close_watches(self) -> None:
        """Shutdown: wake every open watch so it ends its stream instead of being cancelled."""
        self.closing = True
        for wake in list(self.wakers):
            wake()


CLUSTER: Final = web.AppKey("cluster", Cluster)
