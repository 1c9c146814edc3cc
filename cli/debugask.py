"""Asking a coordinator's ``/debug`` endpoints, for the CLI's read-only explain commands
(``stowage colocation``, ``stowage plan --explain``): one place that turns an HTTP error
or an unreachable coordinator into one line the command prints."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any, Final

TIMEOUT_S: Final = 10.0


class AskError(Exception):
    """The coordinator could not be asked, or answered with an error; the message says which."""


def ask(coordinator: str, path: str, params: Mapping[str, str]) -> Any:
    """The JSON answer of ``GET {coordinator}{path}?{params}``."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    url = f"{coordinator.rstrip('/')}{path}{query}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # noqa: S310 - ours
            return json.load(response)
    except urllib.error.HTTPError as e:
        try:
            error = json.load(e).get("error", e.reason)
        except ValueError:
            error = e.reason
        raise AskError(f"{error} (HTTP {e.code})") from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise AskError(f"cannot ask {url}: {e}") from e
