"""Approval of preemption plans through a webhook (``evictions.approval_webhook``, off by
default), besides the approval ConfigMap (:mod:`coordinator.kube.approvals`).

When a plan starts to await approval the leader POSTs it once, as JSON, to the configured
URL (a chat bot, say): the plan id, trigger, queue, pending pod, node, victims, reason,
expiry and the URL to call back. The header :data:`SIGNATURE` carries
``sha256=<hex HMAC-SHA256 of the body>`` under the shared secret read from
``evictions.approval_webhook_secret_file`` (a mounted Secret; never logged). One try per
plan, within :data:`POST_TIMEOUT_S`, under a token bucket: a dead endpoint costs one
timeout per plan and never a retry storm; failures are logged and counted
(``stowage_approval_webhook{outcome}``).

The endpoint approves or denies by ``POST /approvals/<plan-id>`` with the body
``{"plan": "<id>", "decision": "approve" | "deny", "timestamp": <Unix seconds>}``, signed
the same way. Refused with a 4xx, changing nothing: a body over :data:`MAX_BODY_B` (413),
no or a wrong signature (401, compared in constant time), a body that is not that JSON or
names another plan than its URL (400), a timestamp more than :data:`WINDOW_S` from now
(401), a signature already used (409: a replay), a replica that is not the leader (409),
a plan that is not awaiting approval (404).

Only the leader accepts a callback: proposals and their approvals live in its executor's
memory, since the coordinator must never be able to write an approval ConfigMap (the
party that acts must not approve). A follower answers 409 ``not the leader`` and the
endpoint retries through the Service; a new leader posts its own plans afresh. A plan id
binds the pending pod and the digest of the node and victims' UIDs, so approving it
approves exactly that set: a changed set is another plan, another id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
from aiohttp import web

from common import annotations as ann
from common.clock import Clock
from common.errors import ConfigError
from coordinator.config import EvictionSettings
from coordinator.metrics import CoordinatorMetrics
from coordinator.ratelimit import TokenBucket

log = logging.getLogger(__name__)

SIGNATURE: Final = "X-Stowage-Signature"
"""Header carrying ``sha256=<hex>``: HMAC-SHA256 of the raw body under the shared secret."""
MAX_BODY_B: Final = 4096
"""A callback is three short fields; anything much larger is not one."""
WINDOW_S: Final = 300.0
"""A callback's timestamp may be this far from the coordinator's wall clock (either way);
within it each signature is accepted once."""
POST_TIMEOUT_S: Final = 5.0
POSTS_PER_S: Final = 0.2
POST_BURST: Final = 5
MAX_REMEMBERED: Final = 10_000
"""Most signatures remembered against replays (each for :data:`WINDOW_S`); past it the
oldest go first. Only the secret's holder can make signatures that get this far."""
DECISIONS: Final = ("approve", "deny")


