"""Fixtures: an emulated API server per test (``@pytest.mark.kubeapi(**options)`` passes
options such as ``history``), an HTTP session, and a ``start`` factory for coordinator
replicas that are all stopped — before the emulator — when the test ends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest

from coordinator.config import CoordinatorSettings
from coordinator.kube import publisher
from tests.coordinator.integration import integration_rig as rig

Start = Callable[..., Awaitable[rig.Coordinator]]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kubeapi(**options): options of the test's emulated API server"
    )


@pytest.fixture
async def api(request: pytest.FixtureRequest) -> AsyncIterator[rig.RecordingKubeApi]:
    marker = request.node.get_closest_marker("kubeapi")
    before = rig.watch_threads()
    emulator = rig.RecordingKubeApi(**(marker.kwargs if marker else {}))
    await emulator.start()
    emulator.add_namespace(rig.NAMESPACE)
    try:
        yield emulator
    finally:
        await emulator.stop()
        # Stopped coordinators' watch threads end with their streams, which ended with
        # the emulator; wait for them so none outlives the test's event loop.
        await rig.eventually(
            lambda: not (rig.watch_threads() - before), "the watch threads ended", 10.0
        )


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        yield s


@pytest.fixture
async def start(
    api: rig.RecordingKubeApi, session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Start]:
    """``await start(settings, name=...)``: a coordinator replica, serving."""
    monkeypatch.setattr(publisher, "TICK_S", rig.PUBLISHER_TICK_S)
    started: list[rig.Coordinator] = []

    async def start(
        settings: CoordinatorSettings | None = None, *, name: str | None = None
    ) -> rig.Coordinator:
        coordinator = rig.Coordinator(
            name or f"replica-{len(started)}", api.url, settings or rig.settings(), session
        )
        started.append(coordinator)
        return await coordinator.start()

    try:
        yield start
    finally:
        for coordinator in reversed(started):
            await coordinator.stop()
