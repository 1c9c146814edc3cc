"""Parser limits on every scheduler endpoint, over HTTP: JSON nested deeper than
``gojson.MAX_JSON_DEPTH`` and quantities beyond int64 milli-units are 400s naming what was
wrong, never 500s, and change nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coordinator.extender import gojson, volcanowire
from tests.coordinator.extender.conftest import Rig
from tests.coordinator.extender.kubejson import NODES, POD_UID, node, pod

FILTER = "/scheduler/filter"
PRIORITIZE = "/scheduler/prioritize"
PREEMPT = "/scheduler/preempt"
PREDICATE = "/volcano/predicate"
VOLCANO_PRIORITIZE = "/volcano/prioritize"
ENDPOINTS = (FILTER, PRIORITIZE, PREEMPT, PREDICATE, VOLCANO_PRIORITIZE)
DEEP = 100_000
TOO_DEEP = f"body: nested deeper than {gojson.MAX_JSON_DEPTH} levels"


def body_for(path: str, the_pod: Any, **extra: Any) -> dict[str, Any]:
    """A request of ``path`` for ``the_pod`` and node-a (names only), plus ``extra``."""
    if path in (FILTER, PRIORITIZE):
        return {"Pod": the_pod, "NodeNames": ["node-a"], **extra}
    if path == PREEMPT:
        return {"Pod": the_pod, "NodeNameToMetaVictims": {"node-a": {"Pods": []}}, **extra}
    task = {"UID": POD_UID, "Name": "p", "Namespace": "ns", "Pod": the_pod}
    if path == PREDICATE:
        return {"task": task, "node": {"Name": "node-a"}, **extra}
    return {"task": task, "nodes": [{"Name": "node-a"}], **extra}


def nested_arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_objects(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# ------------------------------------------------------------------ nesting depth


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize(
    "body",
    [
        nested_arrays(DEEP),
        nested_objects(DEEP),
        b'{"Pod": ' + nested_arrays(DEEP) + b', "NodeNames": ["node-a"]}',
        b'{"Pod": {}, "NodeNames": ' + nested_arrays(DEEP) + b"}",
        b'{"task": ' + nested_objects(DEEP) + b', "node": {"Name": "node-a"}}',
        b'{"x": "' + b"\\" * 2 + b'", "y": ' + nested_arrays(DEEP) + b"}",  # \\ is one \
    ],
    ids=["arrays", "objects", "in-pod", "in-names", "in-task", "after-escaped-backslash"],
)
async def test_deep_nesting_is_400_on_every_endpoint_and_changes_nothing(
    rig: Rig, path: str, body: bytes
):
    await rig.assert_refused(path, body, TOO_DEEP)


@pytest.mark.parametrize("path", ENDPOINTS)
async def test_nesting_up_to_the_bound_is_read_and_one_more_is_refused(rig: Rig, path: str):
    """The top-level object is one level; an unknown member nests the rest."""
    inner = gojson.MAX_JSON_DEPTH - 1
    prefix = json.dumps(body_for(path, pod("1", "1Gi")))[:-1].encode()
    status, _ = await rig.post(path, prefix + b', "x": ' + nested_arrays(inner) + b"}")
    assert status == 200
    await rig.assert_refused(path, prefix + b', "x": ' + nested_arrays(inner + 1) + b"}", TOO_DEEP)


async def test_brackets_and_escapes_inside_strings_do_not_count(rig: Rig):
    """Brackets in annotation values are text; ``\\\\`` and ``\\"`` do not end a string."""
    text = "[" * 5000 + '\\"{{{' + "\\" + "{" * 500
    the_pod = pod("1", "1Gi", annotations={"a": text, "b": "\\", "c": '"[[["'})
    status, reply = await rig.post(FILTER, body_for(FILTER, the_pod))
    assert status == 200
    assert reply["NodeNames"] == ["node-a"]


