"""The approval webhook as the coordinator's app wires it: the callback route exists only
when the webhook is configured, it reads the secret file at start (a missing or short one
stops the start with the file named, never its contents), and it answers as the leader only
when this replica leads. Signatures are computed here from their definition (HMAC-SHA256 of
the body, hex, ``sha256=`` in front)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from common.clock import SystemClock
from common.config import build
from coordinator.app import make_app
from coordinator.config import ConfigError, CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from tests.coordinator.extender.conftest import NoAuthenticator

Client = Callable[..., Awaitable[TestClient[Any, Any]]]
SECRET = b"a-shared-secret-of-some-length"


def services_with(secret_file: Path | None) -> Services:
    evictions: dict[str, Any] = {}
    if secret_file is not None:
        evictions = {
            "approval_webhook": "http://127.0.0.1:9/hook",
            "approval_callback_url": "http://127.0.0.1:9/",
            "approval_webhook_secret_file": str(secret_file),
        }
    settings = build(CoordinatorSettings, {"evictions": evictions})
    metrics = CoordinatorMetrics()
    clock = SystemClock()
    return Services(
        settings=settings,
        clock=clock,
        metrics=metrics,
        cluster=LiveCluster(settings, clock, metrics),
        authenticator=NoAuthenticator(),
    )


def callback(plan: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"plan": plan, "decision": "approve", "timestamp": time.time()}).encode()
    signature = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return body, {"X-Stowage-Signature": signature}


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_bytes(SECRET + b"\n")
    return path


async def test_without_the_webhook_there_is_no_callback_route(aiohttp_client: Client) -> None:
    client = await aiohttp_client(make_app(services_with(None)))
    body, headers = callback("p-1")
    response = await client.post("/approvals/p-1", data=body, headers=headers)
    assert response.status == 404


async def test_an_unsigned_callback_is_refused_by_the_wired_hook(
    aiohttp_client: Client, secret_file: Path
) -> None:
    client = await aiohttp_client(make_app(services_with(secret_file)))
    response = await client.post("/approvals/p-1", data=b"{}")
    assert response.status == 401
    assert "X-Stowage-Signature" in (await response.json())["error"]


async def test_the_hook_answers_as_leader_only_while_this_replica_leads(
    aiohttp_client: Client, secret_file: Path
) -> None:
    services = services_with(secret_file)
    client = await aiohttp_client(make_app(services))
    body, headers = callback("p-1")
    response = await client.post("/approvals/p-1", data=body, headers=headers)
    assert response.status == 409
    assert "not the leader" in (await response.json())["error"]

    services.leader.set()
    body, headers = callback("p-1")
    response = await client.post("/approvals/p-1", data=body, headers=headers)
    assert response.status == 404  # leading now, and no plan p-1 awaits approval
    assert "not awaiting approval" in (await response.json())["error"]


@pytest.mark.parametrize("content", [None, b"short"], ids=["missing", "too-short"])
def test_a_bad_secret_file_stops_the_start_naming_the_file_not_its_contents(
    tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "secret"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match="approval_webhook_secret_file") as raised:
        make_app(services_with(path))
    assert str(path) in str(raised.value)
    assert "short" not in str(raised.value).replace(str(path), "")
