"""Agent reports in: ``POST /v1/reports`` (msgpack :class:`NodeReport`) → msgpack
:class:`Directives`.

Checks, in order; each refusal is a 4xx (or 503) with ``{"error": "..."}``, is counted
in ``stowage_reports{outcome=...}`` and changes no state:

====  ====================  =========================================================
415   unsupported_media     Content-Type is not ``application/msgpack``
413   too_large             Content-Length above ``ingest.max_body_b`` (checked before
                            anything else is read), or a chunked body growing past it
                            (checked while reading: at most the limit plus one chunk
                            is ever held)
401   unauthenticated       no bearer token, or one the authenticator refuses
503   auth_unavailable      the token cannot be checked now (API server unreachable)
400   invalid               not msgpack, or not a valid report; the message names the
                            field (``psi.system.cpu.some.avg10_pct: expected …``,
                            ``gpus.nvlinks[1]: …``); also a ``measured_at`` (the
                            report's or a section's) more than
                            ``ingest.max_clock_ahead_s`` ahead of our wall clock, or
                            a pod placed on a NUMA node the report's NUMA section
                            lacks (``pods.pods[3].numa_nodes: [7] …``)
403   node_mismatch         the token belongs to another node than the report's
409   unknown_node          the report's node is not (yet) among the cluster's Nodes
====  ====================  =========================================================

The body is read only after the caller is authenticated, so an anonymous caller costs a
header parse, not a megabyte of buffering and a decode.

An unknown node is 409, not 404: the URL exists and the report is fine, but it conflicts
with what the coordinator knows now — typically a node that joined moments ago and is
not in the Node watch yet, which the next report, once it is, gets past. A 404 would
also read like a wrong URL (a misrouted Ingress answers 404 too). The agent treats both
alike: the report is dropped and the next one goes out on schedule.

An accepted report replaces the node's signals, steps its colocation throttle
(:mod:`coordinator.colocation`) and is answered with directives that last
``ingest.directive_ttl_s``: the best-effort CPU quota, why, the BE pods it applies to and
the bounds of the agent's fast path — from the leader; a follower's answer is valid for
no time, so agents follow the leader (:func:`directives_for`). Its freshness is judged
by when its request arrived here, on the coordinator's monotonic clock
(:meth:`LiveCluster.apply_report`): the agent's ``measured_at`` is shown, never trusted,
so a wrong or stepped agent clock can neither keep a dead node fresh nor make a live one
look stale.

Tokens are never logged; refusals are logged at DEBUG (they are counted by reason, so a
flood shows in metrics, not logs).
"""

from __future__ import annotations

import logging
import time
from typing import Final

from aiohttp import hdrs, web

from common import codec
from common.errors import SchemaError
from common.schema import SCHEMA_VERSION, SECTIONS, Directives, NodeReport, is_absent
from coordinator import requestbody
from coordinator.auth import AuthUnavailableError
from coordinator.services import SERVICES, Services

log = logging.getLogger(__name__)

REPORTS_PATH: Final = "/v1/reports"
CONTENT_TYPE: Final = "application/msgpack"
OUTCOMES: Final = (
    "accepted",
    "unsupported_media",
    "too_large",
    "unauthenticated",
    "auth_unavailable",
    "invalid",
    "node_mismatch",
    "unknown_node",
)
"""Every ``outcome`` label of ``stowage_reports``: a fixed set, so cardinality stays low."""
_MAX_MESSAGE: Final = 300
"""A schema error can quote a 64 KiB map key; replies quote at most this much of it."""