@pytest.mark.parametrize(
    ("body", "deeper"),
    [
        (b"[]", False),
        (b"[" * 3 + b"]" * 3, False),
        (b"[" * 4 + b"]" * 4, True),
        (b'{"a": {"b": {"c": 1}}}', False),
        (b'{"a": {"b": {"c": {}}}}', True),
        (b'[[[{"x": 1}, {"y": 2}], [[]]]]', True),
        (b'[[["[[[[[[", "]]]]{{{{"]]]', False),
        (b'[[["\\"[[[["]]]', False),  # an escaped quote does not end the string
        (b'[[["\\\\", [[]]]]]', True),  # an escaped backslash does not escape the quote
        (b'[[["\\\\\\"[[[[", 1]]]', False),  # \\ then \"
        (b"[[]][[]][[]][[]]", False),  # many brackets, never deep
    ],
)
def test_depth_is_counted_outside_strings(body: bytes, deeper: bool):
    if deeper:
        with pytest.raises(gojson.WireError, match="nested deeper than 3 levels"):
            gojson.check_depth(body, limit=3)
    else:
        gojson.check_depth(body, limit=3)


def test_depth_is_carried_across_scan_chunks(monkeypatch: pytest.MonkeyPatch):
    """A string, and the depth, that span the boundary of two chunks."""
    monkeypatch.setattr(gojson, "_DEPTH_CHUNK", 4)
    gojson.check_depth(b'[["[[[[[[[[[[[[]]"]]', limit=2)
    with pytest.raises(gojson.WireError):
        gojson.check_depth(b'["x"[[', limit=2)
    with pytest.raises(gojson.WireError):
        gojson.check_depth(b'[["[[[[[[[[[[[[]]"[]]', limit=2)


# ------------------------------------------------------------------ quantities

OUT_OF_RANGE = ["1e100", "1Ei", "9999999999999999999999", "1e16", "9223372036854775.808"]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("amount", OUT_OF_RANGE)
@pytest.mark.parametrize("resource", ["cpu", "memory", "nvidia.com/gpu", "example.com/foo"])
async def test_pod_quantities_beyond_int64_milli_are_400(
    rig: Rig, path: str, amount: str, resource: str
):
    the_pod = pod("1", "1Gi")
    the_pod["spec"]["containers"][0]["resources"]["requests"][resource] = amount
    message = f"Pod: pod ns/p: invalid quantity {amount!r}: out of range"
    await rig.assert_refused(path, body_for(path, the_pod), message)


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize(
    ("amount", "message"),
    [
        ("-1", "Pod: pod ns/p: cpu: negative quantity '-1'"),
        ("NaN", "Pod: pod ns/p: invalid quantity 'NaN'"),
        ("1e1000000", "Pod: pod ns/p: invalid quantity '1e1000000': exponent out of range"),
        ("Infinity", "Pod: pod ns/p: invalid quantity 'Infinity'"),
    ],
)
async def test_negative_and_not_a_number_quantities_are_400(
    rig: Rig, path: str, amount: str, message: str
):
    await rig.assert_refused(path, body_for(path, pod(amount, "1Gi")), message)


@pytest.mark.parametrize("path", ENDPOINTS)
async def test_requests_that_add_up_beyond_int64_milli_are_400(rig: Rig, path: str):
    """Each container's request is in range; the pod's total is not."""
    the_pod = pod("9e15", "1Gi")
    second = {"name": "two", "resources": {"requests": {"cpu": "9e15"}}}
    the_pod["spec"]["containers"].append(second)
    message = "Pod: pod ns/p: cpu: total requests out of range (at most 9223372036854775807 milli"
    await rig.assert_refused(path, body_for(path, the_pod), message)


