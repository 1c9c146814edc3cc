"""The wire formats on their own: tolerant reading (Go's case-insensitive keys), strict
writing (kube-scheduler's capitalised names, Volcano's tags), and what is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from coordinator.extender import wire
from coordinator.extender.wire import MetaVictims, WireError
from coordinator.state.kubeobjects import pod_request
from tests.coordinator.extender.kubejson import GIB, NODES, POD_UID, pod

# ---------------------------------------------------------------------- lookup


def test_lookup_matches_keys_case_insensitively_and_the_last_one_wins_as_in_go():
    assert wire.lookup({"NodeNames": [1]}, "NodeNames") == [1]
    assert wire.lookup({"nodenames": [2]}, "NodeNames") == [2]
    assert wire.lookup({"NODENAMES": [3]}, "NodeNames") == [3]
    assert wire.lookup({"Pod": "first", "pod": "second"}, "Pod") == "second"
    assert wire.lookup({"Pods": 1}, "Pod") is None
    assert wire.lookup({}, "Pod") is None


def test_parse_json_refuses_what_go_would_not_read():
    assert wire.parse_json(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    for body in (b"{", b"NaN", b'{"a": Infinity}', b"\xff\xfe\xfa", b""):
        with pytest.raises(WireError, match="body is not JSON") as e:
            wire.parse_json(body)
        assert e.value.status == 400


# ------------------------------------------------------------- ExtenderArgs


@pytest.mark.parametrize(
    "keys",
    [("Pod", "Nodes", "NodeNames"), ("pod", "nodes", "nodenames"), ("pod", "nodes", "nodeNames")],
)
def test_extender_args_in_node_names_mode_read_in_any_casing(keys):
    pod_key, nodes_key, names_key = keys
    body = {pod_key: pod(), nodes_key: None, names_key: ["node-a", "node-b"]}
    args = wire.decode_extender_args(body)
    assert args.pod == pod()
    assert args.names == ["node-a", "node-b"]
    assert args.nodes is None


def test_extender_args_in_nodes_mode_keep_the_node_objects_in_order():
    body = {"Pod": pod(), "Nodes": {"metadata": {}, "items": [NODES["node-b"], NODES["gpu-1"]]}}
    args = wire.decode_extender_args(body)
    assert args.names == ["node-b", "gpu-1"]
    assert args.nodes == [NODES["node-b"], NODES["gpu-1"]]
    empty = wire.decode_extender_args({"Pod": pod(), "Nodes": {"metadata": {}, "items": None}})
    assert (empty.names, empty.nodes) == ([], [])


def test_node_names_win_when_both_forms_are_sent():
    body = {"Pod": pod(), "Nodes": {"items": [NODES["node-b"]]}, "NodeNames": ["node-a"]}
    args = wire.decode_extender_args(body)
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
    with pytest.raises(WireError) as e:
        wire.decode_extender_args(body)
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
        args = wire.decode_preemption_args(body)
        assert args.victims == {"node-a": MetaVictims(uids=("c0ffee",), pdb_violations=2)}


def test_full_victims_become_their_uids():
    victim = pod(name="victim", uid="v-1")
    body = {
        "Pod": pod(),
        "NodeNameToVictims": {"node-b": {"Pods": [victim], "NumPDBViolations": 1}},
        "NodeNameToMetaVictims": None,
    }
    args = wire.decode_preemption_args(body)
    assert args.victims == {"node-b": MetaVictims(uids=("v-1",), pdb_violations=1)}
    assert wire.decode_preemption_args({"Pod": pod()}).victims == {}


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
    with pytest.raises(WireError) as e:
        wire.decode_preemption_args({"Pod": pod(), **victims})
    assert str(e.value) == message


# ------------------------------------------------------------------ writing


def test_filter_reply_is_what_gos_encoder_writes_in_node_names_mode():
    reply = wire.filter_reply(["node-a"], {"node-b": "why b"}, {"node-c": "why c"})
    assert json.dumps(reply) == (
        '{"Nodes": null, "NodeNames": ["node-a"], '
        '"FailedNodes": {"node-b": "why b", "node-c": "why c"}, '
        '"FailedAndUnresolvableNodes": {"node-c": "why c"}, "Error": ""}'
    )


def test_filter_reply_in_nodes_mode_echoes_a_node_list_and_no_names():
    reply = wire.filter_reply([], {}, {}, [NODES["node-a"]])
    assert reply == {
        "Nodes": {"metadata": {}, "items": [NODES["node-a"]]},
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_host_priorities_are_integers_in_0_to_10_in_gos_key_order():
    reply = wire.HostPriorityWriter().write(["a", "b"], np.array([10, 0]))
    assert json.loads(reply, object_pairs_hook=list) == [
        [("Host", "a"), ("Score", 10)],
        [("Host", "b"), ("Score", 0)],
    ]
    for bad in ([11], [-1], [True]):
        with pytest.raises(ValueError, match="outside 0..10"):
            wire.HostPriorityWriter().write(["a"], np.array(bad))


def test_preemption_reply_is_the_meta_form_with_well_formed_entries_only():
    victims = {
        "n1": MetaVictims(("u1", "u2"), 1),
        "n2": MetaVictims(None, 0),
        "n3": None,
        "n4": MetaVictims((), 0),
    }
    assert wire.preemption_reply(victims) == {
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "u1"}, {"UID": "u2"}], "NumPDBViolations": 1},
        }
    }


def test_volcano_replies_use_volcanos_tags_and_codes():
    assert wire.predicate_reply(True) == {"status": "", "code": 0}
    assert wire.predicate_reply(False, "full") == {"status": "full", "code": 2}
    assert wire.predicate_reply(False, "no", unresolvable=True) == {"status": "no", "code": 3}
    assert wire.node_scores([("a", 100), ("b", 30)]) == {
        "nodeScore": {"a": 100, "b": 30},
        "errorMessage": "",
    }


# ------------------------------------------------------------------- Volcano


def test_a_task_without_its_pod_is_judged_from_resreq_in_milli_units():
    body = {
        "task": {
            "UID": POD_UID,
            "Name": "p",
            "Namespace": "ns",
            "Resreq": {
                "MilliCPU": 1500,
                "Memory": 4 * GIB,
                "ScalarResources": {"nvidia.com/gpu": 2000, "hugepages-2Mi": 1024 * 2**20 * 1000},
                "MaxTaskNum": 0,
            },
            "Pod": None,
        },
        "node": {"Name": "gpu-1"},
    }
    task, node = wire.decode_predicate_args(body)
    assert task.uid == POD_UID
    assert (node.name, node.node) == ("gpu-1", None)
    request = pod_request(task.pod, 0)
    assert request.name == "ns/p"
    assert (request.cpu_m, request.mem_b, request.gpus, request.gpu_milli) == (
        1500,
        4 * GIB,
        2,
        1000,
    )
    assert request.contiguous_b == 1024 * 2**20


def test_the_embedded_pod_is_preferred_to_resreq():
    gpu_pod = pod("4", "8Gi", gpus=2)
    body = {
        "task": {"Resreq": {"MilliCPU": 1}, "Pod": gpu_pod},
        "nodes": [{"Name": "gpu-1", "Node": NODES["gpu-1"]}, {"Node": NODES["node-a"]}],
    }
    task, nodes = wire.decode_volcano_prioritize_args(body)
    assert task.pod is gpu_pod
    assert task.uid == POD_UID  # from the pod when TaskInfo has no UID
    assert [(n.name, n.node) for n in nodes] == [
        ("gpu-1", NODES["gpu-1"]),
        ("node-a", NODES["node-a"]),
    ]


def test_volcano_keys_are_read_in_any_casing():
    body = {
        "Task": {"uid": "u", "resreq": {"millicpu": 250, "memory": 1024}},
        "NODE": {"name": "x"},
    }
    task, node = wire.decode_predicate_args(body)
    request = pod_request(task.pod, 0)
    assert (task.uid, node.name, request.cpu_m, request.mem_b) == ("u", "x", 250, 1024)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"node": {"Name": "x"}}, "body: no task"),
        ({"task": {"Resreq": {}}}, "body: no node"),
        ({"task": {"UID": "u"}, "node": {"Name": "x"}}, "task: neither Pod nor Resreq"),
        (
            {"task": {"Resreq": {"MilliCPU": "2"}}, "node": {"Name": "x"}},
            "task.Resreq.MilliCPU: expected a number, got string",
        ),
        (
            {"task": {"Resreq": {"Memory": -1}}, "node": {"Name": "x"}},
            "task.Resreq.Memory: expected a non-negative number, got -1",
        ),
        (
            {
                "task": {"Resreq": {"ScalarResources": {"nvidia.com/gpu": None, "x": [1]}}},
                "node": {},
            },
            "task.Resreq.ScalarResources['x']: expected a number, got array",
        ),
        ({"task": {"Resreq": {}}, "node": {"Name": 5}}, "node.Name: expected a string, got number"),
        (
            {"task": {"Resreq": {}}, "node": {"Name": "x", "Node": NODES["node-a"]}},
            "node: Name 'x' and Node.metadata.name differ",
        ),
        ({"task": {"Resreq": {}}, "node": []}, "node: expected an object, got array"),
    ],
)
def test_malformed_volcano_predicate_args_say_what_is_wrong(body, message):
    with pytest.raises(WireError) as e:
        wire.decode_predicate_args(body)
    assert str(e.value) == message
