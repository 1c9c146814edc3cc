"""Helpers the emulator's tests share (fixtures are in this directory's conftest)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")


def status_of(error: ApiException) -> dict[str, Any]:
    """The Status object an ApiException carries in its body."""
    return json.loads(error.body)


def binding(pod: str, node: str, **meta: str) -> client.V1Binding:
    """A scheduler's Binding of ``pod`` to ``node``."""
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod, **meta),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
