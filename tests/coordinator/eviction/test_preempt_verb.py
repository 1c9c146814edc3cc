"""``/scheduler/preempt`` answers from the planner, and the filter and preempt answers
decode in kube-scheduler's own extender types, as its 1.20 client and current clients
read them (golden tests from the request and reply examples of the scheduler interop
reference).

Go's ``encoding/json`` is reproduced for the shapes involved: object keys matched to
struct fields case-insensitively, unknown keys ignored, ``null`` leaves a pointer, map
or slice nil, and a value of the wrong JSON type is an error
(``json: cannot unmarshal …``), which fails the scheduling cycle.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from coordinator.decisionlog import DecisionLog
from coordinator.extender import kube
from coordinator.extender import refusals as refusals_module
from coordinator.live import cooldowns
from coordinator.services import SERVICES, Services
from tests.coordinator.eviction.evictrig import H100, EvictRig, node, pod

HIGH = 10_000
MEDIUM = 1_000

# ----------------------------------------------------------- Go's extender types

STR, INT = "string", "int64"
MAP_STR = ("map", STR)
META_POD = {"UID": STR}
META_VICTIMS = {"Pods": ("slice", ("ptr", META_POD)), "NumPDBViolations": INT}
PREEMPTION_RESULT = {"NodeNameToMetaVictims": ("map", ("ptr", META_VICTIMS))}
"""``ExtenderPreemptionResult`` (the same in 1.20 and now)."""
FILTER_RESULT_1_20 = {
    "Nodes": ("ptr", {"items": ("slice", "any")}),
    "NodeNames": ("ptr", ("slice", STR)),
    "FailedNodes": MAP_STR,
    "Error": STR,
}
"""``ExtenderFilterResult`` of kube-scheduler 1.20: no ``FailedAndUnresolvableNodes``."""
FILTER_RESULT_NOW = {**FILTER_RESULT_1_20, "FailedAndUnresolvableNodes": MAP_STR}


class GoDecodeError(Exception):
    pass


def go_decode(value: Any, kind: Any) -> Any:
    """``json.Unmarshal`` of ``value`` into a Go value of ``kind``."""
    if kind == "any":
        return value
    if isinstance(kind, tuple) and kind[0] == "ptr":
        return None if value is None else go_decode(value, kind[1])
    if value is None:  # null into a non-pointer: left as its zero value (nil map/slice)
        return None
    if kind == STR:
        if not isinstance(value, str):
            raise GoDecodeError(f"cannot unmarshal {type(value).__name__} into string")
        return value
    if kind == INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise GoDecodeError(f"cannot unmarshal {type(value).__name__} into int64")
        return value
    if isinstance(kind, tuple) and kind[0] == "slice":
        if not isinstance(value, list):
            raise GoDecodeError("cannot unmarshal into a slice")
        return [go_decode(v, kind[1]) for v in value]
    if isinstance(kind, tuple) and kind[0] == "map":
        if not isinstance(value, dict):
            raise GoDecodeError("cannot unmarshal into a map")
        return {k: go_decode(v, kind[1]) for k, v in value.items()}
    assert isinstance(kind, dict)
    if not isinstance(value, dict):
        raise GoDecodeError("cannot unmarshal into a struct")
    out: dict[str, Any] = dict.fromkeys(kind)
    for key, v in value.items():
        field = next((f for f in kind if f.lower() == key.lower()), None)
        if field is not None:  # unknown keys are ignored
            out[field] = go_decode(v, kind[field])
    return out


def victims_1_20(result: dict[str, Any]) -> dict[str, list[str]]:
    """kube-scheduler 1.20's ``convertToNodeNameToVictims``: it ranges over every entry's
    ``Pods`` (a nil entry is a nil pointer dereference: the scheduler panics)."""
    out = {}
    for name, meta in (result["NodeNameToMetaVictims"] or {}).items():
        if meta is None:
            raise GoDecodeError(f"nil pointer dereference on {name}")
        out[name] = [p["UID"] for p in meta["Pods"] or []]
    return out


def victims_now(result: dict[str, Any]) -> dict[str, list[str]]:
    """Current releases: a node returned without victims is an error."""
    out = {}
    for name, meta in (result["NodeNameToMetaVictims"] or {}).items():
        if meta is None or not meta["Pods"]:
            raise GoDecodeError(f"expected at least one victim pod on node {name}")
        out[name] = [p["UID"] for p in meta["Pods"]]
    return out


def refused_1_20(result: dict[str, Any]) -> dict[str, str]:
    return dict(result["FailedNodes"] or {})


def refused_now(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each refused node's status: the unresolvable map takes precedence."""
    out = {n: ("Unschedulable", why) for n, why in (result["FailedNodes"] or {}).items()}
    for name, why in (result["FailedAndUnresolvableNodes"] or {}).items():
        out[name] = ("UnschedulableAndUnresolvable", why)
    return out


