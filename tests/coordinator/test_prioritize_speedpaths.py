"""The vectorised filter and prioritize, and the prioritize reply's writer, give exactly
what the straightforward per-node code gives (kept here as the reference), on random
clusters: same names, same scores, same reasons, in the same order."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from aiohttp import web

from coordinator.auth import NoAuth
from coordinator.config import CoordinatorSettings, ExtenderSettings, PolicySettings, SignalSettings
from coordinator.extender import gojson, kube, kubewire
from coordinator.live import MAX_EXTENDER_SCORE, FilterResult, LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.scoring import livefilters
from coordinator.scoring.livefilters import ALIGNING_POLICIES, Rejection
from coordinator.scoring.registry import POLICIES
from coordinator.services import SERVICES, Services
from coordinator.state.cluster import ClusterState
from coordinator.state.kubeobjects import GPU_MILLI, pod_request
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import NodeSignals
from tests.coordinator.extender.kubejson import pod
from tests.hosts import FakeClock

MIB = 2**20
GIB = 2**30
MODELS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4", "")
TOPOLOGY = ("", "none", "best-effort", "restricted", "single-numa-node")
SEEDS = range(25)


# ------------------------------------------------------------- the references


def reference_rejections(
    state: ClusterState, pod: PodRequest, nodes: np.ndarray, settings: SignalSettings
) -> dict[int, Rejection]:
    """Node by node, as the filter was first written."""
    out: dict[int, Rejection] = {}
    mem_free = state.mem_free_effective()
    for i in nodes.tolist():
        rejection = _capacity(state, i, pod, int(mem_free[i])) or _live(state, i, pod, settings)
        if rejection is not None:
            out[i] = rejection
    return out


def _capacity(state: ClusterState, i: int, pod: PodRequest, mem_free: int) -> Rejection | None:
    if pod.gpus:
        model = state.models[state.model_id[i]]
        if pod.gpu_models and model not in pod.gpu_models:
            wanted = ", ".join(sorted(pod.gpu_models))
            return Rejection(f"GPU model {model or 'none'} is not one of {wanted}", True)
        if state.gpu_count[i] < pod.gpus:
            return Rejection(f"{state.gpu_count[i]} GPUs on the node < {pod.gpus} requested", True)
        room = int((state.gpu_free[i] >= pod.gpu_milli).sum())
        if room < pod.gpus:
            return Rejection(
                f"{room} GPUs with {pod.gpu_milli} milli free < {pod.gpus} requested", False
            )
    cpu_free = int(state.cpu_free[i])
    if cpu_free < pod.cpu_m:
        return Rejection(f"CPU {cpu_free}m free < {pod.cpu_m}m requested", False)
    if mem_free < pod.mem_b:
        return Rejection(
            f"memory {max(0, mem_free) // MIB} MiB free < {pod.mem_b // MIB} MiB requested", False
        )
    return None


def _live(
    state: ClusterState, i: int, pod: PodRequest, settings: SignalSettings
) -> Rejection | None:
    if pod.contiguous_b:
        contiguous = int(state.contiguous_2mib_b[i])
        need = pod.contiguous_b  # the threshold is in it: kubeobjects.pod_request
        if 0 <= contiguous < need:
            return Rejection(
                f"memory contiguity {contiguous // MIB} MiB < {need // MIB} MiB needed", False
            )
    if pod.batch:
        threshold = settings.cpu_utilization_threshold_pct
        for label, value in (
            ("CPU use", float(state.cpu_used_pct[i])),
            ("CPU pressure", float(state.cpu_pressure_pct[i])),
        ):
            if not math.isnan(value) and value > threshold:
                return Rejection(f"real load: {label} {value:.0f} % > {threshold:g} %", False)
    if (
        settings.numa_alignment
        and pod.numa_aligned
        and state.topology_policy[i] in ALIGNING_POLICIES
        and 0 <= state.largest_numa_cpu_m[i] < pod.cpu_m
    ):
        cpus = int(state.largest_numa_cpu_m[i]) // 1000
        return Rejection(
            f"NUMA: no NUMA node holds {pod.cpu_m // 1000} CPUs (largest has {cpus}); "
            f"topology manager policy {state.topology_policy[i]}",
            True,
        )
    return None


def reference_filter(cluster: LiveCluster, pod: PodRequest, names: list[str]) -> FilterResult:
    result = FilterResult()
    known = [n for n in names if n in cluster.specs]
    result.passing.extend(n for n in names if n not in cluster.specs)
    if not known or cluster.state is None or cluster.engine is None:
        return result
    state = cluster.state
    index = np.array([state.index[n] for n in known], dtype=np.int64)
    refused = reference_rejections(state, pod, index, cluster.settings.signals)
    admitted = cluster.engine.policy.admit(state, pod, np.ones(len(state), dtype=bool))
    for name, i in zip(known, index.tolist(), strict=True):
        if i in refused:
            target = result.unresolvable if refused[i].unresolvable else result.failed
            target[name] = refused[i].reason
        elif not admitted[i]:
            result.failed[name] = "kept free for the node's GPU pods (CPU-only pod)"
        else:
            result.passing.append(name)
    return result


def reference_prioritize(cluster: LiveCluster, pod: PodRequest, names: list[str]) -> dict:
    scores = dict.fromkeys(names, 0)
    known = [n for n in names if n in cluster.specs]
    if not known or cluster.state is None or cluster.engine is None:
        return scores
    engine = cluster.engine
    state = cluster.state
    index = np.array([state.index[n] for n in known], dtype=np.int64)
    candidates = np.zeros(len(state), dtype=bool)
    candidates[index] = True
    candidates &= engine.policy.admit(state, pod, engine.feasible(pod))
    if not candidates.any():
        return scores
    raw = engine.scores(pod, candidates)
    best = np.nanmax(raw)
    worst = np.nanmin(raw)
    tied = np.flatnonzero(raw == best)
    first = int(tied[np.argmin(engine.rank[tied])])
    for name, i in zip(known, index.tolist(), strict=True):
        value = raw[i]
        if np.isnan(value):
            continue
        if i == first:
            scores[name] = MAX_EXTENDER_SCORE
        elif best > worst:
            scores[name] = int((MAX_EXTENDER_SCORE - 1) * (value - worst) / (best - worst))
        else:
            scores[name] = MAX_EXTENDER_SCORE - 1
    return scores


# ---------------------------------------------------------- random clusters


def random_cluster(
    seed: int, policy: str, nodes: int | None = None, *, pick: bool = False
) -> LiveCluster:
    """Nodes of random sizes and models, bound pods, and fresh signals on most nodes;
    the same seed builds the same cluster. Filter answers every passing node unless
    ``pick`` (the shipped ``extender.pick_in_filter``)."""
    rng = random.Random(seed)
    # stowage reserving GPU nodes' CPU, so that its own refusal is compared too
    args = {"reserve_gpu_cpu": True} if policy == "stowage" else {}
    settings = CoordinatorSettings(
        policy=PolicySettings(name=policy, args=args),
        extender=ExtenderSettings(pick_in_filter=pick),
        signals=SignalSettings(
            contiguity_threshold_b=rng.choice([0, 512 * MIB, 8 * GIB]),
            cpu_utilization_threshold_pct=rng.choice([50.0, 95.0, 100.0]),
            numa_alignment=rng.random() < 0.8,
            true_allocatable=rng.random() < 0.7,
        ),
    )
    cluster = LiveCluster(settings, FakeClock(), CoordinatorMetrics())
    specs = [random_node(rng, f"node-{k}") for k in range(nodes or rng.randint(1, 30))]
    cluster.replace_nodes(specs)
    for k in range(rng.randint(0, 3 * len(specs))):
        node = rng.choice(specs)["metadata"]["name"]
        cluster.upsert_pod(bound_pod(rng, f"bound-{k}", node))
    state = cluster.state
    assert state is not None
    for name in state.names:
        if rng.random() < 0.7:
            signals = random_signals(rng, cluster.specs[name].gpus)
            cluster.signals[name] = signals
            # as a report's signals reach the state: through the settings' switches
            state.set_signals(state.index[name], cluster._effective(signals, cluster.specs[name]))
    return cluster


def random_node(rng: random.Random, name: str) -> dict[str, Any]:
    gpus = rng.choice([0, 0, 1, 2, 4, 8])
    allocatable = {
        "cpu": str(rng.choice([2, 8, 32, 96, 224])),
        "memory": f"{rng.choice([8, 64, 512, 2048])}Gi",
    }
    labels = {}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        model = rng.choice(MODELS)
        if model:
            labels["nvidia.com/gpu.product"] = model
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}


def bound_pod(rng: random.Random, name: str, node: str) -> dict[str, Any]:
    requests = {
        "cpu": f"{rng.choice([100, 1000, 4000, 16000])}m",
        "memory": f"{rng.choice([1, 8, 64])}Gi",
    }
    annotations = {}
    if rng.random() < 0.5:
        requests["nvidia.com/gpu"] = str(rng.choice([1, 1, 2, 4, 8]))
    elif rng.random() < 0.3:
        annotations["stowage.io/gpu-milli"] = str(rng.choice([250, 500]))
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "annotations": annotations,
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Running"},
    }


def random_signals(rng: random.Random, gpus: int) -> NodeSignals:
    def pct() -> float:
        return rng.choice([math.nan, rng.uniform(0, 100), 95.0, 100.0, 0.0])

    links = None
    if gpus > 1 and rng.random() < 0.5:
        links = tuple(
            tuple(0 if a == b else rng.choice([0, 2]) for b in range(gpus)) for a in range(gpus)
        )
    return NodeSignals(
        measured_at=FakeClock().wall(),
        cpu_pressure_pct=pct(),
        memory_pressure_pct=pct(),
        cpu_used_pct=pct(),
        contiguous_2mib_b=rng.choice([-1, 0, 256 * MIB, 4 * GIB, 64 * GIB]),
        true_allocatable_mem_b=rng.choice([-1, 0, 4 * GIB, 256 * GIB]),
        largest_numa_cpu_m=rng.choice([-1, 0, 4000, 16000, 112000]),
        topology_policy=rng.choice(TOPOLOGY),
        gpu_links=links,
    )


def random_pod(rng: random.Random, k: int) -> PodRequest:
    kind = rng.choice(["cpu", "share", "whole", "multi"])
    gpus, milli = {"cpu": (0, 0), "share": (1, rng.choice([100, 500])), "whole": (1, 1000)}.get(
        kind, (rng.choice([2, 4, 8]), 1000)
    )
    models: frozenset[str] = frozenset()
    if gpus and rng.random() < 0.3:
        models = frozenset(rng.sample([*MODELS[:3], "NVIDIA-L4"], rng.randint(1, 2)))
    numa = rng.random() < 0.3
    cpu = rng.choice([1000, 4000, 32000]) if numa else rng.choice([0, 250, 4000, 64000, 300000])
    return PodRequest(
        name=f"ns/pod-{k}",
        cpu_m=cpu,
        mem_b=rng.choice([0, GIB, 32 * GIB, 1024 * GIB, 4096 * GIB]),
        gpus=gpus,
        gpu_milli=milli,
        gpu_models=models,
        contiguous_b=rng.choice([0, 0, GIB, 16 * GIB]),
        batch=rng.random() < 0.3,
        numa_aligned=numa,
    )


def offered(rng: random.Random, cluster: LiveCluster) -> list[str]:
    """Names as a scheduler might send them: some nodes, some twice, some we do not know."""
    known = sorted(cluster.specs)
    names = rng.sample(known, rng.randint(0, len(known)))
    names += rng.choices(known, k=rng.randint(0, 2))
    names += [f"unknown-{k}" for k in range(rng.randint(0, 2))]
    rng.shuffle(names)
    return names


def policies() -> list[str]:
    return sorted(POLICIES)


# -------------------------------------------------------------------- tests


REASONS = {
    "GPU model": "model",
    "GPUs on the node": "count",
    "GPUs with": "room",
    "CPU ": "cpu",
    "memory ": "memory",
    "memory contiguity": "contiguity",
    "CPU use": "load",
    "CPU pressure": "pressure",
    "NUMA": "numa",
}


def reason_kind(reason: str) -> str:
    """The check a reason comes from (the last matching pattern wins)."""
    kinds = [kind for pattern, kind in REASONS.items() if pattern in reason]
    return kinds[-1]


def test_vectorised_rejections_give_the_per_node_reasons():
    seen: Counter[str] = Counter()
    for seed in range(120):
        rng = random.Random(seed)
        cluster = random_cluster(seed, "most-allocated")
        state = cluster.state
        assert state is not None
        for k in range(5):
            pod = random_pod(rng, k)
            nodes = np.array([rng.randrange(len(state)) for _ in range(rng.randint(0, 40))])
            got = livefilters.rejections(state, pod, nodes, cluster.settings.signals)
            want = reference_rejections(state, pod, nodes, cluster.settings.signals)
            assert list(got.items()) == list(want.items())
            seen.update(reason_kind(r.reason) for r in want.values())
    assert set(seen) == set(REASONS.values()), seen  # every check was compared


@pytest.mark.parametrize("policy", policies())
def test_filter_answers_as_the_per_node_filter(policy: str):
    kept = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        cluster = random_cluster(seed, policy)
        for k in range(5):
            pod = random_pod(rng, k)
            names = offered(rng, cluster)
            got = cluster.filter(pod, names)
            want = reference_filter(cluster, pod, names)
            assert got.passing == want.passing
            assert list(got.failed.items()) == list(want.failed.items())
            assert list(got.unresolvable.items()) == list(want.unresolvable.items())
            kept += sum(r.startswith("kept free") for r in want.failed.values())
    if policy == "stowage":
        assert kept  # the policy's own refusal is covered too


@pytest.mark.parametrize("policy", policies())
def test_prioritize_scores_as_the_per_node_prioritize_as_pods_are_assumed(policy: str):
    for seed in SEEDS:
        rng = random.Random(seed)
        fast, slow = random_cluster(seed, policy), random_cluster(seed, policy)
        for k in range(8):
            pod = random_pod(rng, k)
            names = offered(rng, fast)
            # Every call on one cluster is made on the other (the random policy draws).
            got = fast.prioritize(pod, names)
            want = reference_prioritize(slow, pod, names)
            assert list(got.items()) == list(want.items())
            each = fast.prioritize_each(pod, names)
            want = reference_prioritize(slow, pod, names)
            assert each.tolist() == [want[n] for n in names]
            got = fast.prioritize(pod, iter(names))
            want = reference_prioritize(slow, pod, names)
            assert list(got.items()) == list(want.items())
            top = [n for n, s in want.items() if s == MAX_EXTENDER_SCORE]
            assert len(top) <= 1
            if top:  # as the extender does: the pod now counts on the node ranked first
                fast.assume(f"pending-{k}", pod, top[0])
                slow.assume(f"pending-{k}", pod, top[0])


def test_long_name_lists_are_remembered_only_while_they_and_the_nodes_stay_the_same():
    rng = random.Random(1)
    cluster = random_cluster(1, "stowage", nodes=400)
    names = [*sorted(cluster.specs), "unknown-1"]
    same_ends = [names[0], *reversed(names[1:-1]), names[-1]]  # same length, first, last
    pod = PodRequest("ns/p", 1000, GIB, gpus=1, gpu_milli=1000)
    for offer in (names, list(names), same_ends, names, same_ends[:-1], names):
        assert list(cluster.prioritize(pod, offer).items()) == list(
            reference_prioritize(cluster, pod, offer).items()
        )
        assert cluster.filter(pod, offer) == reference_filter(cluster, pod, offer)
    cluster.upsert_node(random_node(rng, "a-node"))  # sorts first: every row moves
    cluster.upsert_node(random_node(rng, "unknown-1"))  # the unknown name becomes known
    for offer in (names, same_ends):
        assert list(cluster.prioritize(pod, offer).items()) == list(
            reference_prioritize(cluster, pod, offer).items()
        )
        assert cluster.filter(pod, offer) == reference_filter(cluster, pod, offer)


def extender_app(served: LiveCluster) -> web.Application:
    """kube-scheduler's extender endpoints over ``served``."""
    app = web.Application()
    app[SERVICES] = Services(
        settings=served.settings,
        clock=served.clock,
        metrics=served.metrics,
        cluster=served,
        authenticator=NoAuth(),
    )
    kube.add_routes(app)
    return app


