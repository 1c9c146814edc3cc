"""The limit: on hand-built clusters whose best packing is worked out by hand, and against
an exhaustive search on random tiny ones, the bound never exceeds what a placement can
reach; each constraint family has a case that needs it."""

from __future__ import annotations

import itertools
import random

import pytest

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import bound

GIB = 2**30


def node(name: str, gpus: int, cpu: int = 64_000, mem: int = 64 * GIB, model: str = "A"):
    return NodeSpec(name, cpu, mem, gpus, model)


def gpu_pod(milli: int, gpus: int = 1, cpu: int = 1_000, mem: int = GIB, models=()):
    return PodRequest("p", cpu, mem, gpus, milli, frozenset(models))


def best_by_search(nodes: list[NodeSpec], pods: list[PodRequest]) -> int:
    """The most GPU milli any placement of a subset of ``pods`` allocates, by trying every
    node and device choice for every pod."""
    free = [[1000] * n.gpus for n in nodes]
    cpu = [n.cpu_m for n in nodes]
    mem = [n.mem_b for n in nodes]

    def search(k: int) -> int:
        if k == len(pods):
            return 0
        p = pods[k]
        best = search(k + 1)  # not placed
        for i, n in enumerate(nodes):
            if p.gpu_models and n.gpu_model not in p.gpu_models:
                continue
            if cpu[i] < p.cpu_m or mem[i] < p.mem_b:
                continue
            for devices in itertools.combinations(range(n.gpus), p.gpus):
                if any(free[i][d] < p.gpu_milli for d in devices):
                    continue
                cpu[i] -= p.cpu_m
                mem[i] -= p.mem_b
                for d in devices:
                    free[i][d] -= p.gpu_milli
                best = max(best, p.gpu_total_milli + search(k + 1))
                cpu[i] += p.cpu_m
                mem[i] += p.mem_b
                for d in devices:
                    free[i][d] += p.gpu_milli
        return best

    return search(0)


# (nodes, pods, the most GPU milli the relaxation allows, the best placement by hand)
CASES = {
    # two shares above half a GPU cannot share one: without the j = 1 count, 1000
    "two 0.6 shares, one GPU": ([node("n", 1)], [gpu_pod(600)] * 2, 600, 600),
    # three shares above a third: at most two per GPU (j = 2), 800; milli alone gives 1000
    "three 0.4 shares, one GPU": ([node("n", 1)], [gpu_pod(400)] * 3, 800, 800),
    # 0.85 and 0.3 share: milli alone allows 1 000 (all the 0.3, 700/850 of the 0.85);
    # u_α with α = 151 counts the 0.85 as a whole GPU: 1000·x₁ + 300·x₂ ≤ 1000 → 595 + 300
    "0.85 and 0.3 on one GPU": ([node("n", 1)], [gpu_pod(850), gpu_pod(300)], 895, 850),
    # three whole 3-GPU pods on an 8-GPU node: ⌊8/3⌋ = 2 of them (k = 2, 3)
    "three 3-GPU pods, 8 GPUs": ([node("n", 8)], [gpu_pod(1000, 3)] * 3, 6000, 6000),
    # pods accept model A only: the B node is no use to them
    "model constraint": (
        [node("a", 1), node("b", 1, model="B")],
        [gpu_pod(1000, models={"A"})] * 2,
        1000,
        1000,
    ),
    # a 4-GPU pod needs a node with 4 GPUs: two 2-GPU nodes hold none
    "GPUs per node": ([node("a", 2), node("b", 2)], [gpu_pod(1000, 4)], 0, 0),
    # CPU: 4 000 m per node, pods of 900 m (below a quarter: no item count applies) hold
    # 40/9 pods by CPU total, 444 milli; four fit
    "CPU capacity": ([node("n", 1, cpu=4_000)], [gpu_pod(100, cpu=900)] * 5, 4000 / 9, 400),
    # pods above half the node's CPU: one per node, though 4/3 fit by CPU total
    "CPU above half": ([node("n", 1, cpu=4_000)], [gpu_pod(500, cpu=3_000)] * 2, 500, 500),
    # the same for memory
    "memory above half": ([node("n", 1, mem=4 * GIB)], [gpu_pod(500, mem=3 * GIB)] * 2, 500, 500),
    "memory capacity": (
        [node("n", 1, mem=4 * GIB)],
        [gpu_pod(100, mem=900 * 2**20)] * 5,
        100 * 4096 / 900,
        400,
    ),
    # a pod larger than any node in CPU or memory is never placed
    "too big a pod": ([node("n", 2, cpu=4_000)], [gpu_pod(1000, cpu=5_000)], 0, 0),
    # each pod once: one 0.5 share alone on a GPU
    "demand": ([node("n", 1)], [gpu_pod(500)], 500, 500),
    # CPU-only pods take nothing from the bound (a policy may refuse them)
    "CPU-only pods": (
        [node("n", 1, cpu=4_000)],
        [PodRequest("c", 4_000, 0), gpu_pod(1000)],
        1000,
        1000,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hand_built_cases(case):
    nodes, pods, relaxed, best = CASES[case]
    assert best_by_search(nodes, list(pods)) == best  # the hand value, checked by search
    assert bound.max_allocation(nodes, pods) == pytest.approx(relaxed, abs=1e-6)
    assert relaxed >= best


def test_never_below_the_best_placement_on_random_tiny_clusters():
    rng = random.Random(7)
    shares = [100, 200, 250, 300, 400, 450, 500, 600, 700, 810, 900, 1000]
    for _ in range(60):
        nodes = [
            node(f"n{i}", rng.randint(1, 3), rng.choice([4_000, 8_000]), model=rng.choice("AB"))
            for i in range(2)
        ]
        pods = []
        for _ in range(rng.randint(1, 5)):
            milli = rng.choice(shares)
            gpus = rng.choice([1, 1, 2, 3]) if milli == 1000 else 1
            models = rng.choice([(), (), ("A",), ("B",)])
            pods.append(gpu_pod(milli, gpus, rng.choice([500, 2_000, 3_000]), models=models))
        assert bound.max_allocation(nodes, pods) >= best_by_search(nodes, pods) - 1e-6


def test_limit_takes_the_pods_arrived_by_the_last_event_at_x():
    """6 GPUs, so 1 % = 60 milli: ten 0.6 shares arrive at x = 10, 20 … 100; then 0.4
    shares that would fill every GPU. At x = 100 only the ten 0.6 shares have arrived, one
    per GPU: 3 600 milli at most, U ≥ 40 %."""
    nodes = [node(f"n{i}", 1) for i in range(6)]
    pods = [gpu_pod(600)] * 10 + [gpu_pod(400)] * 10
    assert bound.limit(nodes, pods, 100) == pytest.approx(40.0)
    assert bound.limit(nodes, pods, 90) == pytest.approx(100 - 100 * 3_600 / 6_000)  # 9 arrived
    # x = 95: no event at 94, 95 or 96 (x moves by 10 per pod): nothing to bound
    assert bound.limit(nodes, pods, 95) is None
    # x = 110: the first 0.4 share has come (6 400 milli arrived): 3 600 + 400
    assert bound.limit(nodes, pods, 107) == pytest.approx(100 - 100 * 4_000 / 6_000)