# ---------------------------------------------------------------------- the rig


async def serve(aiohttp_client: Any, rig: EvictRig, services: Services | None = None) -> TestClient:
    services = services or rig.services()
    app = web.Application()
    app[SERVICES] = services
    kube.add_routes(app)
    return await aiohttp_client(app)


async def post(client: TestClient, path: str, body: Any) -> Any:
    resp = await client.post(
        path,
        data=io.BytesIO(json.dumps(body).encode()),
        headers={"Content-Type": "application/json"},
    )
    assert resp.status == 200, await resp.text()
    return json.loads(await resp.text())


def uid(name: str) -> str:
    return f"uid-ns-{name}"


def cluster() -> EvictRig:
    """gpu-a: a low and a medium 4-GPU pod; gpu-b: an 8-GPU low pod; h100: an H100 node
    with a low 8-GPU pod; gpu-s: a node with 4 GPUs."""
    return (
        EvictRig()
        .nodes(node("gpu-a"), node("gpu-b"), node("h100", model=H100), node("gpu-s", gpus=4))
        .pods(
            pod("low-a", node="gpu-a", gpus=4),
            pod("medium-a", node="gpu-a", gpus=4, priority=MEDIUM),
            pod("c0ffee", node="gpu-b", gpus=8),
            pod("low-h", node="h100", gpus=8),
            pod("low-s", node="gpu-s", gpus=4),
        )
    )


PREEMPTOR = pod(
    "want", gpus=8, priority=HIGH, annotations={"stowage.io/gpu-models": "NVIDIA-A100-SXM4-80GB"}
)


# ------------------------------------------------------------------------ tests


async def test_preempt_narrows_to_allowed_victims_and_drops_nodes_stowage_refuses(
    aiohttp_client: Any,
) -> None:
    """The reference's preempt request, with the candidates kube-scheduler could send:
    on gpu-b the proposed victim is allowed and frees the node; on gpu-a only the low pod
    may go, which is not enough; h100 has the wrong GPU model and gpu-s too few GPUs
    (evicting there would be wasted); null entries are not echoed back."""
    client = await serve(aiohttp_client, cluster())
    body = {
        "Pod": PREEMPTOR,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "gpu-b": {"Pods": [{"UID": uid("c0ffee")}], "NumPDBViolations": 0},
            "gpu-a": {"Pods": [{"UID": uid("low-a")}, {"UID": uid("medium-a")}]},
            "h100": {"Pods": [{"UID": uid("low-h")}], "NumPDBViolations": 0},
            "gpu-s": {"Pods": [{"UID": uid("low-s")}], "NumPDBViolations": 0},
            "gone": None,
            "empty": {"Pods": None, "NumPDBViolations": 0},
        },
    }
    reply = await post(client, "/scheduler/preempt", body)
    assert reply == {
        "NodeNameToMetaVictims": {
            "gpu-b": {"Pods": [{"UID": uid("c0ffee")}], "NumPDBViolations": 0},
        }
    }
    decoded = go_decode(reply, PREEMPTION_RESULT)
    assert victims_1_20(decoded) == victims_now(decoded) == {"gpu-b": [uid("c0ffee")]}


async def test_preempt_answers_the_cheapest_allowed_subset_of_the_proposal(
    aiohttp_client: Any,
) -> None:
    rig = cluster()
    rig.pods(pod("extra-b", node="gpu-b", cpu="2"))  # proposed, but frees no GPU
    client = await serve(aiohttp_client, rig)
    body = {
        "Pod": PREEMPTOR,
        "NodeNameToMetaVictims": {
            "gpu-b": {"Pods": [{"UID": uid("extra-b")}, {"UID": uid("c0ffee")}]},
        },
    }
    reply = await post(client, "/scheduler/preempt", body)
    assert victims_now(go_decode(reply, PREEMPTION_RESULT)) == {"gpu-b": [uid("c0ffee")]}


async def test_preempt_with_full_victims_answers_the_meta_form(aiohttp_client: Any) -> None:
    client = await serve(aiohttp_client, cluster())
    victim = pod("c0ffee", node="gpu-b", gpus=8)
    body = {
        "Pod": PREEMPTOR,
        "NodeNameToVictims": {"gpu-b": {"Pods": [victim], "NumPDBViolations": 0}},
        "NodeNameToMetaVictims": None,
    }
    reply = await post(client, "/scheduler/preempt", body)
    assert victims_1_20(go_decode(reply, PREEMPTION_RESULT)) == {"gpu-b": [uid("c0ffee")]}


