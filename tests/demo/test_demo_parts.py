"""The demo's parts on their own: the scheduler's cache, the trace sample and the Pods it
becomes, the summary, the replay's time limit and the ``--keep`` queue."""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np
import pytest

from coordinator.scoring.fragmentation import Fragmentation, Shape
from coordinator.state.cluster import NodeSpec
from coordinator.state.kubeobjects import pod_request
from coordinator.state.podrequest import PodRequest
from hack.demo import main as demo
from hack.demo import summary
from hack.demo.httpjson import JsonClient
from hack.demo.pending import PendingPods, follow
from hack.demo.schedcache import MAX_PODS, SchedulerCache
from hack.demo.scheduler import DefaultScoring
from hack.demo.workload import node_fields, pod_object, sample_nodes
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.faults import Fault
from hack.kubeapi.resources import PODS

GI = 2**30


def node(name: str, gpus: int = 1, model: str = "T4") -> NodeSpec:
    return NodeSpec(name, cpu_m=4000, mem_b=8 * GI, gpus=gpus, gpu_model=model)


def share(name: str, milli: int = 500) -> PodRequest:
    return PodRequest(name, cpu_m=1000, mem_b=2 * GI, gpus=1, gpu_milli=milli)


# ------------------------------------------------------------------ the cache


def test_a_shared_gpu_is_invisible_to_kube_schedulers_fit_filter_but_not_to_the_room_check():
    cache = SchedulerCache([node("n")])
    cache.bind("a", share("a", 500), 0)
    whole = PodRequest("w", cpu_m=1000, mem_b=GI, gpus=1, gpu_milli=1000)
    assert cache.fits(whole).tolist() == [True]  # no nvidia.com/gpu requested so far
    assert cache.has_room(whole).tolist() == [False]  # its one GPU has 500 left
    assert cache.has_room(share("b", 500)).tolist() == [True]


def test_whole_gpus_requested_count_against_the_fit_filter():
    cache = SchedulerCache([node("n", gpus=2)])
    cache.bind("a", PodRequest("a", 100, GI, gpus=2, gpu_milli=1000), 0)
    assert cache.fits(PodRequest("b", 100, GI, gpus=1, gpu_milli=1000)).tolist() == [False]
    assert cache.fits(PodRequest("c", 100, GI)).tolist() == [True]


def test_a_node_with_as_many_pods_as_kubelet_allows_fails_the_fit_filter():
    cache = SchedulerCache([node("n")])
    tiny = PodRequest("t", cpu_m=1, mem_b=1)
    for k in range(MAX_PODS - 1):
        cache.bind(f"t{k}", tiny, 0)
    assert cache.fits(tiny).tolist() == [True]
    cache.bind("last", tiny, 0)
    assert cache.fits(tiny).tolist() == [False]


def test_plugin_scores_add_least_allocated_and_balanced_allocation():
    cache = SchedulerCache([node("n")])
    # cpu 1000 of 4000 and 2 Gi of 8 Gi: least (75 + 75)//2 = 75, balanced 100
    assert cache.plugin_scores(share("p"), np.array([0])).tolist() == [175]
    # nothing requested: least counts 100m and 200 MiB -> (97 + 97)//2; balanced skipped
    assert cache.plugin_scores(PodRequest("e", 0, 0), np.array([0])).tolist() == [97]


def test_release_gives_back_exactly_what_bind_took():
    cache = SchedulerCache([node("n", gpus=2)])
    pod = PodRequest("a", 1000, GI, gpus=2, gpu_milli=1000)
    cache.bind("a", pod, 0)
    cache.release("a")
    s = cache.state
    assert (s.cpu_free == s.cpu_cap).all() and (s.gpu_free == s.gpu_cap).all()
    assert [cache.cpu_nonzero[0], cache.gpu_requested[0], cache.pods[0]] == [0, 0, 0]
    assert cache.bound == {}


# --------------------------------------------------------------- the workload


