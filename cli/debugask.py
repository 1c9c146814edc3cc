"""Asking a coordinator's ``/debug`` endpoints, for the CLI's read-only explain commands
(``stowage colocation``, ``stowage plan --explain``, ``stowage top``): where they ask by
default, and one place that turns an HTTP error or an unreachable coordinator into one
line the command prints."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any, Final

TIMEOUT_S: Final = 10.0
DEBUG_URL: Final = "http://127.0.0.1:8081"
"""Where the commands ask by default: the coordinator's debug listener
(``server.debug_listen``) as ``kubectl -n stowage-system port-forward
deploy/stowage-coordinator 8081`` brings it to this machine. ``/debug`` is not served on
the main port."""


def add_coordinator_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--coordinator`` option every explain command takes."""
    parser.add_argument(
        "--coordinator",
        default=DEBUG_URL,
        help=f"base URL of a coordinator's debug listener (default: {DEBUG_URL})",
    )


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
