"""Helpers the emulator's tests share (fixtures are in this directory's conftest)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client import ApiException


def status_of(error: ApiException) -> dict[str, Any]:
    """The Status object an ApiException carries in its body."""
    return json.loads(error.body)