def test_the_sample_keeps_each_kind_of_node_in_proportion():
    nodes = [node(f"a{i}", 8, "V100") for i in range(6)] + [
        node(f"b{i}", 2, "T4") for i in range(4)
    ]
    sample = sample_nodes(nodes, 5, seed=3)
    assert collections.Counter(n.gpu_model for n in sample) == {"V100": 3, "T4": 2}
    assert len({n.name for n in sample}) == 5
    assert sample_nodes(nodes, 50, seed=3) == nodes
    # 7 and 3 of 10, 4 wanted: 2.8 and 1.2, the larger remainder gets the fourth
    seven_three = [node(f"a{i}", 8, "V100") for i in range(7)] + [
        node(f"b{i}", 2, "T4") for i in range(3)
    ]
    sample = sample_nodes(seven_three, 4, seed=3)
    assert collections.Counter(n.gpu_model for n in sample) == {"V100": 3, "T4": 1}


def test_the_pods_and_nodes_read_back_as_the_coordinator_reads_them():
    shared = PodRequest("s", 1500, 3 * GI, gpus=1, gpu_milli=300, gpu_models=frozenset({"T4"}))
    whole = PodRequest("w", 8000, 16 * GI, gpus=4, gpu_milli=1000)
    for pod in (shared, whole):
        obj = pod_object(pod, "default")
        read = pod_request(obj, 0)
        assert (read.cpu_m, read.mem_b, read.gpus, read.gpu_milli, read.gpu_models) == (
            pod.cpu_m,
            pod.mem_b,
            pod.gpus,
            pod.gpu_milli,
            pod.gpu_models,
        )
    resources = pod_object(shared, "default")["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in resources["requests"]  # a share asks no whole GPU
    fields = node_fields(node("n", 8, "G2"))
    assert fields["capacity"]["nvidia.com/gpu"] == "8"
    assert fields["labels"] == {"nvidia.com/gpu.product": "G2"}


# ---------------------------------------------------------------- the summary


def test_the_summary_reads_each_schedulers_cluster():
    cache = SchedulerCache([node("n0"), node("n1")])
    measure = Fragmentation([(Shape(cpu_m=1000, gpu_milli=1000, gpus=1), 1.0)])
    tally = summary.Tally("x", cache.state, measure)
    cache.bind("a", share("a"), 0)
    tally.record(share("a"), 0)
    tally.record(share("b", 800), None)
    figures = summary.figures(tally)
    assert figures["pods placed"] == "1 / 2"
    assert figures["pods pending"] == "1"
    assert figures["nodes used"] == "1 / 2"
    assert figures["GPUs in use (any share)"] == "1 / 2"
    assert figures["unallocated GPU"] == "75.0 %"  # 500 of 2000 milli allocated
    assert figures["  when 100 % had arrived"] == "–"  # 1300 of 2000 asked for
    tally.record(PodRequest("c", 100, GI, gpus=1, gpu_milli=700), 1)
    tally.record(PodRequest("d", 100, GI, gpus=1, gpu_milli=300), 1)
    assert figures_at_100(tally) == "40.0 %"  # 2000 arrived at c: 1200 allocated
    # a whole-GPU pod (the only typical one) cannot use n0's half GPU: 500 of 2000
    assert figures["GPU fragmentation (FGD)"] == "25.0 % of GPUs"
    assert tally.arrived == [500, 1300, 2000, 2300] and tally.used == [500, 500, 1200, 1500]


def figures_at_100(tally: summary.Tally) -> str:
    return summary.figures(tally)["  when 100 % had arrived"]


def test_the_table_puts_both_columns_side_by_side_and_the_plot_is_a_png(tmp_path):
    measure = Fragmentation([(Shape(cpu_m=1000, gpu_milli=1000, gpus=1), 1.0)])
    left = summary.Tally("default scoring", SchedulerCache([node("n")]).state, measure)
    right = summary.Tally("with Stowage", SchedulerCache([node("n")]).state, measure)
    for tally in (left, right):
        tally.record(share("a"), None)
    text = summary.table([left, right])
    header, *rows = text.splitlines()
    assert header.split() == ["default", "scoring", "with", "Stowage"]
    assert any(r.startswith("pods pending") and r.split()[-2:] == ["1", "1"] for r in rows)
    png = tmp_path / "plot.png"
    summary.plot(png, [left, right], "t")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------ the time limit


def test_the_replay_stops_once_its_seconds_have_passed_and_draws_no_bar_off_a_terminal(
    clock, capsys
):
    cache = SchedulerCache([node("n", gpus=8)])
    default = DefaultScoring(cache, seed=1)
    pods = [share(f"p{i}", 100) for i in range(10)]
    tally = summary.Tally("x", cache.state, Fragmentation([]))

    def place(pod: PodRequest) -> int | None:
        clock.advance(1.0)
        return default.place(pod.name, pod)

    assert demo.replay(pods, place, tally, clock, seconds=3.5) == 4  # at 0, 1, 2 and 3 s
    assert len(tally.used) == 4
    assert demo.replay(pods, place, tally, clock, seconds=100) == 10
    out = capsys.readouterr()
    assert out.out == "--seconds 3.5 reached: comparing the first 4 pods\n"
    assert out.err == ""  # stderr is a pipe here, as in `make run 2>&1 | tail`: no \r bar


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--nodes", "0"], "--nodes 0: must be positive"),
        (["--pods", "-1"], "--pods -1: must be 0 or more"),
        (["--seed", "-5"], "--seed -5: must be 0 or more"),
        (["--seconds", "0"], "--seconds 0.0: must be positive"),
        (["--seconds", "nan"], "--seconds nan: must be positive"),
        (["--port", "0"], "--port 0: must be 1..65535"),
        (["--api-port", "65536"], "--api-port 65536: must be 1..65535"),
    ],
)
def test_bad_options_are_refused_with_exit_2(argv, why, capsys):
    with pytest.raises(SystemExit) as exit:
        demo.parse_args(argv)
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m hack.demo: error: {why}"