async def test_the_endpoints_answer_what_the_per_node_code_answers(aiohttp_client: Any):
    """Over HTTP, on a cluster big enough for the remembered name lists, pod after pod."""
    served, reference = (random_cluster(5, "stowage", nodes=300) for _ in range(2))
    client = await aiohttp_client(extender_app(served))
    rng = random.Random(5)
    names = [*sorted(served.specs), "unknown-1"]
    rng.shuffle(names)
    shapes = [("4", "16Gi", 0, {}), ("8", "64Gi", 1, {}), ("2", "8Gi", 0, {GPU_MILLI: "500"})]
    for k in range(12):
        offer = names if k % 3 else rng.sample(names, 280)
        cpu, memory, gpus, annotations = rng.choice(shapes)
        body = {"Pod": pod(cpu, memory, gpus, uid=f"uid-{k}", annotations=annotations)}
        body["NodeNames"] = offer
        request = pod_request(body["Pod"], served.settings.signals.contiguity_threshold_b)

        got = await client.post("/scheduler/filter", json=body)
        want = reference_filter(reference, request, offer)
        passing = set(want.passing)
        ordered = [n for n in offer if n in passing]
        expected = kubewire.filter_reply(ordered, want.failed, want.unresolvable)
        assert json.loads(await got.text()) == expected

        got = await client.post("/scheduler/prioritize", json=body)
        scores = reference_prioritize(reference, request, offer)
        expected = host_priorities((n, scores[n]) for n in offer)
        assert json.loads(await got.text()) == expected
        top = [n for n, s in scores.items() if s == MAX_EXTENDER_SCORE]
        if top:
            reference.assume(f"uid-{k}", request, top[0])
        assert served.held.keys() == reference.held.keys()


