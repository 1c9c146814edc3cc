"""Approval through the webhook: a real HTTP server on 127.0.0.1 plays the chat bot — it
receives the signed plan, checks the signature itself, and calls the coordinator's
``/approvals/<plan>`` (served on 127.0.0.1 too) back — with the executor wired to the API
emulator. Signatures here are computed from their definition (HMAC-SHA256 of the body,
hex, ``sha256=`` in front), not by the code under test."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from coordinator.config import ConfigError, EvictionSettings
from coordinator.eviction import webhook
from coordinator.eviction.webhook import ApprovalHook
from coordinator.kube.approvals import PLAN_KEY
from coordinator.metrics import CoordinatorMetrics
from hack.kubeapi import KubeApi
from tests.coordinator.eviction.executorrig import Rig, preemption
from tests.hosts import FakeClock

SECRET = b"a-shared-secret-of-some-length"
HEADER = "X-Stowage-Signature"


def signed(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass
class Bot:
    """The chat bot: records each POST and whether its signature was right."""

    url: str = ""
    posts: list[tuple[dict[str, Any], bool]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    status: int = 200

    async def receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        good = hmac.compare_digest(request.headers.get(HEADER, ""), signed(body))
        self.posts.append((json.loads(body), good))
        self.arrived.set()
        return web.Response(status=self.status)


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@dataclass
class World:
    rig: Rig
    hook: ApprovalHook
    bot: Bot
    coordinator: str
    metrics: CoordinatorMetrics
    leading: list[bool]

    async def call(
        self, pid: str, body: bytes, signature: str | None = None, *, sign: bool = True
    ) -> tuple[int, dict[str, Any]]:
        headers = {} if not sign else {HEADER: signature or signed(body)}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.coordinator}/approvals/{pid}", data=body, headers=headers) as r,
        ):
            return r.status, await r.json()

    def body(self, pid: str, decision: str = "approve", at: float | None = None) -> bytes:
        stamp = self.rig.clock.wall() if at is None else at
        return json.dumps({"plan": pid, "decision": decision, "timestamp": stamp}).encode()

    def outcome(self, name: str) -> float:
        return self.metrics.approval_webhook.labels(name)._value.get()


@pytest.fixture
async def w(kube: KubeApi) -> AsyncIterator[World]:
    bot = Bot()
    bot_app = web.Application()
    bot_app.router.add_post("/hook", bot.receive)
    bot_runner, bot_url = await serve(bot_app)
    clock = FakeClock()
    metrics = CoordinatorMetrics()
    leading = [True]
    settings = EvictionSettings(
        approval_webhook=f"{bot_url}/hook",
        approval_webhook_secret_file="/unused",
        approval_callback_url="http://coordinator.example/approvals/",
    )
    hook = ApprovalHook(settings, SECRET, metrics, clock, lambda: leading[0])
    app = web.Application()
    webhook.add_routes(app, hook)
    runner, url = await serve(app)
    rig = Rig(kube, hook=hook, clock=clock, enabled=True)
    yield World(rig, hook, bot, url, metrics, leading)
    rig.close()
    await runner.cleanup()
    await bot_runner.cleanup()


async def propose(w: World) -> tuple[Any, str]:
    """A pending pod whose plan needs approval, proposed: the plan and its id (as posted)."""
    w.rig.pod("big", node=None, phase="Pending")
    a, b = w.rig.pod("a"), w.rig.pod("b")
    plan = preemption([a, b], needs_approval=True)
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    await asyncio.wait_for(w.bot.arrived.wait(), 10)
    (payload, good), *_ = w.bot.posts
    assert good
    return plan, payload["plan"]


async def test_the_bot_receives_the_signed_plan_and_its_approval_executes_it(w: World) -> None:
    plan, pid = await propose(w)
    (payload, _), *_ = w.bot.posts
    digest = hashlib.sha256(
        ("n1|" + ",".join(sorted(v.uid for v in plan.victims))).encode()
    ).hexdigest()[:16]
    assert pid == hashlib.sha256(f"default/big|{digest}".encode()).hexdigest()[:12]
    assert payload["callback"] == f"http://coordinator.example/approvals/{pid}"
    assert payload["trigger"] == "preemption" and payload["queue"] == "team-a"
    assert payload["node"] == "n1" and payload["pod"] == "default/big"
    assert sorted(v["uid"] for v in payload["victims"]) == sorted(v.uid for v in plan.victims)
    assert payload["reason"] == "big fits on n1" and payload["expires"]
    status, answer = await w.call(pid, w.body(pid))
    assert (status, answer) == (200, {"plan": pid, "decision": "approve"})
    assert await w.rig.cycle(plan) == ["evicted"]
    assert not any(w.rig.exists(v) for v in plan.victims)


async def test_a_plan_is_posted_once(w: World) -> None:
    plan, _ = await propose(w)
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    assert len(w.bot.posts) == 1 and w.outcome("sent") == 1


async def test_a_denial_withdraws_the_plan_with_an_event(w: World) -> None:
    plan, pid = await propose(w)
    assert (await w.call(pid, w.body(pid, "deny")))[0] == 200
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    assert "PreemptionPlanDenied" in w.rig.reasons("big")
    assert all(w.rig.exists(v) for v in plan.victims)
    assert await w.rig.cycle(plan) == ["awaiting-approval"]  # no new proposal: declined
    assert len(w.bot.posts) == 1


async def test_a_callback_after_expiry_is_refused_before_the_next_cycle(w: World) -> None:
    _, pid = await propose(w)
    w.rig.clock.advance(901)
    status, answer = await w.call(pid, w.body(pid))
    assert status == 404 and "not awaiting approval" in answer["error"]


async def test_a_plan_proposed_again_after_a_denial_is_not_denied_by_it(w: World) -> None:
    plan, pid = await propose(w)
    assert (await w.call(pid, w.body(pid, "deny")))[0] == 200
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    w.rig.clock.advance(301)  # past evictions.cooldown_s: the same plan may be proposed again
    w.bot.arrived.clear()
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    await asyncio.wait_for(w.bot.arrived.wait(), 10)
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    assert PLAN_KEY in w.rig.annotations("big")  # still published: not withdrawn again
    assert [p["plan"] for p, _ in w.bot.posts] == [pid, pid]


async def test_a_replaced_plan_no_longer_takes_callbacks(w: World) -> None:
    plan, pid = await propose(w)
    assert await w.rig.cycle(preemption([plan.victims[0]], needs_approval=True)) == [
        "awaiting-approval"
    ]
    status, answer = await w.call(pid, w.body(pid))
    assert status == 404 and "not awaiting approval" in answer["error"]


async def test_posts_are_rate_limited(w: World) -> None:
    for n in range(webhook.POST_BURST + 1):
        await w.hook.propose(f"plan{n}", webhook.Awaiting("default/p", "d", 2e9), {"n": n})
    assert len(w.bot.posts) == webhook.POST_BURST and w.outcome("rate-limited") == 1
    w.rig.clock.advance(1 / webhook.POSTS_PER_S)
    await w.hook.propose("later", webhook.Awaiting("default/p", "d", 2e9), {})
    assert len(w.bot.posts) == webhook.POST_BURST + 1


async def test_an_unapproved_plan_expires_with_an_event(w: World) -> None:
    plan, pid = await propose(w)
    w.rig.clock.advance(901)
    await w.rig.executor.start_cycle()
    assert "PreemptionPlanExpired" in w.rig.reasons("big")
    status, answer = await w.call(pid, w.body(pid))
    assert status == 404 and "not awaiting approval" in answer["error"]


@pytest.mark.parametrize(
    ("signature", "sign", "status", "error"),
    [
        (None, False, 401, "no X-Stowage-Signature"),
        ("sha256=" + "0" * 64, True, 401, "does not match"),
        (signed(b"other body"), True, 401, "does not match"),
    ],
)
async def test_a_bad_or_missing_signature_changes_nothing(
    w: World, signature: str | None, sign: bool, status: int, error: str
) -> None:
    plan, pid = await propose(w)
    got, answer = await w.call(pid, w.body(pid), signature, sign=sign)
    assert got == status and error in answer["error"]
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    assert all(w.rig.exists(v) for v in plan.victims)


async def test_a_callback_signed_with_another_secret_is_refused(w: World) -> None:
    plan, pid = await propose(w)
    body = w.body(pid)
    got, answer = await w.call(pid, body, signed(body, b"another-secret-entirely"))
    assert got == 401
    assert await w.rig.cycle(plan) == ["awaiting-approval"]


async def test_a_replayed_callback_is_refused(w: World) -> None:
    plan, pid = await propose(w)
    body = w.body(pid)
    assert (await w.call(pid, body))[0] == 200
    status, answer = await w.call(pid, body)
    assert status == 409 and "replay" in answer["error"]


@pytest.mark.parametrize("offset", [-301, 301])
async def test_a_stale_or_future_timestamp_is_refused(w: World, offset: float) -> None:
    plan, pid = await propose(w)
    status, answer = await w.call(pid, w.body(pid, at=w.rig.clock.wall() + offset))
    assert status == 401 and "from now" in answer["error"]
    assert await w.rig.cycle(plan) == ["awaiting-approval"]


async def test_a_timestamp_at_the_window_edge_is_taken(w: World) -> None:
    _, pid = await propose(w)
    assert (await w.call(pid, w.body(pid, at=w.rig.clock.wall() - 300)))[0] == 200


async def test_an_unknown_plan_is_404(w: World) -> None:
    await propose(w)
    status, answer = await w.call("0123456789ab", w.body("0123456789ab"))
    assert status == 404 and "not awaiting approval" in answer["error"]


async def test_approving_one_plan_by_another_plans_url_is_refused(w: World) -> None:
    plan, pid = await propose(w)
    status, answer = await w.call("0123456789ab", w.body(pid))
    assert status == 400 and "names plan" in answer["error"]
    assert await w.rig.cycle(plan) == ["awaiting-approval"]


async def test_an_approval_does_not_serve_a_changed_victim_set(w: World) -> None:
    plan, pid = await propose(w)
    assert (await w.call(pid, w.body(pid)))[0] == 200
    other = preemption([plan.victims[0]], needs_approval=True)
    assert await w.rig.cycle(other) == ["awaiting-approval"]  # a new plan, proposed afresh
    assert all(w.rig.exists(v) for v in plan.victims)


async def test_a_follower_answers_409(w: World) -> None:
    plan, pid = await propose(w)
    w.leading[0] = False
    status, answer = await w.call(pid, w.body(pid))
    assert status == 409 and "not the leader" in answer["error"]
    assert await w.rig.cycle(plan) == ["awaiting-approval"]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"plan": "x"}',
        b'{"plan": "PID", "decision": "yes", "timestamp": 0}',
        b'{"plan": "PID", "decision": "approve", "timestamp": "now"}',
        b'{"plan": "PID", "decision": "approve", "timestamp": true}',
        b'{"plan": "PID", "decision": "approve", "timestamp": 0, "more": 1}',
    ],
)
async def test_a_malformed_body_is_400(w: World, body: bytes) -> None:
    plan, pid = await propose(w)
    body = body.replace(b"PID", pid.encode())
    status, answer = await w.call(pid, body)
    assert status == 400 and answer["error"]
    assert await w.rig.cycle(plan) == ["awaiting-approval"]


async def test_an_oversized_body_is_413(w: World) -> None:
    _, pid = await propose(w)
    status, answer = await w.call(pid, b"x" * (webhook.MAX_BODY_B + 1))
    assert status == 413 and "at most" in answer["error"]


async def test_a_failing_endpoint_is_counted_not_retried(w: World) -> None:
    w.bot.status = 500
    plan, _ = await propose(w)
    assert w.outcome("failed") == 1
    assert await w.rig.cycle(plan) == ["awaiting-approval"]
    assert len(w.bot.posts) == 1


def test_the_webhook_is_off_by_default_and_needs_its_secret(tmp_path: Any) -> None:
    assert EvictionSettings().approval_webhook == ""
    with pytest.raises(ConfigError, match="approval_webhook_secret_file"):
        EvictionSettings(approval_webhook="http://x/", approval_callback_url="http://y/")
    with pytest.raises(ConfigError, match="approval_callback_url"):
        EvictionSettings(approval_webhook="http://x/", approval_webhook_secret_file="/s")
    short = tmp_path / "short"
    short.write_bytes(b"tiny\n")
    with pytest.raises(ConfigError, match="under 16 bytes") as e:
        webhook.read_secret(str(short))
    assert "tiny" not in str(e.value)
    good = tmp_path / "good"
    good.write_bytes(SECRET + b"\n")
    assert webhook.read_secret(str(good)) == SECRET