async def test_preempt_with_a_preemptor_too_low_to_displace_anyone_drops_every_node(
    aiohttp_client: Any,
) -> None:
    client = await serve(aiohttp_client, cluster())
    low = {**PREEMPTOR, "spec": {**PREEMPTOR["spec"], "priority": MEDIUM}}
    body = {"Pod": low, "NodeNameToMetaVictims": {"gpu-b": {"Pods": [{"UID": uid("c0ffee")}]}}}
    assert await post(client, "/scheduler/preempt", body) == {"NodeNameToMetaVictims": {}}


@pytest.mark.parametrize(
    ("client_kind", "refused"),
    [("1.20", refused_1_20), ("now", refused_now)],
)
async def test_filter_refusals_reach_every_client_version(
    aiohttp_client: Any, client_kind: str, refused: Any
) -> None:
    """The reference's filter example: unresolvable refusals (wrong GPU model, too few
    GPUs) are seen by a 1.20 client (``FailedNodes``) and by current ones as
    unresolvable (that map takes precedence)."""
    client = await serve(aiohttp_client, cluster())
    body = {"Pod": PREEMPTOR, "Nodes": None, "NodeNames": ["gpu-a", "h100", "gpu-s"]}
    reply = await post(client, "/scheduler/filter", body)
    kind = FILTER_RESULT_1_20 if client_kind == "1.20" else FILTER_RESULT_NOW
    seen = refused(go_decode(reply, kind))
    assert set(seen) == {"gpu-a", "h100", "gpu-s"}
    if client_kind == "now":
        assert seen["gpu-a"][0] == "Unschedulable"
        assert seen["h100"] == (
            "UnschedulableAndUnresolvable",
            f"GPU model {H100} is not one of NVIDIA-A100-SXM4-80GB",
        )
        assert seen["gpu-s"] == (
            "UnschedulableAndUnresolvable",
            "4 GPUs on the node < 8 requested",
        )
    else:
        assert seen["gpu-s"] == "4 GPUs on the node < 8 requested"


def test_the_reference_examples_decode_in_both_versions() -> None:
    """The reference's reply examples themselves decode (a check on the decoder)."""
    filter_example = {
        "NodeNames": ["node-a"],
        "FailedNodes": {"node-b": "memory fragmentation: no 2Mi-contiguous block for request"},
        "FailedAndUnresolvableNodes": {"node-c": "no NUMA zone can hold 8 GPUs"},
        "Error": "",
    }
    assert refused_1_20(go_decode(filter_example, FILTER_RESULT_1_20)) == {
        "node-b": "memory fragmentation: no 2Mi-contiguous block for request"
    }  # node-c vanishes for a 1.20 client: why the filter now lists it under both
    preempt_example = {
        "NodeNameToMetaVictims": {"node-a": {"Pods": [{"UID": "c0ffee"}], "NumPDBViolations": 0}}
    }
    decoded = go_decode(preempt_example, PREEMPTION_RESULT)
    assert victims_1_20(decoded) == victims_now(decoded) == {"node-a": ["c0ffee"]}
    with pytest.raises(GoDecodeError, match="nil pointer"):
        victims_1_20(go_decode({"NodeNameToMetaVictims": {"n": None}}, PREEMPTION_RESULT))


