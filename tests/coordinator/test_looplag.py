"""Readiness follows the event loop's lag: a replica too busy to answer schedulers in time
leaves the Service, and comes back once it keeps up."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient

from common.clock import SystemClock
from common.config import build
from coordinator.app import LOOP_LAG, make_app
from coordinator.config import CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.looplag import LoopLag
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from tests.coordinator.extender.conftest import NoAuthenticator
from tests.coordinator.integration.integration_rig import eventually
from tests.hosts import FakeClock

Client = Callable[[Any], Awaitable[TestClient[Any, Any]]]


def test_the_lag_is_how_late_the_sampler_woke() -> None:
    clock = FakeClock()
    lag = LoopLag(clock, period_s=0.1)
    clock.advance(0.1)
    lag.woke()
    assert lag.lag_s() == 0.0
    clock.advance(0.35)  # woke 0.25 s after it was due
    lag.woke()
    assert abs(lag.lag_s() - 0.25) < 1e-9
    clock.advance(0.1)
    lag.woke()
    assert lag.lag_s() == 0.0


def test_an_overdue_sample_counts_before_it_wakes() -> None:
    """A loop blocked for seconds answers its first probe before the sampler has woken."""
    clock = FakeClock()
    lag = LoopLag(clock, period_s=0.1)
    clock.advance(2.1)
    assert abs(lag.lag_s() - 2.0) < 1e-9


async def test_readyz_fails_while_the_loop_lags(aiohttp_client: Client) -> None:
    settings = build(CoordinatorSettings, {"server": {"ready_max_loop_lag_s": 0.2}})
    metrics = CoordinatorMetrics()
    clock = SystemClock()
    services = Services(
        settings=settings,
        clock=clock,
        metrics=metrics,
        cluster=LiveCluster(settings, clock, metrics),
        authenticator=NoAuthenticator(),
    )
    app = make_app(services)
    client = await aiohttp_client(app)
    keeping_up = lambda: app[LOOP_LAG].lag_s() < 0.2  # noqa: E731

    await eventually(keeping_up, "the loop keeps up at first")
    assert (await client.get("/readyz")).status == 200
    time.sleep(0.6)  # noqa: ASYNC251 - the fault: the loop held (as a long plan would)
    response = await client.get("/readyz")
    assert response.status == 503
    assert "event loop" in await response.text()
    await eventually(keeping_up, "the loop keeps up again")
    assert (await client.get("/readyz")).status == 200