@pytest.mark.parametrize("seed", range(4))
async def test_the_filters_pick_is_the_per_node_codes_first_choice(aiohttp_client: Any, seed: int):
    """Filter picking (the shipped setting): the node answered alone is the first offered
    of those the per-node filter passes with the per-node prioritize's best score, and
    with unknown names, partial offers and assumptions pod after pod, it stays so."""
    served, reference = (random_cluster(seed, "stowage", nodes=300, pick=True) for _ in range(2))
    client = await aiohttp_client(extender_app(served))
    rng = random.Random(seed)
    names = [*sorted(served.specs), "unknown-1", "unknown-2"]
    rng.shuffle(names)
    shapes = [
        ("4", "16Gi", 0, {}),
        ("8", "64Gi", 1, {}),
        ("2", "8Gi", 0, {GPU_MILLI: "500"}),
        ("2", "4Gi", 0, {"stowage.io/qos": "batch"}),  # refused where loaded, yet scored
    ]
    picked = 0
    for k in range(16):
        offer = names if k % 3 else rng.sample(names, 280)
        cpu, memory, gpus, annotations = rng.choice(shapes)
        body = {"Pod": pod(cpu, memory, gpus, uid=f"uid-{k}", annotations=annotations)}
        body["NodeNames"] = offer
        request = pod_request(body["Pod"], served.settings.signals.contiguity_threshold_b)

        got = await client.post("/scheduler/filter", json=body)
        want = reference_filter(reference, request, offer)
        passing = set(want.passing)
        scores = reference_prioritize(reference, request, offer)
        best = max((scores[n] for n in offer if n in passing), default=0)
        ordered = [n for n in offer if n in passing]
        if len(ordered) >= 2 and best > 0:
            ordered = [next(n for n in offer if n in passing and scores[n] == best)]
            picked += 1
        expected = kubewire.filter_reply(ordered, want.failed, want.unresolvable)
        assert json.loads(await got.text()) == expected
        if len(ordered) == 1:
            reference.assume(f"uid-{k}", request, ordered[0])
        assert served.held.keys() == reference.held.keys()
    assert picked  # the pick was compared, not only whole lists


