"""JSON over HTTP to the API emulator and the coordinator, on kept-alive connections.

A replay makes four calls per pod (create, filter, prioritize, bind); ``requests``
keeps one connection per server open across them, where ``urllib`` would connect anew
each time. Anything but a 2xx answer is a :class:`DemoError` naming the call and what the
server said, so the demo stops with one line instead of a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import requests

from common.errors import StowageError

TIMEOUT_S = 10.0


class DemoError(StowageError):
    """The demo cannot go on; the message says why, in one line."""


class JsonClient:
    """Calls to one server (``base``: ``http://host:port``)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.session = requests.Session()

    def get(self, path: str) -> Any:
        return self._call("GET", path, None)

    def post(self, path: str, body: Any) -> Any:
        return self._call("POST", path, body)

    def watch(self, path: str) -> Iterator[Any]:
        """The events of a ``?watch=1`` GET as they come (no read timeout: a quiet watch
        is not a dead one; the server ends it at its ``timeoutSeconds``)."""
        url = self.base + path
        try:
            with self.session.get(url, stream=True, timeout=(TIMEOUT_S, None)) as answer:
                if not answer.ok:
                    raise DemoError(f"GET {url}: {answer.status_code} {answer.text[:300]}")
                for line in answer.iter_lines():
                    if line:
                        yield json.loads(line)
        except requests.RequestException as e:
            raise DemoError(f"GET {url}: {e}") from e

    def text(self, path: str) -> str:
        """A GET whose answer is text (``/metrics``, ``/debug/evictions``)."""
        return str(self._call("GET", path, None, as_json=False))

    def _call(self, method: str, path: str, body: Any, *, as_json: bool = True) -> Any:
        url = self.base + path
        try:
            answer = self.session.request(method, url, json=body, timeout=TIMEOUT_S)
        except requests.RequestException as e:
            raise DemoError(f"{method} {url}: {e}") from e
        if not answer.ok:
            raise DemoError(f"{method} {url}: {answer.status_code} {answer.text[:300]}")
        if not as_json:
            return answer.text
        try:
            return answer.json()
        except ValueError as e:
            raise DemoError(f"{method} {url}: the answer is not JSON") from e
