"""What every request handler and background task of the coordinator shares.

One :class:`Services` per coordinator (per test), reached from a handler as
``request.app[SERVICES]`` — no module-level state, so two coordinators (a leader and a
follower in one test) run side by side.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from common.clock import Clock
from coordinator.config import CoordinatorSettings
from coordinator.decisionlog import DecisionLog
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics


class Identity(Protocol):
    """Who sent a request, as the authenticator established it."""

    @property
    def node(self) -> str | None:
        """The node the caller runs on, when its credentials say (pod-bound tokens do)."""
        ...


class Authenticator(Protocol):
    async def authenticate(self, token: str | None) -> Identity | None:
        """The caller behind a bearer token, or None when it is not accepted."""
        ...


@dataclass
class Services:
    settings: CoordinatorSettings
    clock: Clock
    metrics: CoordinatorMetrics
    cluster: LiveCluster
    authenticator: Authenticator
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the Node and Pod caches are filled: /readyz and the extender wait for it."""
    leader: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while this replica holds the Lease: only the leader publishes or acts."""
    evictions: DecisionLog = field(default_factory=DecisionLog)
    """The eviction executor's latest decisions (``/debug/evictions``), and the preempt
    verb's refusals (on followers, only those)."""


SERVICES = web.AppKey("services", Services)
