"""Who may report: the authenticators behind ``ingest.auth``.

* :class:`NoAuth` (``none``) accepts every caller, bound to no node.
* :class:`StaticTokens` (``static``) maps configured tokens to node names.
* :class:`TokenReviewAuth` (``tokenreview``, the default) asks the API server about the
  agent's projected service-account token (``authentication.k8s.io/v1`` TokenReview, with
  the coordinator's audience) and binds the caller to the node in the token's
  ``authentication.kubernetes.io/node-name`` extra. Tokens without that extra — legacy
  Secret tokens, ``kubectl create token`` without a bound pod, clusters before 1.30 —
  are refused: a node may only report for itself, and nothing else says which node a
  caller runs on.

An authenticator answers a :class:`Caller` (an ``Identity``) or None (refused: 401). When it cannot
decide because the API server is unreachable or failing (connection refused, timeout,
TLS failure, 429, 5xx, an unreadable answer) it raises :class:`AuthUnavailableError`
(503): the agent retries with backoff, and nobody new is let in meanwhile. Other API
errors (403: the coordinator lacks ``create`` on ``tokenreviews``) refuse the caller
(401) and are logged; they are no verdict on the token, so they are not cached.

Raw tokens are never logged, and never kept: caches are keyed by the token's SHA-256.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

import urllib3.exceptions
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from common.clock import Clock, SystemClock
from common.errors import ConfigError, StowageError
from coordinator.config import CoordinatorSettings
from coordinator.services import Authenticator

log = logging.getLogger(__name__)

NODE_NAME_EXTRA: Final = "authentication.kubernetes.io/node-name"
"""TokenReview ``status.user.extra`` key naming the node a pod-bound token's pod runs on."""
REVIEW_TIMEOUT_S: Final = 5.0
"""How long one TokenReview may take before the caller gets a 503."""
PAUSE_S: Final = 1.0
"""After the API server failed to answer, how long uncached tokens get 503 without asking."""
MAX_CACHED: Final = 65_536
"""Tokens remembered as accepted (a few per node: agents' tokens rotate hourly)."""


class AuthUnavailableError(StowageError):
    """A token could not be checked now (the API server is unreachable or failing)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """An accepted caller: the node it may report for (None: any) and a name for logs."""

    node: str | None
    name: str = ""


ANONYMOUS: Final = Caller(node=None, name="anonymous")


def token_digest(token: str) -> bytes:
    """What caches key on instead of the token itself."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class NoAuth:
    """``auth: none`` — for a coordinator reachable only by its agents (tests, a laptop)."""

    async def authenticate(self, token: str | None) -> Caller:
        return ANONYMOUS


class StaticTokens:
    """``auth: static`` — a fixed token → node table.

    Tokens are held as SHA-256 digests and looked up by the digest of the presented token.
    That lookup is the constant-time comparison here: how long it takes depends only on
    the presented token's digest, which a caller cannot steer towards a valid token's
    digest byte by byte, so timing reveals nothing about valid tokens — unlike comparing
    the tokens themselves with ``==``.
    """

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._callers = {
            token_digest(token): Caller(node=node, name=f"static:{node}")
            for token, node in tokens.items()
        }

    async def authenticate(self, token: str | None) -> Caller | None:
        if not token:
            return None
        return self._callers.get(token_digest(token))


