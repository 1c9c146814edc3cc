"""POST /v1/reports over HTTP: what an accepted report changes and what every refusal
does not (and which refusal wins when several apply)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from msgspec import structs

from agent.reportdelta import REFRESH_ONLY, UNCHANGED
from common import codec
from common.schema import (
    SCHEMA_VERSION,
    GpuSection,
    MemfragSection,
    NumaSection,
    UsageSection,
    is_absent,
)
from coordinator.auth import AuthUnavailableError, NoAuth
from coordinator.state.reports import signals_of
from tests.coordinator.ingest.conftest import (
    MAX_BODY_B,
    IngestRig,
    MakeRig,
    pack,
    plain,
    report_for,
    settings_with,
)


async def error_of(resp: Any, status: int) -> str:
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert set(body) == {"error"}
    message: str = body["error"]
    return message


async def accepted(rig: IngestRig, **kw: Any) -> None:
    """Give node-a a first report, so refusals are checked against non-empty state."""
    resp = await rig.post(report_for("node-a", seq=1), **kw)
    assert resp.status == 200


# ---------------------------------------------------------------- accepted reports


async def test_accepted_report_sets_the_nodes_signals_and_answers_directives(
    rig: IngestRig,
) -> None:
    report = report_for("node-a", seq=7, variant=3)
    i = rig.cluster.state.index["node-a"]  # type: ignore[union-attr]
    version = int(rig.cluster.state.version[i])  # type: ignore[union-attr]

    resp = await rig.post(report)

    assert resp.status == 200
    assert resp.content_type == "application/msgpack"
    directives = codec.decode_directives(await resp.read())
    assert directives.schema_version == SCHEMA_VERSION
    assert directives.node == "node-a"
    assert directives.issued_at == rig.clock.wall()
    assert directives.ttl_s == rig.services.settings.ingest.directive_ttl_s
    assert directives.be_cpu_quota_m is None

    assert rig.cluster.freshness.measured_at["node-a"] == report.measured_at
    assert rig.cluster.signals["node-a"] == signals_of(report)
    assert set(rig.cluster.signals) == {"node-a"}
    state = rig.cluster.state
    assert state is not None
    assert isinstance(report.usage, UsageSection) and not is_absent(report.usage.cpu)
    assert isinstance(report.memfrag, MemfragSection)
    assert isinstance(report.numa, NumaSection)
    assert isinstance(report.gpus, GpuSection)
    assert rig.cluster.freshness.received_at == {"node-a": rig.clock.monotonic()}
    assert state.cpu_used_pct[i] == report.usage.cpu.used_pct  # type: ignore[union-attr]
    assert state.contiguous_2mib_b[i] == sum(n.free_b_ge_2mib for n in report.memfrag.nodes)
    assert state.largest_numa_cpu_m[i] == max(n.cpu_count for n in report.numa.nodes) * 1000
    assert state.gpu_links[i] == tuple(tuple(row) for row in report.gpus.nvlinks)
    assert state.topology_policy[i] == "single-numa-node"
    assert state.version[i] == version + 1
    other = state.index["node-b"]
    assert math.isnan(state.cpu_used_pct[other])
    assert rig.outcomes() == {"accepted": 1}
    assert rig.timed_requests() == 1


async def test_a_report_between_whole_ones_is_taken_like_any_other(rig: IngestRig) -> None:
    """Between whole reports agents say ``"pods": "unchanged"`` and leave out memfrag
    detail (agent.reportdelta): the contiguity summary still counts."""
    await accepted(rig)
    rig.clock.advance(10)
    whole = report_for("node-a", seq=2, variant=5, now=rig.clock.wall())
    assert isinstance(whole.memfrag, MemfragSection)
    slim = structs.replace(
        whole.memfrag, zones=REFRESH_ONLY, hugepages=REFRESH_ONLY, compaction=REFRESH_ONLY
    )
    report = structs.replace(whole, pods=UNCHANGED, memfrag=slim)
    resp = await rig.post(report)
    assert resp.status == 200, await resp.text()
    assert rig.cluster.signals["node-a"] == signals_of(report) == signals_of(whole)
    assert rig.outcomes() == {"accepted": 2}


async def test_a_newer_report_replaces_the_last(rig: IngestRig) -> None:
    await accepted(rig)
    rig.clock.advance(10)
    newer = report_for("node-a", seq=2, variant=5, now=rig.clock.wall())

    resp = await rig.post(newer)

    assert resp.status == 200
    assert rig.cluster.freshness.measured_at["node-a"] == newer.measured_at
    assert rig.cluster.signals["node-a"] == signals_of(newer)
    assert codec.decode_directives(await resp.read()).issued_at == rig.clock.wall()
    assert rig.outcomes() == {"accepted": 2}


async def test_chunked_report_within_the_limit_is_accepted(rig: IngestRig) -> None:
    body = codec.encode(report_for("node-b"))

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    resp = await rig.post(chunks(), token="token-of-node-b")

    assert resp.status == 200
    assert rig.cluster.freshness.measured_at["node-b"] == report_for("node-b").measured_at


async def test_without_auth_any_caller_may_report_for_any_known_node(make_rig: MakeRig) -> None:
    rig = await make_rig(settings_with(auth="none", static_tokens={}), NoAuth())

    for node in ("node-a", "gpu-1"):
        resp = await rig.post(report_for(node), token=None)
        assert resp.status == 200
    resp = await rig.post(report_for("ghost"), token=None)

    assert await error_of(resp, 409)
    assert set(rig.cluster.signals) == {"node-a", "gpu-1"}


async def test_body_exactly_at_the_limit_passes_the_size_check(make_rig: MakeRig) -> None:
    body = codec.encode(report_for("node-a"))
    rig = await make_rig(settings_with(max_body_b=len(body)))

    assert (await rig.post(body)).status == 200
    assert (await rig.post(body + b"\x00")).status == 413


# ---------------------------------------------------------------- refusals


async def test_wrong_content_type_is_415(rig: IngestRig) -> None:
    await accepted(rig)
    before = rig.snapshot()
    body = codec.encode(report_for("node-a", seq=2))

    for content_type in ("application/json", "application/x-msgpack", None):
        resp = await rig.post(body, content_type=content_type)
        assert "application/msgpack" in await error_of(resp, 415)

    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "unsupported_media": 3}


async def test_content_type_parameters_are_allowed(rig: IngestRig) -> None:
    resp = await rig.post(report_for("node-a"), content_type="application/msgpack; charset=binary")
    assert resp.status == 200


async def test_declared_oversized_body_is_413_before_auth(rig: IngestRig) -> None:
    await accepted(rig)
    before = rig.snapshot()
    body = b"\x00" * (MAX_BODY_B + 1)

    for token in ("token-of-node-a", None):
        resp = await rig.post(body, token=token)
        assert f"{MAX_BODY_B + 1} bytes" in await error_of(resp, 413)

    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "too_large": 2}


async def test_chunked_body_is_refused_once_it_outgrows_the_limit(rig: IngestRig) -> None:
    """The answer comes while the client is still sending: the server stopped reading at
    the limit instead of buffering the rest."""
    await accepted(rig)
    before = rig.snapshot()
    more = asyncio.Event()
    chunk = b"\x00" * 16 * 1024

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_B // len(chunk) + 1):
            yield chunk
        await more.wait()  # the rest never comes until the test has its answer

    async with asyncio.timeout(10):  # a server reading to the end would hang here
        resp = await rig.post(endless())
        message = await error_of(resp, 413)
    more.set()

    assert f"exceeds {MAX_BODY_B} bytes" in message
    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "too_large": 1}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-a-known-token"},
        {"Authorization": "Basic dG9rZW4tb2Ytbm9kZS1hOg=="},
        {"Authorization": "Bearer"},
        {"Authorization": "token-of-node-a"},
    ],
    ids=["missing", "unknown", "basic", "empty", "no-scheme"],
)
async def test_missing_or_invalid_token_is_401(rig: IngestRig, headers: dict[str, str]) -> None:
    await accepted(rig)
    before = rig.snapshot()

    resp = await rig.post(report_for("node-a", seq=2), token=None, headers=headers)

    assert await error_of(resp, 401) == "missing or invalid bearer token"
    assert resp.headers["WWW-Authenticate"] == "Bearer"
    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "unauthenticated": 1}


async def test_bearer_scheme_is_case_insensitive(rig: IngestRig) -> None:
    resp = await rig.post(
        report_for("node-a"), token=None, headers={"Authorization": "bearer token-of-node-a"}
    )
    assert resp.status == 200


async def test_unauthenticated_garbage_is_401_not_400(rig: IngestRig) -> None:
    resp = await rig.post(b"\xc1 not msgpack", token="wrong")
    await error_of(resp, 401)
    assert rig.outcomes() == {"unauthenticated": 1}


async def test_unreachable_token_check_is_503(make_rig: MakeRig) -> None:
    class Unavailable:
        async def authenticate(self, token: str | None) -> None:
            raise AuthUnavailableError("API server unreachable (MaxRetryError)")

    rig = await make_rig(authenticator=Unavailable())
    before = rig.snapshot()

    resp = await rig.post(report_for("node-a"))

    assert "API server unreachable" in await error_of(resp, 503)
    assert rig.snapshot() == before
    assert rig.outcomes() == {"auth_unavailable": 1}


def nan_cpu(data: dict[str, Any]) -> None:
    data["usage"]["cpu"]["used_pct"] = math.nan


def future_version(data: dict[str, Any]) -> None:
    data["schema_version"] = SCHEMA_VERSION + 1


def negative_gpu_memory(data: dict[str, Any]) -> None:
    data["gpus"]["devices"][3]["mem_used_b"] = -1


def unknown_field(data: dict[str, Any]) -> None:
    data["pods"]["pods"][2]["shoe_size"] = 43


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (nan_cpu, "usage.cpu.used_pct: expected `float` >= 0.0"),
        (future_version, "schema_version: unknown schema version 2; this build reads 1"),
        (negative_gpu_memory, "gpus.devices[3].mem_used_b: expected `int` >= 0"),
        (unknown_field, "pods.pods[2]: object contains unknown field `shoe_size`"),
    ],
    ids=["nan", "version", "range", "unknown-field"],
)
async def test_invalid_report_is_400_naming_the_field(
    rig: IngestRig, damage: Any, message: str
) -> None:
    await accepted(rig)
    before = rig.snapshot()
    data = plain(report_for("node-a", seq=2))
    damage(data)

    resp = await rig.post(pack(data))

    assert (await error_of(resp, 400)).startswith(message)
    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "invalid": 1}


@pytest.mark.parametrize(
    "body",
    [
        codec.encode(report_for("node-a", seq=2))[:5000],
        b"",
        b"\xc1",
        codec.encode(report_for("node-a", seq=2)) + b"\x00",
    ],
    ids=["truncated", "empty", "never-used-byte", "trailing-data"],
)
async def test_malformed_msgpack_is_400(rig: IngestRig, body: bytes) -> None:
    await accepted(rig)
    before = rig.snapshot()

    resp = await rig.post(body)

    assert "malformed msgpack" in await error_of(resp, 400)
    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "invalid": 1}


async def test_a_huge_unknown_key_is_quoted_shortly(rig: IngestRig) -> None:
    data = plain(report_for("node-a"))
    data["x" * 30_000] = 1

    message = await error_of(await rig.post(pack(data)), 400)

    assert message.startswith("<root>: object contains unknown field `xxx")
    assert len(message) <= 300


async def test_report_for_another_node_than_the_tokens_is_403(rig: IngestRig) -> None:
    await accepted(rig)
    before = rig.snapshot()

    resp = await rig.post(report_for("node-b"), token="token-of-node-a")

    assert "node-b" in await error_of(resp, 403)
    assert rig.snapshot() == before
    assert rig.outcomes() == {"accepted": 1, "node_mismatch": 1}


async def test_mismatch_wins_over_an_unknown_node(rig: IngestRig) -> None:
    resp = await rig.post(report_for("ghost"), token="token-of-node-a")
    await error_of(resp, 403)
    assert rig.outcomes() == {"node_mismatch": 1}


async def test_report_for_a_node_the_cluster_lacks_is_409(rig: IngestRig) -> None:
    await accepted(rig)
    before = rig.snapshot()

    resp = await rig.post(report_for("ghost"), token="token-of-ghost")

    assert "'ghost' is not known" in await error_of(resp, 409)
    assert rig.snapshot() == before
    assert "ghost" not in rig.cluster.freshness.measured_at
    assert rig.outcomes() == {"accepted": 1, "unknown_node": 1}


async def test_every_request_is_timed_and_counted_once(rig: IngestRig) -> None:
    await accepted(rig)
    await rig.post(b"x", content_type="text/plain")
    await rig.post(report_for("node-a"), token=None)
    await rig.post(b"\xc1")
    await rig.post(report_for("node-b"))

    assert rig.timed_requests() == 5
    assert rig.outcomes() == {
        "accepted": 1,
        "unsupported_media": 1,
        "unauthenticated": 1,
        "invalid": 1,
        "node_mismatch": 1,
    }


async def test_tokens_are_never_logged(rig: IngestRig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    await rig.post(report_for("node-b"), token="token-of-node-a")  # 403, logged
    await rig.post(report_for("node-a"), token="secret-guess-123")  # 401, logged
    await rig.post(b"\xc1", token="token-of-node-b")  # 400, logged

    assert "report refused" in caplog.text
    for token in ("token-of-node-a", "secret-guess-123", "token-of-node-b"):
        assert token not in caplog.text
