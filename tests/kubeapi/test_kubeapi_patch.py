"""The patch functions and selectors on literal documents (RFC 7386 and RFC 6902 examples,
strategic merge list rules), where a table of cases says more than HTTP round trips."""

from __future__ import annotations

import pytest

from hack.kubeapi import errors, patch, selectors


@pytest.mark.parametrize(
    ("target", "merge", "result"),
    [  # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({"a": "foo"}, None, None),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_examples(target, merge, result):
    assert patch.merge_patch(target, merge) == result


def test_strategic_merge_merges_conditions_by_type_and_replaces_other_lists():
    node = {
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
            ]
        },
    }
    body = {
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "True"},
                {"type": "Stowage", "status": "True"},
            ]
        },
    }
    out = patch.strategic_merge_patch(node, body)
    assert out["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "MemoryPressure", "status": "True"},
        {"type": "Stowage", "status": "True"},
    ]


def test_strategic_merge_directives():
    obj = {
        "metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
        "status": {"conditions": [{"type": "A"}, {"type": "B"}]},
    }
    body = {
        "metadata": {"finalizers": ["b"], "labels": {"$patch": "replace", "y": "2"}},
        "status": {
            "conditions": [{"type": "A", "$patch": "delete"}],
            "$setElementOrder/conditions": [{"type": "B"}],
        },
    }
    out = patch.strategic_merge_patch(obj, body)
    assert out == {
        "metadata": {"finalizers": ["a", "b"], "labels": {"y": "2"}},
        "status": {"conditions": [{"type": "B"}]},
    }
    removal = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}
    assert patch.strategic_merge_patch(out, removal)["metadata"]["finalizers"] == ["b"]


def test_json_patch_operations_and_pointer_escapes():
    doc = {"a": {"x/y": 1, "m~n": 2}, "l": [1, 2]}
    ops = [
        {"op": "copy", "from": "/a/x~1y", "path": "/b"},
        {"op": "move", "from": "/a/m~0n", "path": "/c"},
        {"op": "add", "path": "/l/1", "value": 9},
        {"op": "add", "path": "/l/-", "value": 3},
        {"op": "replace", "path": "/l/0", "value": 0},
        {"op": "test", "path": "/b", "value": 1},
    ]
    assert patch.json_patch(doc, ops) == {"a": {"x/y": 1}, "l": [0, 9, 2, 3], "b": 1, "c": 2}
    assert doc == {"a": {"x/y": 1, "m~n": 2}, "l": [1, 2]}  # the input is not touched


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/nope/deeper", "value": 1}],
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "frobnicate", "path": "/a"}],
    ],
)
def test_json_patch_failures_are_422(ops):
    with pytest.raises(errors.ApiError) as caught:
        patch.json_patch({"a": 1}, ops)
    assert caught.value.code == 422


@pytest.mark.parametrize(
    ("selector", "matching"),
    [
        ("app=web", {"w1", "w2"}),
        ("app==web,tier=front", {"w1"}),
        ("app!=web", {"db", "bare"}),
        ("tier in (front, back),app", {"w1", "db"}),
        ("tier notin (front)", {"w2", "db", "bare"}),
        ("!tier", {"w2", "bare"}),
        ("", {"w1", "w2", "db", "bare"}),
    ],
)
def test_label_selector_strings(selector, matching):
    objs = {
        "w1": {"app": "web", "tier": "front"},
        "w2": {"app": "web"},
        "db": {"app": "db", "tier": "back"},
        "bare": {},
    }
    matcher = selectors.parse_labels(selector)
    assert {
        name for name, labels in objs.items() if matcher({"metadata": {"labels": labels}})
    } == matching


def test_structured_selectors_empty_matches_nothing():
    assert selectors.label_selector({}) is None
    assert selectors.label_selector({"matchLabels": {}}) is None
    exists = selectors.label_selector({"matchExpressions": [{"key": "a", "operator": "Exists"}]})
    assert exists({"metadata": {"labels": {"a": ""}}}) and not exists({"metadata": {}})