def sign(secret: bytes, body: bytes) -> str:
    """The :data:`SIGNATURE` header's value for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def read_secret(path: str) -> bytes:
    """The shared secret from its file, surrounding whitespace dropped; ConfigError saying
    which file is wrong (never what is in it)."""
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as e:
        raise ConfigError(
            f"evictions.approval_webhook_secret_file: cannot read {path}: {e.strerror}"
        ) from None
    if len(secret) < 16:
        raise ConfigError(
            f"evictions.approval_webhook_secret_file: {path} holds under 16 bytes of secret"
        )
    return secret


@dataclass(frozen=True, slots=True)
class Awaiting:
    """A plan published for approval, as the executor proposed it."""

    pod: str
    digest: str
    expires_at: float
    """Unix seconds."""


class Refused(Exception):
    """A callback that changes nothing: ``status`` (4xx) and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class ApprovalHook:
    """The leader's side of the webhook: posts proposals, keeps the decisions callbacks
    gave until its executor reads them."""

    def __init__(
        self,
        settings: EvictionSettings,
        secret: bytes,
        metrics: CoordinatorMetrics,
        clock: Clock,
        leading: Callable[[], bool],
    ) -> None:
        self._url = settings.approval_webhook
        self._callback = settings.approval_callback_url.rstrip("/")
        self._secret = secret
        self._metrics = metrics
        self._clock = clock
        self._leading = leading
        self._bucket = TokenBucket(POSTS_PER_S, POST_BURST)
        self._awaiting: dict[str, Awaiting] = {}
        self._decided: dict[str, str] = {}
        """Plan id → ``approve`` or ``deny``, as a valid callback said."""
        self._seen: dict[str, float] = {}
        """Signatures accepted → when they leave the replay window (Unix seconds)."""

    # ------------------------------------------------------- the executor's side

    async def propose(self, pid: str, awaiting: Awaiting, payload: dict[str, Any]) -> None:
        """Post plan ``pid``, which just started to await approval (the executor proposes
        each plan once)."""
        self._awaiting[pid] = awaiting
        self._bucket.refill(self._clock.monotonic())
        if not self._bucket.take():
            log.warning("approval webhook: plan %s not posted: over %g posts/s", pid, POSTS_PER_S)
            self._metrics.approval_webhook.labels("rate-limited").inc()
            return
        body = json.dumps({**payload, "callback": f"{self._callback}/{pid}"}).encode()
        headers = {SIGNATURE: sign(self._secret, body), "Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=POST_TIMEOUT_S)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(self._url, data=body, headers=headers) as response,
            ):
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("approval webhook: plan %s not posted: %s", pid, type(e).__name__)
            self._metrics.approval_webhook.labels("failed").inc()
            return
        if status >= 300:
            log.warning("approval webhook: plan %s: the endpoint answered %d", pid, status)
            self._metrics.approval_webhook.labels("failed").inc()
            return
        self._metrics.approval_webhook.labels("sent").inc()

    def decision(self, pid: str) -> str | None:
        """``approve`` or ``deny`` if a valid callback gave one for plan ``pid``."""
        return self._decided.get(pid)

    def forget(self, pid: str) -> None:
        """Plan ``pid`` no longer awaits approval (carried out, expired, denied, replaced)."""
        self._awaiting.pop(pid, None)
        self._decided.pop(pid, None)

    # --------------------------------------------------------- the callback

    def callback(self, pid: str, body: bytes, signature: str | None) -> str:
        """Check a callback for plan ``pid`` and record its decision; the decision, or
        :class:`Refused`."""
        if signature is None:
            raise Refused(401, f"no {SIGNATURE} header")
        if not hmac.compare_digest(signature.encode(), sign(self._secret, body).encode()):
            raise Refused(401, f"{SIGNATURE} does not match the body")
        try:
            data = json.loads(body)
        except ValueError:
            raise Refused(400, "the body is not JSON") from None
        if not isinstance(data, dict) or set(data) != {"plan", "decision", "timestamp"}:
            raise Refused(400, "expected exactly the keys plan, decision, timestamp")
        if data["plan"] != pid:
            raise Refused(400, f"the body names plan {data['plan']!r}, the URL {pid}")
        if data["decision"] not in DECISIONS:
            raise Refused(400, "decision must be approve or deny")
        stamp = data["timestamp"]
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise Refused(400, "timestamp must be Unix seconds")
        now = self._clock.wall()
        if not abs(now - stamp) <= WINDOW_S:
            raise Refused(401, f"timestamp is more than {WINDOW_S:g}s from now")
        self._seen = {s: until for s, until in self._seen.items() if until > now}
        if signature in self._seen:
            raise Refused(409, "this callback was used already (a replay)")
        if not self._leading():
            raise Refused(409, "this replica is not the leader: retry through the Service")
        awaiting = self._awaiting.get(pid)
        if awaiting is None or awaiting.expires_at <= now:
            raise Refused(404, f"plan {pid} is not awaiting approval")
        if len(self._seen) >= MAX_REMEMBERED:
            del self._seen[min(self._seen, key=self._seen.__getitem__)]
        self._seen[signature] = stamp + WINDOW_S
        decision = str(data["decision"])
        self._decided[pid] = decision
        self._metrics.approval_webhook.labels(decision + "d").inc()
        log.info("approval webhook: plan %s %sd until %s", pid, decision,
                 ann.timestamp(awaiting.expires_at))  # fmt: skip
        return decision

    async def handle(self, request: web.Request) -> web.Response:
        pid = request.match_info["plan"]
        body = await request.content.read(MAX_BODY_B + 1)
        if len(body) > MAX_BODY_B:
            return _refused(Refused(413, f"a callback body is at most {MAX_BODY_B} bytes"))
        try:
            decision = self.callback(pid, body, request.headers.get(SIGNATURE))
        except Refused as e:
            self._metrics.approval_webhook.labels("refused").inc()
            return _refused(e)
        return web.json_response({"plan": pid, "decision": decision})


def _refused(e: Refused) -> web.Response:
    return web.json_response({"error": str(e)}, status=e.status)


HOOK: Final = web.AppKey("approval_hook", ApprovalHook)


def add_routes(app: web.Application, hook: ApprovalHook) -> None:
    app[HOOK] = hook
    app.router.add_post("/approvals/{plan}", hook.handle)
