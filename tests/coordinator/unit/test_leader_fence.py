"""Leader election on a fake clock against the real API emulator and the real client:
the fence's deadline, stepping down after a pause, and how lease failures are logged."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import pytest
from kubernetes import client

from coordinator.config import LeaderSettings
from coordinator.kube.client import api_client
from coordinator.kube.leader import Fence, LeaderElector, LeaseLost
from coordinator.metrics import CoordinatorMetrics
from hack.kubeapi import KubeApi
from hack.kubeapi.resources import LEASES
from tests.hosts import FakeClock

NAMESPACE = "stowage-system"
TIMINGS = LeaderSettings(
    lease_name="lease", lease_duration_s=2.0, renew_deadline_s=1.5, retry_period_s=0.3
)


def test_the_fence_holds_strictly_within_the_renew_deadline() -> None:
    clock = FakeClock()
    fence = Fence(1.5, clock.monotonic)
    assert not fence.is_held()  # never renewed
    fence.renewed(clock.monotonic())
    clock.advance(1.4999)
    assert fence.is_held()
    fence.check("patch node a")
    clock.advance(0.0001)
    assert not fence.is_held()
    with pytest.raises(LeaseLost, match="patch node a: not written"):
        fence.check("patch node a")
    fence.renewed(clock.monotonic())
    assert fence.is_held(clock.monotonic())
    fence.revoke()
    assert not fence.is_held()


@pytest.fixture
def api() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as emulator:
        yield emulator


class Replica:
    def __init__(self, api: KubeApi, name: str) -> None:
        self.clock = FakeClock()
        self.leading = asyncio.Event()
        self.metrics = CoordinatorMetrics()
        self._client = api_client(host=api.url)
        self.elector = LeaderElector(
            client.CoordinationV1Api(self._client), NAMESPACE, name, TIMINGS, self.leading,
            self.metrics, monotonic=self.clock.monotonic,
        )  # fmt: skip

    def close(self) -> None:
        self._client.close()


@pytest.fixture
def replicas(api: KubeApi) -> Iterator[tuple[Replica, Replica]]:
    pair = (Replica(api, "a"), Replica(api, "b"))
    yield pair
    for replica in pair:
        replica.close()


async def test_a_paused_leader_is_fenced_before_its_elector_runs_and_then_steps_down(
    api: KubeApi, replicas: tuple[Replica, Replica], caplog: pytest.LogCaptureFixture
) -> None:
    api.add_namespace(NAMESPACE)
    a, b = replicas
    await a.elector.step()
    assert a.leading.is_set() and a.elector.fence.is_held()
    await b.elector.step()  # b sees a's lease
    assert not b.leading.is_set() and not b.elector.fence.is_held()

    # a is paused for 3 s: no step of its elector runs. b's clock runs on, and after the
    # lease duration without a change it takes over.
    a.clock.advance(3.0)
    b.clock.advance(2.01)
    await b.elector.step()
    assert b.leading.is_set()
    # a wakes: its flag still says leading, the fence already does not.
    assert a.leading.is_set() and not a.elector.fence.is_held()
    with caplog.at_level(logging.WARNING, logger="coordinator.kube.leader"):
        await a.elector.step()
    assert not a.leading.is_set()
    assert a.metrics.registry.get_sample_value("stowage_leader") == 0
    assert "lost the lease: stopped leading" in caplog.text


async def test_a_leader_that_was_not_replaced_renews_after_a_pause(
    api: KubeApi, replicas: tuple[Replica, Replica]
) -> None:
    api.add_namespace(NAMESPACE)
    a, _ = replicas
    await a.elector.step()
    a.clock.advance(3.0)
    assert not a.elector.fence.is_held()
    await a.elector.step()  # nobody took the Lease: renewing it is safe
    assert a.leading.is_set() and a.elector.fence.is_held()


async def test_lease_failures_are_warnings_once_per_change(
    api: KubeApi, replicas: tuple[Replica, Replica], caplog: pytest.LogCaptureFixture
) -> None:
    """No namespace for the Lease: one warning naming it, however often it is retried;
    one line when it recovers."""
    a, _ = replicas
    with caplog.at_level(logging.WARNING, logger="coordinator.kube.leader"):
        for _ in range(5):
            await a.elector.step()
            a.clock.advance(0.3)
        assert not a.leading.is_set()
        failures = [r for r in caplog.records if "not found" in r.getMessage()]
        assert len(failures) == 1
        assert failures[0].levelno == logging.WARNING
        assert f'namespaces "{NAMESPACE}" not found' in failures[0].getMessage()
        api.add_namespace(NAMESPACE)
        for _ in range(3):
            await a.elector.step()
    assert a.leading.is_set()
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("lease: reachable again") == 1
    assert len(messages) == 2


async def test_stopping_revokes_the_fence_at_once_and_hands_the_lease_back(
    api: KubeApi, replicas: tuple[Replica, Replica]
) -> None:
    api.add_namespace(NAMESPACE)
    a, _ = replicas
    task = asyncio.create_task(a.elector.run())
    await asyncio.wait_for(a.leading.wait(), timeout=10)
    assert a.elector.fence.is_held()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert not a.leading.is_set()
    assert not a.elector.fence.is_held()  # on the clock it would hold for 1.5 s more
    lease = api.store.get(LEASES, NAMESPACE, TIMINGS.lease_name)
    assert lease["spec"]["holderIdentity"] == ""