class Refused(Exception):
    """A report turned away: the HTTP status, the metric outcome and what to tell the agent."""

    def __init__(self, status: int, outcome: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.outcome = outcome
        self.message = message


def add_routes(app: web.Application) -> None:
    app.router.add_post(REPORTS_PATH, handle_report)


async def handle_report(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    metrics = services.metrics
    started = time.perf_counter()  # not Histogram.time(): its context object costs more
    try:
        directives = await ingest(request, services, services.clock.monotonic())
    except Refused as r:
        metrics.reports.labels(r.outcome).inc()
        log.debug("report refused (%d %s): %s", r.status, r.outcome, r.message)
        headers = {hdrs.WWW_AUTHENTICATE: "Bearer"} if r.status == 401 else None
        return web.json_response({"error": r.message}, status=r.status, headers=headers)
    finally:
        metrics.report_seconds.observe(time.perf_counter() - started)
    metrics.reports_accepted.inc()
    return web.Response(body=codec.encode(directives), content_type=CONTENT_TYPE)


async def ingest(request: web.Request, services: Services, received_at: float) -> Directives:
    """Check, read, decode and apply one report whose request arrived at ``received_at``
    (monotonic); raise :class:`Refused` to turn it away."""
    settings = services.settings.ingest
    # The raw header first: aiohttp's parsed content_type costs a header parse per report.
    raw_type = request.headers.get(hdrs.CONTENT_TYPE)
    if raw_type != CONTENT_TYPE and request.content_type != CONTENT_TYPE:
        raise Refused(415, "unsupported_media", f"expected Content-Type {CONTENT_TYPE}")
    limit = settings.max_body_b
    declared = request.content_length
    if declared is not None and declared > limit:
        raise Refused(413, "too_large", f"body of {declared} bytes exceeds {limit}")
    try:
        caller = await services.authenticator.authenticate(bearer_token(request))
    except AuthUnavailableError as e:
        raise Refused(503, "auth_unavailable", f"cannot check the token now: {e}") from e
    if caller is None:
        raise Refused(401, "unauthenticated", "missing or invalid bearer token")
    body = await read_bounded(request, limit)
    try:
        report = codec.decode_report(body, max_bytes=limit)
    except SchemaError as e:
        raise Refused(400, "invalid", _shorten(str(e))) from e
    ahead = _ahead_of(report, services.clock.wall() + settings.max_clock_ahead_s)
    if ahead is not None:
        raise Refused(
            400,
            "invalid",
            f"{ahead}: more than {settings.max_clock_ahead_s:g}s ahead of the coordinator's"
            " clock (is the node's clock right?)",
        )
    misplaced = _misplaced_pod(report)
    if misplaced is not None:
        raise Refused(400, "invalid", misplaced)
    if caller.node is not None and caller.node != report.node:
        raise Refused(
            403, "node_mismatch", f"report for node {report.node!r} with a token of another node"
        )
    cluster = services.cluster
    if report.node not in cluster.specs:
        raise Refused(409, "unknown_node", f"node {report.node!r} is not known (yet)")
    cluster.apply_report(report, received_at)
    return directives_for(services, report.node)


def directives_for(services: Services, node: str) -> Directives:
    """The answer to a node's accepted report: the leader's colocation decision, valid
    for ``ingest.directive_ttl_s``. A follower answers valid for no time (``ttl_s`` 0): of
    the answers of all replicas an agent keeps the newest one still valid
    (:mod:`agent.fanout`), so it follows the leader and never a follower (see
    :mod:`coordinator.colocation.hub`)."""
    colocation = services.cluster.colocation
    issued_at = services.clock.wall()
    if colocation.elected and not services.leader.is_set():
        return Directives(
            schema_version=SCHEMA_VERSION,
            node=node,
            issued_at=issued_at,
            ttl_s=0.0,
            be_reason="not the leader: the leader's directives apply",
        )
    directive = colocation.be_directive(node)
    return Directives(
        schema_version=SCHEMA_VERSION,
        node=node,
        issued_at=issued_at,
        ttl_s=services.settings.ingest.directive_ttl_s,
        be_cpu_quota_m=directive.quota_m,
        be_reason=directive.reason[:4096],
        be_pods=directive.be_pods,
        local=directive.local,
    )


def _ahead_of(report: NodeReport, latest: float) -> str | None:
    """The first ``measured_at`` of the report (its own, then each present section's)
    later than ``latest``, as a field path; None if none is."""
    if report.measured_at > latest:
        return "measured_at"
    for name in SECTIONS:
        section = getattr(report, name)
        if not is_absent(section) and section.measured_at > latest:
            return f"{name}.measured_at"
    return None


def _misplaced_pod(report: NodeReport) -> str | None:
    """Why a pod of the report is placed on a NUMA node its NUMA section does not have, or
    None: the tenancy rule reads each pod's NUMA nodes against the node's, and a made-up
    one would hide a tenant from the NUMA node it really runs on."""
    pods, numa = report.pods, report.numa
    if is_absent(pods) or is_absent(numa):
        return None
    ids = {n.node for n in numa.nodes}
    for k, pod in enumerate(pods.pods):
        if pod.numa_nodes is not None and not ids.issuperset(pod.numa_nodes):
            unknown = sorted(set(pod.numa_nodes) - ids)[:8]
            return f"pods.pods[{k}].numa_nodes: {unknown} not among the NUMA section's nodes"
    return None


def bearer_token(request: web.Request) -> str | None:
    """The token of an ``Authorization: Bearer …`` header; None if there is none."""
    header = request.headers.get(hdrs.AUTHORIZATION)
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


async def read_bounded(request: web.Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it grows past ``limit`` bytes."""
    try:
        return await requestbody.read(request, limit)
    except requestbody.BodyTooLargeError as e:
        raise Refused(413, "too_large", str(e)) from e


def _shorten(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"
