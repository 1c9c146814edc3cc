"""A headless Chromium per test module (starting one takes about a second), a fresh
:class:`Page` on it per test, and the integration fixtures (an emulated API server,
coordinator replicas served on 127.0.0.1) for the page on a real coordinator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.coordinator.integration.conftest import api, session, start
from tests.coordinator.ui import browser

__all__ = ["api", "driver", "page", "session", "start"]


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    yield from browser.chromium()


@pytest.fixture
def page(driver: Any) -> browser.Page:
    return browser.Page(driver)
