"""The largest report the schema admits, fed to every verb that reads what a report brings:
each answers, with the answer its caller expects.

A node reporting 64 GPUs on a full NVLink mesh made one prioritize call for an 8-GPU pod
try every set of 8 of its free GPUs (~10⁹), on the event loop, and nothing else was
answered meanwhile. The calls are those ``python -m hack.bench.largest_report`` times
(:func:`hack.bench.largest_report.calls`); the same calls about an ordinary node's report
must answer the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestClient
from msgspec import inspect

from common import codec
from common.schema import Directives, NodeReport
from coordinator.app import make_app, make_debug_app
from coordinator.nodeview import NODE_VIEW
from coordinator.services import Services
from hack.bench import largest_report as scenario
from hack.loadgen.largest import MAX_GPUS, NVLINKS, largest_report
from tests.hosts import FakeClock

EXPECTED_VERBS = {
    "ingest",
    "filter",
    "prioritize",
    "prioritize half",
    "preempt",
    "volcano predicate",
    "volcano prioritize",
    "explain",
    "plan preemption",
    "plan pressure",
    "colocation",
    "nodes",
    "ui",
    "metrics",
    "healthz",
}
CPU_VICTIMS = 7
"""CPU pods the preemptor needs gone, on either node: it wants half the node's CPU, an
eighth is free less a CPU per GPU pod, and each CPU pod holds a sixteenth — 7 of them free
enough (6 do not: 400 of 384 CPUs short on the largest node, 86 of 84 on the other)."""


# ------------------------------------------------------- the report is the largest


def unfilled(value: Any, kind: inspect.Type, where: str) -> list[str]:
    """The lists and maps under ``value`` shorter than their schema maximum, and the
    sections or items left absent (checked on the first and last item of each list)."""
    if isinstance(kind, inspect.UnionType):
        for option in kind.types:
            if isinstance(option, inspect.StructType) and isinstance(value, option.cls):
                return unfilled(value, option, where)
            if isinstance(option, inspect.ListType) and isinstance(value, list):
                return unfilled(value, option, where)
            if isinstance(option, inspect.DictType) and isinstance(value, dict):
                return unfilled(value, option, where)
        if isinstance(value, str) and any(
            isinstance(o, inspect.StructType | inspect.ListType | inspect.DictType)
            for o in kind.types
        ):
            return [f"{where}: absent"]
        return []
    if isinstance(kind, inspect.StructType):
        out = []
        for field in kind.fields:
            out += unfilled(getattr(value, field.name), field.type, f"{where}.{field.name}")
        return out
    if isinstance(kind, inspect.ListType | inspect.DictType):
        out = []
        if kind.max_length is not None and len(value) != kind.max_length:
            out.append(f"{where}: {len(value)} of {kind.max_length}")
        items = list(value.values()) if isinstance(value, dict) else value
        inner = kind.value_type if isinstance(kind, inspect.DictType) else kind.item_type
        for item in items[:1] + items[-1:]:
            out += unfilled(item, inner, f"{where}[]")
        return out
    return []


def test_every_list_and_map_of_the_report_is_at_its_schema_maximum() -> None:
    report = largest_report("n", 1_790_000_000.0)
    assert unfilled(report, inspect.type_info(NodeReport), "report") == []
    assert codec.decode_report(codec.encode(report), max_bytes=scenario.MAX_BODY_B) == report
    assert len(report.gpus.devices) == MAX_GPUS == 64  # type: ignore[union-attr]
    links = report.gpus.nvlinks  # type: ignore[union-attr]
    assert all(links[a][b] == NVLINKS for a in range(64) for b in range(64) if a != b)


# ----------------------------------------------------------------- every verb


@dataclass(frozen=True, slots=True)
class Clients:
    """A coordinator's main listener and its debug listener (``/debug/*``, ``/ui``)."""

    main: TestClient
    debug: TestClient