@pytest.mark.parametrize("path", [FILTER, PRIORITIZE, PREDICATE, VOLCANO_PRIORITIZE])
async def test_the_largest_request_fits_nowhere_and_is_not_assumed(rig: Rig, path: str):
    the_pod = pod("9223372036854775807m", "9223372036854775807m")
    body = body_for(path, the_pod)
    if path in (FILTER, PRIORITIZE):
        body["NodeNames"] = list(NODES)
    elif path == VOLCANO_PRIORITIZE:
        body["nodes"] = [{"Name": name} for name in NODES]
    before = rig.snapshot()
    status, reply = await rig.post(path, body)
    assert status == 200
    if path == FILTER:
        assert reply["NodeNames"] == []
        assert set(reply["FailedNodes"]) == set(NODES)
    elif path == PRIORITIZE:
        assert [host["Score"] for host in reply] == [0] * len(NODES)
    elif path == PREDICATE:
        assert reply["code"] == volcanowire.UNSCHEDULABLE
    else:
        assert set(reply["nodeScore"].values()) == {0}
    assert rig.snapshot() == before


@pytest.mark.parametrize(
    ("field", "value", "most"),
    [
        ("MilliCPU", 1e300, 2**63 - 1),
        ("MilliCPU", 2**63, 2**63 - 1),
        ("Memory", 1e19, (2**63 - 1) // 1000),
        ("Memory", (2**63 - 1) // 1000 + 1, (2**63 - 1) // 1000),
    ],
)
@pytest.mark.parametrize("path", [PREDICATE, VOLCANO_PRIORITIZE])
async def test_resreq_amounts_beyond_int64_milli_are_400_naming_the_field(
    rig: Rig, path: str, field: str, value: float, most: int
):
    body = body_for(path, None)
    body["task"]["Resreq"] = {"MilliCPU": 1000, "Memory": 2**30, field: value}
    message = f"task.Resreq.{field}: {value} is out of range (at most {most})"
    await rig.assert_refused(path, body, message)


@pytest.mark.parametrize("path", [PREDICATE, VOLCANO_PRIORITIZE])
async def test_resreq_scalar_beyond_int64_milli_is_400_naming_the_resource(rig: Rig, path: str):
    body = body_for(path, None)
    scalars = {"nvidia.com/gpu": 1e300}
    body["task"]["Resreq"] = {"MilliCPU": 1000, "Memory": 2**30, "ScalarResources": scalars}
    message = "task.Resreq.ScalarResources['nvidia.com/gpu']: 1e+300 is out of range"
    await rig.assert_refused(path, body, message)


@pytest.mark.parametrize("path", [PREDICATE, VOLCANO_PRIORITIZE])
async def test_the_largest_resreq_is_read_and_fits_nowhere(rig: Rig, path: str):
    body = body_for(path, None)
    body["task"]["Resreq"] = {"MilliCPU": 2**63 - 1, "Memory": (2**63 - 1) // 1000}
    status, reply = await rig.post(path, body)
    assert status == 200
    if path == PREDICATE:
        assert reply["code"] == volcanowire.UNSCHEDULABLE
    else:
        assert reply == {"nodeScore": {"node-a": 0}, "errorMessage": ""}


@pytest.mark.parametrize("amount", ["1e100", "1Ei", "NaN"])
async def test_nodes_with_allocatable_beyond_range_are_400(rig: Rig, amount: str):
    big = node("new-1", "8", amount)
    body = {"Pod": pod("1", "1Gi"), "Nodes": {"items": [big]}}
    await rig.assert_refused(FILTER, body, "Nodes.items[0]: node new-1: status.allocatable")


@pytest.mark.parametrize("path", [FILTER, PRIORITIZE])
async def test_node_names_nested_past_the_bound_are_refused_as_too_deep(rig: Rig, path: str):
    """Not deep enough to stop the body's split, yet one level past the bound: the names
    member, which is not all strings, is depth-checked before it is decoded."""
    inner = gojson.MAX_JSON_DEPTH - 1
    body = {"Pod": pod("1", "1Gi")}
    prefix = json.dumps(body)[:-1].encode() + b', "NodeNames": '
    await rig.assert_refused(path, prefix + nested_arrays(inner + 1) + b"}", TOO_DEEP)
    status, reply = await rig.post(path, prefix + nested_arrays(inner) + b"}")
    assert status == 400 and reply["error"].startswith("NodeNames[0]: expected a string")