class TokenReviewAuth:
    """``auth: tokenreview`` — the API server vouches for the token and names its node.

    Answers — accepted or refused — are cached for ``ttl_s`` (monotonic), keyed by the
    token's digest, in two LRU maps: accepted tokens (up to ``max_cached``) and refused
    ones (an eighth of that, so a caller spraying bad tokens cannot evict the good ones).
    Errors are not cached. After the API server failed to answer, uncached tokens get 503
    without a review for ``pause_s``: an outage does not turn into a TokenReview per report
    of every node whose token left the cache.

    ``usernames``, when given, also restricts callers to those service accounts
    (``system:serviceaccount:NS:NAME``): any pod may mint a projected token for any
    audience, so without it a pod on node X could report for node X.
    """

    def __init__(
        self,
        api: k8s.AuthenticationV1Api,
        *,
        audience: str,
        ttl_s: float,
        clock: Clock | None = None,
        usernames: Collection[str] | None = None,
        max_cached: int = MAX_CACHED,
        timeout_s: float = REVIEW_TIMEOUT_S,
        pause_s: float = PAUSE_S,
    ) -> None:
        self._api = api
        self._audience = audience
        self._ttl_s = ttl_s
        self._clock: Clock = clock or SystemClock()
        self._usernames = frozenset(usernames) if usernames is not None else None
        self._timeout_s = timeout_s
        self._pause_s = pause_s
        self._down_until = -math.inf
        self._accepted: _Lru = _Lru(max_cached)
        self._refused: _Lru = _Lru(max(1, max_cached // 8))
        self._last_error: str | None = None
        self.reviews = 0
        """TokenReviews sent (cache misses), for tests and debugging."""

    async def authenticate(self, token: str | None) -> Caller | None:
        if not token:
            return None
        key = token_digest(token)
        now = self._clock.monotonic()
        for cache in (self._accepted, self._refused):
            found, caller = cache.get(key, now)
            if found:
                return caller
        if now < self._down_until:
            raise AuthUnavailableError("API server unreachable; not asking again yet")
        self.reviews += 1
        try:
            caller, verdict = await asyncio.to_thread(self._review, token)
        except AuthUnavailableError:
            self._down_until = self._clock.monotonic() + self._pause_s
            raise
        if verdict:
            cache = self._accepted if caller is not None else self._refused
            cache.put(key, caller, self._clock.monotonic() + self._ttl_s)
        return caller

    def _review(self, token: str) -> tuple[Caller | None, bool]:
        """One TokenReview, in a worker thread (the kubernetes client is synchronous): the
        caller, and whether that is the API server's verdict on the token (to cache)."""
        body = k8s.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=k8s.V1TokenReviewSpec(token=token, audiences=[self._audience]),
        )
        try:
            review = self._api.create_token_review(body, _request_timeout=self._timeout_s)
        except ApiException as e:
            if not e.status or e.status == 429 or e.status >= 500:  # 0: TLS or transport
                self._error(f"TokenReview failed: HTTP {e.status} {e.reason or ''}".strip())
                raise AuthUnavailableError(f"API server answered HTTP {e.status}") from e
            self._error(f"TokenReview refused: HTTP {e.status} {e.reason or ''}".strip())
            return None, False  # fail closed; the token is not to blame, so no verdict
        except (urllib3.exceptions.HTTPError, OSError) as e:
            self._error(f"API server unreachable: {type(e).__name__}")
            raise AuthUnavailableError(f"API server unreachable ({type(e).__name__})") from e
        except ValueError as e:  # an answer the client cannot read: no verdict either
            self._error(f"TokenReview answer unreadable: {type(e).__name__}")
            raise AuthUnavailableError("API server answered something unreadable") from e
        if self._last_error is not None:
            log.info("TokenReview works again")
            self._last_error = None
        return self._caller(review), True

    def _caller(self, review: Any) -> Caller | None:
        status = review.status
        if status is None or not status.authenticated:
            return None
        if self._audience not in (status.audiences or ()):
            return None
        user = status.user
        if user is None:
            return None
        if self._usernames is not None and user.username not in self._usernames:
            return None
        nodes = (user.extra or {}).get(NODE_NAME_EXTRA) or []
        if len(nodes) != 1 or not isinstance(nodes[0], str) or not nodes[0]:
            return None  # not pod-bound: it could report for any node
        return Caller(node=nodes[0], name=user.username or "")

    def _error(self, message: str) -> None:
        """Log an API failure once per kind, not once per report."""
        if message != self._last_error:
            log.warning("%s; refusing reports until it works", message)
            self._last_error = message


class _Lru:
    """A bounded map of token digest → (deadline, caller), least recently used first out."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[bytes, tuple[float, Caller | None]] = OrderedDict()

    def get(self, key: bytes, now: float) -> tuple[bool, Caller | None]:
        item = self._items.get(key)
        if item is None:
            return False, None
        if item[0] <= now:
            del self._items[key]
            return False, None
        self._items.move_to_end(key)
        return True, item[1]

    def put(self, key: bytes, caller: Caller | None, deadline: float) -> None:
        self._items[key] = (deadline, caller)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


def build_authenticator(
    settings: CoordinatorSettings,
    api_client_factory: Callable[[], k8s.ApiClient],
    *,
    clock: Clock | None = None,
) -> Authenticator:
    """The authenticator ``settings.ingest.auth`` names; the API client is made only for
    ``tokenreview``."""
    ingest = settings.ingest
    if ingest.auth == "none":
        return NoAuth()
    if ingest.auth == "static":
        if not ingest.static_tokens:
            raise ConfigError("ingest.static_tokens: empty, so auth: static would refuse everyone")
        return StaticTokens(ingest.static_tokens)
    return TokenReviewAuth(
        k8s.AuthenticationV1Api(api_client_factory()),
        audience=ingest.audience,
        ttl_s=ingest.token_cache_ttl_s,
        clock=clock,
    )
