"""Volcano's extender plugin messages on their own: its lower-case tags and untagged
TaskInfo/NodeInfo read in any casing, Resreq read in milli-units, its reply tags and
codes, and what is refused."""

from __future__ import annotations

import pytest

from coordinator.extender import gojson, volcanowire
from coordinator.state.kubeobjects import pod_request
from tests.coordinator.extender.kubejson import GIB, NODES, POD_UID, pod


def test_volcano_replies_use_volcanos_tags_and_codes():
    assert volcanowire.predicate_reply(True) == {"status": "", "code": 0}
    assert volcanowire.predicate_reply(False, "full") == {"status": "full", "code": 2}
    assert volcanowire.predicate_reply(False, "no", unresolvable=True) == {
        "status": "no",
        "code": 3,
    }
    assert volcanowire.node_scores([("a", 100), ("b", 30)]) == {
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
    task, node = volcanowire.decode_predicate_args(body)
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
    task, nodes = volcanowire.decode_volcano_prioritize_args(body)
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
    task, node = volcanowire.decode_predicate_args(body)
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
    with pytest.raises(gojson.WireError) as e:
        volcanowire.decode_predicate_args(body)
    assert str(e.value) == message
