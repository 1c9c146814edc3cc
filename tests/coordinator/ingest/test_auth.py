"""Authenticators. TokenReviewAuth talks, through the real kubernetes client, to a small
real HTTP server on 127.0.0.1 that answers ``POST /apis/authentication.k8s.io/v1/
tokenreviews`` the way the API server does, and counts what it is asked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client as k8s

from common.errors import ConfigError
from coordinator.auth import (
    NODE_NAME_EXTRA,
    AuthUnavailableError,
    Caller,
    NoAuth,
    StaticTokens,
    TokenReviewAuth,
    build_authenticator,
    token_digest,
)
from tests.coordinator.ingest.conftest import MakeRig, report_for, settings_with
from tests.hosts import FakeClock
from tests.kit import free_port

AUDIENCE = "stowage-coordinator"
AGENT_SA = "system:serviceaccount:stowage-system:stowage-agent"
REVIEWS_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
COORDINATOR_TOKEN = "coordinator-sa-token"
TTL_S = 60.0


def pod_bound(node: str | None = "node-a", *, audiences: list[str] | None = None, **user: Any):
    """The status the API server gives a pod-bound projected token (KEP-4193 extras)."""
    extra = {
        "authentication.kubernetes.io/credential-id": ["JTI=7ee52be0"],
        "authentication.kubernetes.io/pod-name": ["stowage-agent-x7k2p"],
        "authentication.kubernetes.io/pod-uid": ["e87dbbd6-0000-4000-8000-000000000001"],
    }
    if node is not None:
        extra[NODE_NAME_EXTRA] = [node]
        extra["authentication.kubernetes.io/node-uid"] = ["497e9d9a-0000-4000-8000-0000000000aa"]
    return {
        "authenticated": True,
        "audiences": [AUDIENCE] if audiences is None else audiences,
        "user": {
            "username": AGENT_SA,
            "uid": "f8b4161b-0000-4000-8000-000000000002",
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "extra": extra,
            **user,
        },
    }


@dataclass
class FakeApiServer:
    """Answers TokenReviews from ``statuses`` (token → status; unknown tokens are not
    authenticated), or with ``fail_with`` as the HTTP status; records every request."""

    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_with: int | None = None
    hang: asyncio.Event | None = None
    garble: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)

    async def review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        if self.hang is not None:
            await self.hang.wait()
        if self.garble:
            return web.json_response({"kind": "TokenReview", "status": {}}, status=201)
        if self.fail_with is not None:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "no"}
            return web.json_response(status, status=self.fail_with)
        token = body["spec"]["token"]
        status = self.statuses.get(token, {"authenticated": False, "error": "invalid token"})
        review = {**body, "metadata": {"creationTimestamp": None}, "status": status}
        return web.json_response(review, status=201)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(REVIEWS_PATH, self.review)
        return app

    def tokens_reviewed(self) -> list[str]:
        return [r["spec"]["token"] for r in self.requests]


def api_client(url: str) -> k8s.ApiClient:
    cfg = k8s.Configuration()
    cfg.host = url
    cfg.api_key = {"authorization": COORDINATOR_TOKEN}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return k8s.ApiClient(cfg)


@pytest.fixture
def clients() -> Iterator[list[k8s.ApiClient]]:
    made: list[k8s.ApiClient] = []
    yield made
    for c in made:
        c.close()


@pytest.fixture
def api_server() -> FakeApiServer:
    return FakeApiServer(
        statuses={
            "agent-token-a": pod_bound("node-a"),
            "agent-token-b": pod_bound("node-b"),
            "unbound-token": pod_bound(None),
            "other-audience": pod_bound("node-a", audiences=["https://kubernetes.default.svc"]),
            "no-audience": pod_bound("node-a", audiences=[]),
            "two-nodes": {
                **pod_bound("node-a"),
                "user": {"username": AGENT_SA, "extra": {NODE_NAME_EXTRA: ["node-a", "node-b"]}},
            },
            "some-other-sa": pod_bound("node-a", username="system:serviceaccount:ml:trainer"),
        }
    )


MakeAuth = Callable[..., Any]


@pytest.fixture
async def make_auth(
    aiohttp_server: Any, api_server: FakeApiServer, clock: FakeClock, clients: list[Any]
) -> AsyncIterator[MakeAuth]:
    server = await aiohttp_server(api_server.app())
    url = str(server.make_url("")).rstrip("/")

    def make(url: str = url, **kw: Any) -> TokenReviewAuth:
        c = api_client(url)
        clients.append(c)
        kw.setdefault("audience", AUDIENCE)
        kw.setdefault("ttl_s", TTL_S)
        return TokenReviewAuth(k8s.AuthenticationV1Api(c), clock=clock, **kw)

    yield make


def dead_url() -> str:
    """A URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