def test_prioritize_of_nothing_known_is_all_zero(clock: FakeClock):
    cluster = LiveCluster(CoordinatorSettings(), clock, CoordinatorMetrics())
    pod = PodRequest("ns/p", 1000, GIB)
    assert cluster.prioritize_each(pod, ["a", "b", "a"]).tolist() == [0, 0, 0]
    assert cluster.prioritize(pod, ["a", "b", "a"]) == {"a": 0, "b": 0}
    assert cluster.filter(pod, ["a", "b"]).passing == ["a", "b"]


def host_priorities(scores: Any) -> list[dict[str, Any]]:
    """``HostPriorityList`` as kube-scheduler reads it, built the plain way."""
    return [{"Host": host, "Score": int(score)} for host, score in scores]


def written(writer: kubewire.HostPriorityWriter, names: list[str], scores: list[int]) -> Any:
    """What the writer writes, as JSON; the reply must be exactly ``host_priorities``'."""
    reply = writer.write(names, np.array(scores, dtype=np.int64))
    assert reply == reply.strip() and reply.isascii()
    return json.loads(reply)


@pytest.mark.parametrize(
    "names",
    [
        [],
        ["node-a"],
        ["node-a", "node-b", "node-a"],
        ['quo"te', "back\\slash", "tab\there", "ünïcødé", "emoji 🚀", "\x00\x1f", ""],
    ],
)
def test_the_prioritize_reply_reads_as_host_priorities(names: list[str]):
    rng = random.Random(len(names))
    scores = [rng.randint(0, MAX_EXTENDER_SCORE) for _ in names]
    writer = kubewire.HostPriorityWriter()
    assert written(writer, names, scores) == host_priorities(zip(names, scores, strict=True))
    if names:
        scores[-1] = MAX_EXTENDER_SCORE
        scores[0] = 0
        assert written(writer, names, scores) == [
            {"Host": n, "Score": s} for n, s in zip(names, scores, strict=True)
        ]


