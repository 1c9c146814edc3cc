"""The demo's kube-scheduler calling an extender: the API emulator for the Pod and its
binding, and an extender on 127.0.0.1 answering what each test sets, so the choice can be
worked out by hand from kube-scheduler's scoring."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient, Configuration, CoreV1Api

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.demo.httpjson import DemoError, JsonClient
from hack.demo.schedcache import SchedulerCache
from hack.demo.scheduler import EXTENDER_WEIGHT, WithExtender
from hack.demo.stack import ROOT
from hack.demo.workload import node_fields, pod_object
from hack.kubeapi import KubeApi

GI = 2**30
NODES = [NodeSpec(f"n{i}", cpu_m=4000, mem_b=8 * GI, gpus=1, gpu_model="T4") for i in range(3)]
POD = PodRequest("p", cpu_m=1000, mem_b=2 * GI, gpus=1, gpu_milli=500)


class Extender:
    """Answers ``/scheduler/filter`` and ``/scheduler/prioritize`` as set, recording calls."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.calls: list[tuple[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                verb = self.path.rsplit("/", 1)[-1]
                outer.calls.append((verb, body))
                data = json.dumps(outer.answers[verb]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def extender() -> Iterator[Extender]:
    ext = Extender()
    thread = threading.Thread(target=ext.server.serve_forever, daemon=True)
    thread.start()
    yield ext
    ext.server.shutdown()
    ext.server.server_close()


@pytest.fixture
def api() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as emulator:
        for spec in NODES:
            emulator.add_node(spec.name, **node_fields(spec))
        yield emulator


def schedule(api: KubeApi, extender: Extender, cache: SchedulerCache) -> tuple[int | None, str]:
    """Create the pod, let the scheduler place it; its index and the API's nodeName."""
    client = JsonClient(api.url)
    created = client.post("/api/v1/namespaces/default/pods", pod_object(POD, "default"))
    placed = WithExtender(cache, 1, client, JsonClient(extender.url)).place(created, POD)
    core = CoreV1Api(ApiClient(Configuration(host=api.url)))
    return placed, core.read_namespaced_pod("p", "default").spec.node_name or ""


def busy_cache() -> SchedulerCache:
    cache = SchedulerCache(NODES)
    cache.bind("other", PodRequest("other", cpu_m=2000, mem_b=2 * GI), 1)
    return cache


@pytest.mark.parametrize(("n2_score", "winner"), [(10, "n2"), (9, "n1")])
def test_the_extenders_weighted_score_is_added_to_kube_schedulers_own(
    api, extender, n2_score, winner
):
    # kube-scheduler's own: n0 and n2 (empty) 75 + 100 = 175; n1 (2 CPUs, 2 Gi taken):
    # least (25 + 50)//2 = 37, balanced 0.75 vs 0.5 -> 87 => 124.
    # With the extender at weight 20: n0 175 + 0; n1 124 + 10*200 = 2124; n2 175 + 10*200 =
    # 2175 (n2 wins on kube-scheduler's own score), or 175 + 9*200 = 1975 (n1 wins).
    extender.answers = {
        "filter": {"NodeNames": ["n0", "n1", "n2"], "FailedNodes": {}, "Error": ""},
        "prioritize": [
            {"Host": "n0", "Score": 0},
            {"Host": "n1", "Score": 10},
            {"Host": "n2", "Score": n2_score},
        ],
    }
    placed, bound = schedule(api, extender, busy_cache())
    assert bound == winner and NODES[placed].name == winner
    verb, args = extender.calls[0]
    assert verb == "filter" and args["NodeNames"] == ["n0", "n1", "n2"] and args["Nodes"] is None
    assert args["Pod"]["metadata"]["uid"]  # the Pod as the API server has it
    assert [v for v, _ in extender.calls] == ["filter", "prioritize"]


def test_one_node_left_after_filter_is_bound_without_prioritize(api, extender):
    extender.answers = {"filter": {"NodeNames": ["n2"], "FailedNodes": {"n0": "x", "n1": "y"}}}
    placed, bound = schedule(api, extender, busy_cache())
    assert (placed, bound) == (2, "n2")
    assert [v for v, _ in extender.calls] == ["filter"]


def test_a_node_the_extender_passes_without_room_in_the_schedulers_count_is_dropped(api, extender):
    cache = SchedulerCache(NODES)
    cache.bind("whole", PodRequest("whole", 100, GI, gpus=1, gpu_milli=1000), 1)
    extender.answers = {"filter": {"NodeNames": ["n1", "n0"]}}  # n1's GPU is taken
    placed, bound = schedule(api, extender, cache)
    assert (placed, bound) == (0, "n0")
    assert [v for v, _ in extender.calls] == ["filter"]


def test_no_node_passing_leaves_the_pod_pending(api, extender):
    extender.answers = {"filter": {"NodeNames": [], "FailedNodes": {"n0": "full"}}}
    assert schedule(api, extender, SchedulerCache(NODES)) == (None, "")


def test_an_extender_error_stops_the_demo_with_it(api, extender):
    extender.answers = {"filter": {"NodeNames": None, "Error": "boom"}}
    with pytest.raises(DemoError, match="boom"):
        schedule(api, extender, SchedulerCache(NODES))


def test_the_extender_weight_is_the_one_the_shipped_configuration_gives():
    config = ROOT / "daemonset" / "scheduler" / "kube-scheduler-config.yaml"
    documents = [d for d in yaml.safe_load_all(config.read_text()) if d]
    extenders = [e for d in documents for e in d.get("extenders", [])]
    assert [e["weight"] for e in extenders] == [EXTENDER_WEIGHT]