# ------------------------------------------------------------------ TokenReview


async def test_pod_bound_token_is_accepted_for_its_node(
    make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    auth = make_auth()

    caller = await auth.authenticate("agent-token-a")

    assert caller == Caller(node="node-a", name=AGENT_SA)
    assert len(api_server.requests) == 1
    sent = api_server.requests[0]
    assert sent["kind"] == "TokenReview"
    assert sent["apiVersion"] == "authentication.k8s.io/v1"
    assert sent["spec"] == {"token": "agent-token-a", "audiences": [AUDIENCE]}
    assert api_server.authorizations == [f"Bearer {COORDINATOR_TOKEN}"]


@pytest.mark.parametrize(
    "token",
    ["unbound-token", "other-audience", "no-audience", "two-nodes", "expired-or-forged"],
)
async def test_tokens_that_do_not_bind_to_one_node_of_our_audience_are_refused(
    make_auth: MakeAuth, api_server: FakeApiServer, token: str
) -> None:
    auth = make_auth()

    assert await auth.authenticate(token) is None
    assert api_server.tokens_reviewed() == [token]


async def test_no_token_is_refused_without_asking(
    make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    auth = make_auth()
    assert await auth.authenticate(None) is None
    assert await auth.authenticate("") is None
    assert api_server.requests == []


async def test_service_accounts_can_be_restricted(make_auth: MakeAuth) -> None:
    auth = make_auth(usernames={AGENT_SA})
    assert await auth.authenticate("agent-token-a") == Caller(node="node-a", name=AGENT_SA)
    assert await auth.authenticate("some-other-sa") is None
    assert await make_auth().authenticate("some-other-sa") is not None


async def test_answers_are_cached_both_ways_until_the_ttl(
    make_auth: MakeAuth, api_server: FakeApiServer, clock: FakeClock
) -> None:
    auth = make_auth()
    for _ in range(3):
        assert await auth.authenticate("agent-token-a") is not None
        assert await auth.authenticate("expired-or-forged") is None
    assert api_server.tokens_reviewed() == ["agent-token-a", "expired-or-forged"]

    clock.advance(TTL_S - 1)
    await auth.authenticate("agent-token-a")
    assert len(api_server.requests) == 2
    clock.advance(1)
    await auth.authenticate("agent-token-a")
    await auth.authenticate("expired-or-forged")
    assert api_server.tokens_reviewed()[2:] == ["agent-token-a", "expired-or-forged"]
    assert auth.reviews == 4


async def test_cache_keeps_digests_not_tokens(make_auth: MakeAuth) -> None:
    auth = make_auth()
    await auth.authenticate("agent-token-a")
    await auth.authenticate("expired-or-forged")

    keys = list(auth._accepted._items) + list(auth._refused._items)
    assert keys == [token_digest("agent-token-a"), token_digest("expired-or-forged")]
    assert all(b"token" not in k and b"forged" not in k for k in keys)


async def test_cache_is_bounded_least_recently_used_first_out(
    make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    tokens = [f"agent-{i}" for i in range(5)]
    api_server.statuses.update({t: pod_bound(f"node-{i}") for i, t in enumerate(tokens)})
    auth = make_auth(max_cached=3)

    for token in tokens[:3]:
        await auth.authenticate(token)
    await auth.authenticate(tokens[0])  # a hit: now the most recently used
    for token in tokens[3:]:
        await auth.authenticate(token)  # evicts tokens[1], then tokens[2]
    assert len(auth._accepted) == 3
    before = len(api_server.requests)
    await auth.authenticate(tokens[0])
    await auth.authenticate(tokens[4])
    assert len(api_server.requests) == before
    await auth.authenticate(tokens[1])
    assert api_server.tokens_reviewed()[-1] == tokens[1]


async def test_refusals_cannot_evict_accepted_tokens(
    make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    auth = make_auth(max_cached=8)
    await auth.authenticate("agent-token-a")
    for i in range(50):
        await auth.authenticate(f"forged-{i}")
    requests = len(api_server.requests)

    assert await auth.authenticate("agent-token-a") is not None
    assert len(api_server.requests) == requests
    assert len(auth._refused) == 1


async def test_api_server_down_is_unavailable_and_not_cached(
    make_auth: MakeAuth, clock: FakeClock
) -> None:
    auth = make_auth(url=dead_url(), pause_s=1.0)

    for _ in range(2):
        with pytest.raises(AuthUnavailableError, match="unreachable"):
            await auth.authenticate("agent-token-a")
        clock.advance(1.0)
    assert auth.reviews == 2


async def test_after_a_failure_reviews_pause_but_cached_tokens_pass(
    make_auth: MakeAuth, api_server: FakeApiServer, clock: FakeClock
) -> None:
    auth = make_auth(pause_s=1.0)
    assert await auth.authenticate("agent-token-a") is not None
    api_server.fail_with = 503
    with pytest.raises(AuthUnavailableError, match="HTTP 503"):
        await auth.authenticate("agent-token-b")
    asked = len(api_server.requests)

    clock.advance(0.5)
    with pytest.raises(AuthUnavailableError, match="not asking again yet"):
        await auth.authenticate("agent-token-b")
    assert await auth.authenticate("agent-token-a") is not None
    assert len(api_server.requests) == asked

    api_server.fail_with = None
    clock.advance(0.5)
    assert await auth.authenticate("agent-token-b") == Caller(node="node-b", name=AGENT_SA)


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_api_server_failing_is_unavailable_and_not_cached(
    make_auth: MakeAuth, api_server: FakeApiServer, clock: FakeClock, status: int
) -> None:
    api_server.fail_with = status
    auth = make_auth(pause_s=1.0)

    for _ in range(2):
        with pytest.raises(AuthUnavailableError, match=f"HTTP {status}"):
            await auth.authenticate("agent-token-a")
        clock.advance(1.0)
    assert len(api_server.requests) >= 2

    api_server.fail_with = None
    assert await auth.authenticate("agent-token-a") is not None


async def test_api_refusing_the_coordinator_fails_closed_and_is_not_cached(
    make_auth: MakeAuth, api_server: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """403: the coordinator lacks ``create`` on tokenreviews. Nobody gets in; the agent's
    token is not to blame, so it is asked about again once the RBAC is fixed."""
    api_server.fail_with = 403
    auth = make_auth()

    assert await auth.authenticate("agent-token-a") is None
    assert await auth.authenticate("agent-token-a") is None
    assert len(api_server.requests) == 2
    assert "HTTP 403" in caplog.text
    assert "agent-token-a" not in caplog.text

    api_server.fail_with = None
    assert await auth.authenticate("agent-token-a") is not None


async def test_an_unreadable_answer_is_unavailable(
    make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    api_server.garble = True  # no spec: the client refuses to build a V1TokenReview
    with pytest.raises(AuthUnavailableError, match="unreadable"):
        await make_auth().authenticate("agent-token-a")


async def test_a_review_that_takes_too_long_is_unavailable(
    make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    api_server.hang = asyncio.Event()
    auth = make_auth(timeout_s=0.2)
    try:
        with pytest.raises(AuthUnavailableError):
            await auth.authenticate("agent-token-a")
    finally:
        api_server.hang.set()


async def test_failures_are_logged_once_without_the_token(
    make_auth: MakeAuth, api_server: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="coordinator.auth")
    api_server.fail_with = 500
    auth = make_auth(pause_s=0.0)
    for _ in range(3):
        with pytest.raises(AuthUnavailableError):
            await auth.authenticate("agent-token-a")
    assert len(api_server.requests) == 3
    api_server.fail_with = None
    await auth.authenticate("agent-token-a")

    lines = [r.getMessage() for r in caplog.records if r.name == "coordinator.auth"]
    assert lines == [
        "TokenReview failed: HTTP 500 Internal Server Error; refusing reports until it works",
        "TokenReview works again",
    ]
    assert "agent-token-a" not in caplog.text


# ------------------------------------------------------- through the ingest endpoint


LATER = 1_790_000_010.0


async def test_ingest_with_token_review(
    make_rig: MakeRig, make_auth: MakeAuth, api_server: FakeApiServer
) -> None:
    rig = await make_rig(settings_with(auth="tokenreview", static_tokens={}), make_auth())

    ok = await rig.post(report_for("node-a"), token="agent-token-a")
    mismatch = await rig.post(report_for("node-a"), token="agent-token-b")
    unbound = await rig.post(report_for("node-a"), token="unbound-token")
    again = await rig.post(report_for("node-a", seq=2, now=LATER), token="agent-token-a")

    assert [r.status for r in (ok, mismatch, unbound, again)] == [200, 403, 401, 200]
    assert api_server.tokens_reviewed() == ["agent-token-a", "agent-token-b", "unbound-token"]
    assert rig.cluster.freshness.measured_at["node-a"] == LATER  # the second report was taken


async def test_ingest_answers_503_while_the_api_server_is_down(
    make_rig: MakeRig, make_auth: MakeAuth
) -> None:
    rig = await make_rig(
        settings_with(auth="tokenreview", static_tokens={}), make_auth(url=dead_url())
    )
    before = rig.snapshot()

    resp = await rig.post(report_for("node-a"), token="agent-token-a")

    assert resp.status == 503
    assert "unreachable" in (await resp.json())["error"]
    assert rig.snapshot() == before
    assert rig.outcomes() == {"auth_unavailable": 1}


# ------------------------------------------------------------ static and none


async def test_static_tokens_map_to_their_nodes() -> None:
    auth = StaticTokens({"t-a": "node-a", "t-b": "node-b"})
    assert (await auth.authenticate("t-a")) == Caller(node="node-a", name="static:node-a")
    assert (await auth.authenticate("t-b")).node == "node-b"  # type: ignore[union-attr]
    for wrong in (None, "", "t-", "t-a ", "T-A", "t-c"):
        assert await auth.authenticate(wrong) is None


async def test_static_tokens_keep_no_raw_token() -> None:
    auth = StaticTokens({"t-a": "node-a"})
    assert list(auth._callers) == [token_digest("t-a")]


async def test_no_auth_accepts_anyone_for_any_node() -> None:
    auth = NoAuth()
    for token in (None, "", "anything"):
        caller = await auth.authenticate(token)
        assert caller.node is None


# ------------------------------------------------------------------- factory


async def test_factory_builds_what_the_settings_name(
    api_server: FakeApiServer, aiohttp_server: Any, clients: list[Any], clock: FakeClock
) -> None:
    server = await aiohttp_server(api_server.app())
    made: list[k8s.ApiClient] = []

    def factory() -> k8s.ApiClient:
        made.append(api_client(str(server.make_url("")).rstrip("/")))
        clients.append(made[-1])
        return made[-1]

    assert isinstance(build_authenticator(settings_with(auth="none"), factory), NoAuth)
    static = build_authenticator(settings_with(auth="static"), factory)
    assert isinstance(static, StaticTokens)
    assert (await static.authenticate("token-of-node-b")).node == "node-b"  # type: ignore[union-attr]
    assert made == []

    review = build_authenticator(settings_with(auth="tokenreview"), factory, clock=clock)
    assert isinstance(review, TokenReviewAuth)
    assert len(made) == 1
    assert (await review.authenticate("agent-token-a")).node == "node-a"  # type: ignore[union-attr]
    assert api_server.requests[0]["spec"]["audiences"] == [AUDIENCE]


def test_factory_refuses_static_auth_without_tokens() -> None:
    def factory() -> k8s.ApiClient:
        raise AssertionError("not needed")

    with pytest.raises(ConfigError, match="static_tokens"):
        build_authenticator(settings_with(auth="static", static_tokens={}), factory)
