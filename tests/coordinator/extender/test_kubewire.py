"""kube-scheduler's extender messages on their own: tolerant reading (Go's
case-insensitive keys), strict writing (kube-scheduler's capitalised names), and what is
refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from coordinator.extender import gojson, kubewire
from tests.coordinator.extender.kubejson import NODES, pod

# ------------------------------------------------------------- ExtenderArgs


@pytest.mark.parametrize(
    "keys",
    [("Pod", "Nodes", "NodeNames"), ("pod", "nodes", "nodenames"), ("pod", "nodes", "nodeNames")],
)
def test_extender_args_in_node_names_mode_read_in_any_casing(keys):
    pod_key, nodes_key, names_key = keys
    body = {pod_key: pod(), nodes_key: None, names_key: ["node-a", "node-b"]}
    args = kubewire.decode_extender_args(body)
    assert args.pod == pod()
    assert args.names == ["node-a", "node-b"]
    assert args.nodes is None


def test_extender_args_in_nodes_mode_keep_the_node_objects_in_order():
    body = {"Pod": pod(), "Nodes": {"metadata": {}, "items": [NODES["node-b"], NODES["gpu-1"]]}}
    args = kubewire.decode_extender_args(body)
    assert args.names == ["node-b", "gpu-1"]
    assert args.nodes == [NODES["node-b"], NODES["gpu-1"]]
    empty = kubewire.decode_extender_args({"Pod": pod(), "Nodes": {"metadata": {}, "items": None}})
    assert (empty.names, empty.nodes) == ([], [])


def test_node_names_win_when_both_forms_are_sent():
    body = {"Pod": pod(), "Nodes": {"items": [NODES["node-b"]]}, "NodeNames": ["node-a"]}
    args = kubewire.decode_extender_args(body)
    assert (args.names, args.nodes) == (["node-a"], None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], "body: expected an object, got array"),
        ({"NodeNames": ["node-a"]}, "body: no Pod"),
        ({"Pod": None, "NodeNames": ["node-a"]}, "body: no Pod"),
        ({"Pod": "p", "NodeNames": ["node-a"]}, "body.Pod: expected an object, got string"),
        ({"Pod": {}, "NodeNames": "node-a"}, "NodeNames: expected an array, got string"),
        ({"Pod": {}, "NodeNames": ["node-a", 7]}, "NodeNames[1]: expected a string, got number"),
        ({"Pod": {}}, "body: neither NodeNames nor Nodes given"),
        ({"Pod": {}, "Nodes": []}, "Nodes: expected an object, got array"),
        ({"Pod": {}, "Nodes": {"items": {}}}, "Nodes.items: expected an array, got object"),
        (
            {"Pod": {}, "Nodes": {"items": [True]}},
            "Nodes.items[0]: expected an object, got boolean",
        ),
        (
            {"Pod": {}, "Nodes": {"items": [{"metadata": {"name": ""}}]}},
            "Nodes.items[0].metadata.name: expected a non-empty string, got string",
        ),
        (
            {"Pod": {}, "Nodes": {"items": [{"spec": {}}]}},
            "Nodes.items[0].metadata: expected an object, got null",
        ),
    ],
)
def test_malformed_extender_args_say_what_is_wrong(body, message):
    with pytest.raises(gojson.WireError) as e:
        kubewire.decode_extender_args(body)
    assert str(e.value) == message
    assert e.value.status == 400


# --------------------------------------------------------------- preemption


def test_meta_victims_are_read_in_either_casing():
    capitalised = {
        "Pod": pod(),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"node-a": {"Pods": [{"UID": "c0ffee"}], "NumPDBViolations": 2}},
    }
    legacy = {
        "pod": pod(),
        "nodeNameToMetaVictims": {"node-a": {"pods": [{"uid": "c0ffee"}], "numPDBViolations": 2}},
    }
    for body in (capitalised, legacy):
        args = kubewire.decode_preemption_args(body)
        assert args.victims == {"node-a": kubewire.MetaVictims(uids=("c0ffee",), pdb_violations=2)}


def test_full_victims_become_their_uids():
    victim = pod(name="victim", uid="v-1")
    body = {
        "Pod": pod(),
        "NodeNameToVictims": {"node-b": {"Pods": [victim], "NumPDBViolations": 1}},
        "NodeNameToMetaVictims": None,
    }
    args = kubewire.decode_preemption_args(body)
    assert args.victims == {"node-b": kubewire.MetaVictims(uids=("v-1",), pdb_violations=1)}
    assert kubewire.decode_preemption_args({"Pod": pod()}).victims == {}


@pytest.mark.parametrize(
    ("victims", "message"),
    [
        ({"NodeNameToMetaVictims": []}, "NodeNameToMetaVictims: expected an object, got array"),
        (
            {"NodeNameToMetaVictims": {"n": {"Pods": [{"UID": 5}]}}},
            "NodeNameToMetaVictims['n'].Pods[0].UID: expected a string, got number",
        ),
        (
            {"NodeNameToMetaVictims": {"n": {"Pods": [], "NumPDBViolations": 1.5}}},
            "NodeNameToMetaVictims['n'].NumPDBViolations: expected an integer, got number",
        ),
        (
            {"NodeNameToVictims": {"n": {"Pods": [{"metadata": {"name": "v"}}]}}},
            "NodeNameToVictims['n'].Pods[0].metadata.uid: expected a non-empty string, got null",
        ),
    ],
)
def test_malformed_victims_say_what_is_wrong(victims, message):
    with pytest.raises(gojson.WireError) as e:
        kubewire.decode_preemption_args({"Pod": pod(), **victims})
    assert str(e.value) == message


# ------------------------------------------------------------------ writing


def test_filter_reply_is_what_gos_encoder_writes_in_node_names_mode():
    reply = kubewire.filter_reply(["node-a"], {"node-b": "why b"}, {"node-c": "why c"})
    assert json.dumps(reply) == (
        '{"Nodes": null, "NodeNames": ["node-a"], '
        '"FailedNodes": {"node-b": "why b", "node-c": "why c"}, '
        '"FailedAndUnresolvableNodes": {"node-c": "why c"}, "Error": ""}'
    )


def test_filter_reply_in_nodes_mode_echoes_a_node_list_and_no_names():
    reply = kubewire.filter_reply([], {}, {}, [NODES["node-a"]])
    assert reply == {
        "Nodes": {"metadata": {}, "items": [NODES["node-a"]]},
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_host_priorities_are_integers_in_0_to_10_in_gos_key_order():
    reply = kubewire.HostPriorityWriter().write(["a", "b"], np.array([10, 0]))
    assert json.loads(reply, object_pairs_hook=list) == [
        [("Host", "a"), ("Score", 10)],
        [("Host", "b"), ("Score", 0)],
    ]
    for bad in ([11], [-1], [True]):
        with pytest.raises(ValueError, match="outside 0..10"):
            kubewire.HostPriorityWriter().write(["a"], np.array(bad))


def test_preemption_reply_is_the_meta_form_with_well_formed_entries_only():
    victims = {
        "n1": kubewire.MetaVictims(("u1", "u2"), 1),
        "n2": kubewire.MetaVictims(None, 0),
        "n3": None,
        "n4": kubewire.MetaVictims((), 0),
    }
    assert kubewire.preemption_reply(victims) == {
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "u1"}, {"UID": "u2"}], "NumPDBViolations": 1},
        }
    }