def with_port(obj: dict[str, Any], port: int) -> dict[str, Any]:
    """``obj`` with its container binding host port ``port``."""
    obj["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return obj


@pytest.mark.parametrize(
    ("holder", "answer"),
    [("port-medium", {}), ("port-low", {"gpu-c": [uid("port-low")]})],
)
async def test_where_only_kube_schedulers_filters_object_a_node_is_dropped_not_narrowed(
    aiohttp_client: Any, holder: str, answer: dict[str, list[str]]
) -> None:
    """gpu-c has room as Stowage counts; kube-scheduler wants evictions there for the
    host port the preemptor wants. When the port is held by the medium pod, which may
    not go, evicting the low one would free nothing the pod can use: the node is
    dropped, never narrowed to the low pod alone. When the low pod holds it, it goes."""
    rig = cluster().nodes(node("gpu-c"))
    pods = {
        "port-low": pod("port-low", node="gpu-c", cpu="1"),
        "port-medium": pod("port-medium", node="gpu-c", cpu="1", priority=MEDIUM),
    }
    with_port(pods[holder], 8080)
    rig.pods(*pods.values())
    client = await serve(aiohttp_client, rig)
    body = {
        "Pod": with_port(pod("want", cpu="1", priority=HIGH), 8080),
        "NodeNameToMetaVictims": {
            "gpu-c": {"Pods": [{"UID": uid("port-low")}, {"UID": uid("port-medium")}]},
        },
    }
    reply = await post(client, "/scheduler/preempt", body)
    assert victims_now(go_decode(reply, PREEMPTION_RESULT)) == answer


# ----------------------------------------------------------- shared cooldowns

GPU_B = {"gpu-b": {"Pods": [{"UID": uid("c0ffee")}], "NumPDBViolations": 0}}


def cooling(rig: EvictRig, queue: str, for_s: float) -> None:
    """The shared Lease, as the watch would deliver it: ``queue`` cooling for ``for_s``."""
    until = {queue: rig.clock.wall() + for_s}
    rig.cluster.cooldowns.upsert(
        {
            "metadata": {
                "name": cooldowns.LEASE,
                "annotations": {cooldowns.KEY: cooldowns.value(until, rig.clock.wall())},
            }
        }
    )


def refusals(rig: EvictRig) -> float:
    value = rig.cluster.metrics.registry.get_sample_value(
        "stowage_eviction_plans_total", {"trigger": "preempt-verb", "decision": "refused"}
    )
    return value or 0.0


async def test_a_victim_whose_queue_cools_down_is_not_passed(aiohttp_client: Any) -> None:
    """The leader's last round for queue ns evicted: kube-scheduler's preemption through
    the verb may not start another for that queue; the same proposal passes for another
    queue, and once the cooldown is over."""
    rig = cluster()
    services = rig.services()
    client = await serve(aiohttp_client, rig, services)
    cooling(rig, "ns", 60)
    body = {"Pod": PREEMPTOR, "NodeNameToMetaVictims": GPU_B}
    assert await post(client, "/scheduler/preempt", body) == {"NodeNameToMetaVictims": {}}
    assert refusals(rig) == 1
    (line,) = services.evictions.lines()
    assert "preempt-verb ns/want refused: queue ns is cooling down" in line

    other = {**PREEMPTOR, "metadata": {**PREEMPTOR["metadata"], "namespace": "other"}}
    passed = await post(client, "/scheduler/preempt", {**body, "Pod": other})
    assert victims_now(go_decode(passed, PREEMPTION_RESULT)) == {"gpu-b": [uid("c0ffee")]}

    rig.clock.advance(61)
    passed = await post(client, "/scheduler/preempt", body)
    assert victims_now(go_decode(passed, PREEMPTION_RESULT)) == {"gpu-b": [uid("c0ffee")]}


async def test_a_refusal_is_one_line_per_reason_per_cooldown(aiohttp_client: Any) -> None:
    """kube-scheduler asks at every attempt: each refusal counts, one line is logged until
    the reason changes or ``cooldown_s`` has passed."""
    rig = cluster()
    services = rig.services()
    client = await serve(aiohttp_client, rig, services)
    cooling(rig, "ns", 45)
    body = {"Pod": PREEMPTOR, "NodeNameToMetaVictims": GPU_B}
    for _ in range(5):
        await post(client, "/scheduler/preempt", body)
        rig.clock.advance(10)
    assert refusals(rig) == 5
    assert len(services.evictions.lines()) == 1
    low = {**PREEMPTOR, "spec": {**PREEMPTOR["spec"], "priority": 0}}
    await post(client, "/scheduler/preempt", {**body, "Pod": low})  # another reason
    cooling(rig, "ns", 3 * rig.evictions.cooldown_s)
    await post(client, "/scheduler/preempt", body)  # the first again
    rig.clock.advance(rig.evictions.cooldown_s - 1)
    await post(client, "/scheduler/preempt", body)
    rig.clock.advance(1)
    await post(client, "/scheduler/preempt", body)  # a cooldown later: told again
    lines = services.evictions.lines()
    assert refusals(rig) == 9
    assert ["cooling down" in line for line in lines] == [True, False, True, True]
    assert "ns/want is low" in lines[1]


async def test_a_cooldown_ends_when_its_entry_says(aiohttp_client: Any) -> None:
    """An entry whose time passed holds nothing back, even before the leader tidies it."""
    rig = cluster()
    client = await serve(aiohttp_client, rig)
    cooling(rig, "ns", 60)
    rig.clock.advance(60)
    body = {"Pod": PREEMPTOR, "NodeNameToMetaVictims": GPU_B}
    passed = await post(client, "/scheduler/preempt", body)
    assert victims_now(go_decode(passed, PREEMPTION_RESULT)) == {"gpu-b": [uid("c0ffee")]}


def test_the_refusals_remembered_are_bounded() -> None:
    """Made-up pods cannot grow the memory: the oldest is forgotten, and told again."""
    rig = cluster()
    services = rig.services()
    services.evictions = DecisionLog(2 * refusals_module.MAX_REMEMBERED)
    told = refusals_module.VerbRefusals()
    for k in range(refusals_module.MAX_REMEMBERED + 1):
        told.refused(services, f"ns/pod-{k}", "no")
    told.refused(services, f"ns/pod-{refusals_module.MAX_REMEMBERED}", "no")  # remembered
    assert len(services.evictions.lines()) == refusals_module.MAX_REMEMBERED + 1
    told.refused(services, "ns/pod-0", "no")  # forgotten: told again
    assert services.evictions.lines()[-1].endswith("ns/pod-0 refused: no")