async def serve(aiohttp_client: Any, services: Services) -> Clients:
    app = make_app(services)
    debug = make_debug_app(services, app[NODE_VIEW])
    return Clients(await aiohttp_client(app), await aiohttp_client(debug))


async def reply(clients: Clients, call: scenario.Call) -> Any:
    """What ``call`` was answered, parsed by its content type; any status but 200 fails."""
    client = clients.debug if call.debug else clients.main
    response = await client.request(
        call.method, call.path, data=call.data(), headers=call.headers()
    )
    body = await response.read()
    assert response.status == 200, (call.verb, body[:300])
    if response.content_type == "application/json":
        return json.loads(body)
    if response.content_type == "application/msgpack":
        return msgspec.msgpack.decode(body, type=Directives)
    return response.content_type, body.decode()


@pytest.mark.parametrize("kind", scenario.KINDS, ids=lambda k: k.name)
async def test_every_verb_answers_about_the_node(
    kind: scenario.Kind, aiohttp_client: Any, clock: FakeClock
) -> None:
    services = scenario.services_for(kind, clock)
    client = await serve(aiohttp_client, services)
    report = scenario.encoded_report(kind, clock)
    got = {call.verb: await reply(client, call) for call in scenario.calls(kind, report)}
    name = kind.name
    assert set(got) == EXPECTED_VERBS

    directives = got["ingest"]
    assert directives.node == name and directives.ttl_s > 0
    state = services.cluster.state
    assert state is not None
    links = state.gpu_links[state.index[name]]
    assert links is not None and len(links) == kind.gpus  # the report's links are in use

    assert got["filter"]["NodeNames"] == [name]
    assert not got["filter"]["FailedNodes"]
    for verb in ("prioritize", "prioritize half"):
        assert got[verb] == [{"Host": name, "Score": 10}], verb

    victims = got["preempt"]["NodeNameToMetaVictims"][name]["Pods"]
    assert len(victims) == CPU_VICTIMS
    assert all(v["UID"].startswith("uid-cpu-") for v in victims)

    assert got["volcano predicate"] == {"status": "", "code": 0}
    assert got["volcano prioritize"] == {"nodeScore": {name: 100}, "errorMessage": ""}

    explained = got["explain"]
    assert explained["node"] == name and explained["filter"] == "passes"
    assert explained["components"]["nvlink_points"] == 5  # its GPUs all linked to each other

    plan = got["plan preemption"]["plan"]
    assert plan["node"] == name and len(plan["victims"]) == CPU_VICTIMS
    assert got["plan pressure"]["refusal"] == f"node {name}: no best-effort pod may be evicted"
    assert got["colocation"]["node"] == name

    (tile,) = got["nodes"]["nodes"]
    assert (tile["name"], tile["gpus"], tile["stale"]) == (name, kind.gpus, False)
    assert got["ui"][0] == "text/html"
    assert "stowage_reports_total" in got["metrics"][1]
    assert got["healthz"] == ("text/plain", "ok\n")


async def test_a_pod_asking_for_every_free_gpu_but_one_is_answered(
    aiohttp_client: Any, clock: FakeClock
) -> None:
    """Each count of GPUs is its own search: 47 of 48 free is C(48, 47) sets (exact), 40
    of them C(48, 8) ≈ 3.8·10⁸ (bounded)."""
    kind = scenario.LARGEST
    services = scenario.services_for(kind, clock)
    client = await serve(aiohttp_client, services)
    ingest, *_ = scenario.calls(kind, scenario.encoded_report(kind, clock))
    await reply(client, ingest)
    for gpus in (2, 3, 16, 40, 47, 48):
        pod = scenario.pod_json("asks", gpus=gpus, uid=False)
        body = json.dumps({"Pod": pod, "NodeNames": [kind.name]}).encode()
        call = scenario.Call("prioritize", "POST", "/scheduler/prioritize", body)
        assert await reply(client, call) == [{"Host": kind.name, "Score": 10}], gpus
