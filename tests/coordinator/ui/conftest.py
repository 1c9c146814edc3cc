"""A headless Chromium per test module (starting one takes about a second), and a fresh
:class:`Page` on it per test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.coordinator.ui import browser


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    yield from browser.chromium()


@pytest.fixture
def page(driver: Any) -> browser.Page:
    return browser.Page(driver)