def test_a_trace_that_is_not_there_is_one_error_line_and_exit_2(tmp_path, capsys):
    assert demo.main(["--trace", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"stowage demo: error: {tmp_path / 'none' / demo.NODE_FILE}: No such file or directory"
    ]


# ------------------------------------------------------------ the --keep queue


class FirstFit:
    """A stand-in for the extender scheduler: the first node with room."""

    def __init__(self, cache: SchedulerCache) -> None:
        self.cache = cache
        self.calls = 0

    def place(self, pod_object, pod: PodRequest) -> int | None:
        self.calls += 1
        fits = self.cache.has_room(pod).nonzero()[0]
        if not len(fits):
            return None
        self.cache.bind(pod_object["metadata"]["uid"], pod, int(fits[0]))
        return int(fits[0])


def api_pod(name: str, milli: int, *, node: str | None = None, scheduler: str | None = None):
    obj = objects.pod(
        name,
        node=node,
        phase="Running" if node else "Pending",
        requests={"cpu": "1", "memory": "1Gi"},
        annotations={"stowage.io/gpu-milli": str(milli)},
    )
    obj["metadata"]["uid"] = name
    if scheduler:
        obj["spec"]["schedulerName"] = scheduler
    else:
        obj["spec"].pop("schedulerName", None)
    return obj


def test_keep_schedules_waiting_pods_and_retries_one_that_did_not_fit_once_room_is_given_back():
    cache = SchedulerCache([node("n0")])
    scheduler = FirstFit(cache)
    queue = PendingPods(scheduler)  # type: ignore[arg-type]
    held = api_pod("held", 600, node="n0")
    mine = api_pod("mine", 300)
    big = api_pod("big", 900, scheduler="stowage-scheduler")
    other = api_pod("other", 100, scheduler="someone-else")
    lines = queue.sync([held, mine, big, other])
    assert lines == [
        "default/mine: bound to n0",
        "default/big: no node can take it now (stays Pending)",
    ]
    assert "held" in cache.bound  # bound by someone else: counted where it is
    assert "other" not in cache.bound
    calls = scheduler.calls
    assert queue.sync([held, mine, big, other]) == []  # nothing changed: big is not retried
    assert scheduler.calls == calls
    assert queue.sync([mine, big, other]) == [
        "default/big: no node can take it now (stays Pending)"
    ]
    gone = {**mine, "metadata": {**mine["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert queue.sync([gone, big, other]) == ["default/big: bound to n0"]
    assert set(cache.bound) == {"big"}
    done = {**big, "status": {**big["status"], "phase": "Succeeded"}}
    queue.sync([done, other])
    assert cache.bound == {}  # a finished pod gives its room back


def test_the_replays_waiting_pods_wait_for_room_and_are_reported_together():
    cache = SchedulerCache([node("n0")])
    scheduler = FirstFit(cache)
    held = api_pod("held", 600, node="n0")
    r1, r2 = api_pod("r1", 900), api_pod("r2", 800)
    for pod in (r1, r2):
        pod["metadata"]["labels"] = {"stowage.io/demo": "replay"}
    queue = PendingPods(scheduler, tried=["r1"])  # type: ignore[arg-type]
    assert queue.sync([held, r1, r2]) == ["1 of the replay's pods tried again: still no room"]
    assert scheduler.calls == 1  # r2 only: r1 found no node just now
    assert queue.sync([r1, r2]) == [
        "default/r1: bound to n0",
        "1 of the replay's pods tried again: still no room",
    ]


class WatchingClient(JsonClient):
    """The real client; as its watch starts, ``meanwhile`` changes the cluster (as a user
    would between the scheduler's list and its watch)."""

    def __init__(self, emulator: KubeApi, meanwhile: Callable[[KubeApi], object]) -> None:
        super().__init__(emulator.url)
        self.emulator = emulator
        self.meanwhile = meanwhile

    def watch(self, path: str):
        self.meanwhile(self.emulator)
        yield from super().watch(path)


def add_late_pod(emulator: KubeApi) -> None:
    emulator.add_pod(
        "late", phase="Pending", requests={"cpu": "1", "memory": "1Gi"},
        annotations={"stowage.io/gpu-milli": "500"},
    )  # fmt: skip


def test_keep_follows_the_pod_watch_and_lists_again_when_it_is_cut(capsys):
    with KubeApi.in_thread() as emulator:
        emulator.add_node("n0", **node_fields(node("n0")))
        emulator.faults.add(Fault.drop_watch(after=1, path=r"^/api/v1/pods$"))
        cache = SchedulerCache([node("n0")])
        follow(PendingPods(FirstFit(cache)), WatchingClient(emulator, add_late_pod), watch_s=60)  # type: ignore[arg-type]
    assert capsys.readouterr().out == "default/late: bound to n0\n"  # from its ADDED event
    assert len(cache.bound) == 1


def test_keep_lists_again_when_the_watch_has_expired():
    with KubeApi.in_thread() as emulator:
        emulator.add_node("n0", **node_fields(node("n0")))
        emulator.add_pod("early", phase="Pending", requests={"cpu": "1", "memory": "1Gi"})
        emulator.faults.add(Fault.expire_watch(after=0, path=r"^/api/v1/pods$"))
        cache = SchedulerCache([node("n0")])
        follow(PendingPods(FirstFit(cache)), JsonClient(emulator.url), watch_s=60)  # type: ignore[arg-type]
    assert len(cache.bound) == 1  # placed from the list; the 410 event ended the round


def test_a_pod_the_watch_says_was_deleted_gives_its_room_back(capsys):
    with KubeApi.in_thread() as emulator:
        emulator.add_node("n0", **node_fields(node("n0")))
        emulator.add_pod(
            "held", node="n0", requests={"cpu": "1", "memory": "1Gi"},
            annotations={"stowage.io/gpu-milli": "600"},
        )  # fmt: skip
        emulator.add_pod(
            "wait", phase="Pending", requests={"cpu": "1", "memory": "1Gi"},
            annotations={"stowage.io/gpu-milli": "900"},
        )  # fmt: skip
        emulator.faults.add(Fault.drop_watch(after=1, path=r"^/api/v1/pods$"))
        cache = SchedulerCache([node("n0")])

        def delete_held(api: KubeApi) -> None:
            api.store.delete(PODS, "default", "held")

        follow(PendingPods(FirstFit(cache)), WatchingClient(emulator, delete_held), watch_s=60)  # type: ignore[arg-type]
    assert capsys.readouterr().out.splitlines() == [
        "default/wait: no node can take it now (stays Pending)",
        "default/wait: bound to n0",  # once the DELETED event gave held's 600 back
    ]