def test_the_reply_writer_reuses_a_list_of_names_only_when_it_is_the_same():
    rng = random.Random(3)
    writer = kubewire.HostPriorityWriter()
    names = [f"node-{k}" for k in range(300)]
    others = [*names[:-1], 'quo"te']  # same length and first name
    for offer in (names, list(names), others, names, names[:-1], names, [], ["a"], names):
        for _ in range(2):
            scores = [rng.randint(0, MAX_EXTENDER_SCORE) for _ in offer]
            assert written(writer, offer, scores) == host_priorities(
                zip(offer, scores, strict=True)
            )


@pytest.mark.parametrize("bad", [[3, 11], [3, -1], [2.5, 3.0], [True, False]])
def test_the_prioritize_reply_refuses_scores_outside_0_to_10(bad: list[Any]):
    with pytest.raises(ValueError, match="outside 0..10"):
        kubewire.HostPriorityWriter().write(["a", "b"], np.array(bad))
    with pytest.raises(ValueError, match="2 names but 1 scores"):
        kubewire.HostPriorityWriter().write(["a", "b"], np.array([1]))


def test_the_args_reader_reuses_the_names_it_read_last_only_when_they_are_the_same():
    reader = kubewire.ExtenderArgsReader()
    pod = {"metadata": {"name": "p"}}

    def read(names: Any, key: str = "NodeNames") -> kubewire.ExtenderArgs:
        return reader.read(json.dumps({"Pod": pod, key: names}).encode())

    first = read(["a", "b", "a"])
    assert first.names == ["a", "b", "a"] and first.pod == pod and first.nodes is None
    assert read(["a", "b", "a"]).names is first.names  # the same bytes: the same list
    assert read(["a", "b", "a"], key="nodenames").names is first.names
    assert read(["a", "b"]).names == ["a", "b"]
    assert read(["a", "b", "a"]).names == ["a", "b", "a"]
    assert read(["a", "c", "a"]).names == ["a", "c", "a"]  # as long, other bytes
    with pytest.raises(gojson.WireError, match=r"NodeNames\[1\]: expected a string, got number"):
        read(["a", 1])
    with pytest.raises(gojson.WireError, match="neither NodeNames nor Nodes"):
        read(None)
    with pytest.raises(gojson.WireError, match="body: expected an object, got array"):
        reader.read(b"[1]")
    for bad in (b"{", b'{"Pod": NaN}', b'{"Pod": {}} trailing', b"\xff"):
        with pytest.raises(gojson.WireError, match="body is not JSON"):
            reader.read(bad)


def test_node_names_are_taken_as_sent_or_refused_by_position():
    body = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["a", "b", "a"]}
    assert kubewire.decode_extender_args(body).names == ["a", "b", "a"]
    with pytest.raises(gojson.WireError, match=r"NodeNames\[1\]: expected a string, got number"):
        kubewire.decode_extender_args({**body, "NodeNames": ["a", 1]})
