"""Headless Chromium driven over WebDriver (selenium + Debian's chromedriver), for tests
whose server runs on the test's own event loop.

Every browser call is blocking and goes to a worker thread (:class:`Page`), so the
event loop keeps answering the page's requests meanwhile; waiting is done by WebDriver
polling a condition inside the page, never by sleeping.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # the tests that need it skip, naming it
    webdriver = None

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 15.0

TILES_JS = """
return [...document.querySelectorAll('#grid .tile')]
  .filter((t) => t.getClientRects().length > 0)
  .map((t) => Object.fromEntries(
    [...t.attributes].filter((a) => a.name.startsWith('data-')).map((a) => [a.name, a.value])));
"""
"""The tiles the page shows (laid out, not hidden): each one's data attributes."""


def chromium() -> Iterator[Any]:
    """A headless Chromium (skips naming what is missing), quit afterwards."""
    if webdriver is None:
        pytest.skip("selenium not installed (pip install -e '.[test]')")
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium not installed (Debian packages chromium, chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class Page:
    """The page in ``driver``, every call off the event loop."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def open(self, url: str) -> None:
        self.driver.get_log("browser")  # drop what an earlier page logged
        await asyncio.to_thread(self.driver.get, url)

    async def js(self, script: str, *args: Any) -> Any:
        return await asyncio.to_thread(self.driver.execute_script, script, *args)

    async def until(self, script: str, what: str, *args: Any) -> Any:
        """Wait until ``script`` returns something true in the page; fail naming ``what``."""
        wait = WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05)
        failure = f"not within {WAIT_S:g} s: {what}"
        return await asyncio.to_thread(
            wait.until, lambda d: d.execute_script(script, *args), failure
        )

    async def loaded(self, total: int) -> None:
        """Wait until the page has drawn an answer of ``total`` nodes."""
        await self.until(
            "return document.getElementById('counts').dataset.total === arguments[0]",
            f"the page shows {total} nodes",
            str(total),
        )

    async def tiles(self) -> list[dict[str, str]]:
        return await self.js(TILES_JS)

    async def shown(self) -> list[str]:
        """The names of the tiles shown, in order."""
        return [t["data-node"] for t in await self.tiles()]

    async def type(self, element_id: str, text: str) -> None:
        """Type into an input as a user would (key events, one character at a time)."""
        element = await asyncio.to_thread(self.driver.find_element, By.ID, element_id)
        await asyncio.to_thread(element.send_keys, text)

    async def click(self, css: str) -> None:
        element = await asyncio.to_thread(self.driver.find_element, By.CSS_SELECTOR, css)
        await asyncio.to_thread(element.click)

    async def select(self, element_id: str, value: str) -> None:
        """Pick an option of a ``<select>`` as a user would."""
        element = await asyncio.to_thread(self.driver.find_element, By.ID, element_id)
        await asyncio.to_thread(Select(element).select_by_value, value)

    async def text(self, element_id: str) -> str:
        element = await asyncio.to_thread(self.driver.find_element, By.ID, element_id)
        return await asyncio.to_thread(lambda: element.text)

    def errors(self) -> list[str]:
        """What the page logged at error level since it was opened (script errors, CSP
        violations, failed loads)."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
