"""Each baseline's score on hand-built nodes, the expected numbers worked out by hand from
the reference formulas (integer truncation included), and the device choice rules."""

from __future__ import annotations

import numpy as np
import pytest

from coordinator.scoring.base import best_fit_devices
from coordinator.scoring.engine import Engine
from coordinator.scoring.fragmentation import Fragmentation, Shape
from coordinator.scoring.policies.best_fit import BestFit
from coordinator.scoring.policies.dot_product import DotProduct
from coordinator.scoring.policies.fgd import Fgd, after_take
from coordinator.scoring.policies.gpu_clustering import GpuClustering
from coordinator.scoring.policies.gpu_packing import GpuPacking
from coordinator.scoring.registry import PolicyContext, build_policy
from coordinator.state.cluster import Placement
from tests.coordinator.scoring.builders import GIB, cluster, occupy, pod

# ------------------------------------------------------------ device choice


@pytest.mark.parametrize(
    ("free", "count", "milli", "expected"),
    [
        ([700, 300, 300, 1000], 1, 300, (1,)),  # least free that fits, lowest index on ties
        ([700, 300, 300, 1000], 1, 301, (0,)),  # 300s no longer fit: 700 is the tightest
        ([1000, 999, 1000, 1000], 1, 999, (1,)),
        ([500, 1000, 200, 1000], 1, 1000, (1,)),  # whole GPU: lowest-index free one
        ([1000, 500, 1000, 1000], 2, 1000, (0, 2)),
        ([400, 600, 1000, 500], 2, 500, (1, 2)),  # several shared slices: lowest index
        ([1000, -1, -1], 1, 1000, (0,)),  # padding is never a device
        ([1000, 1000], 0, 0, ()),
    ],
)
def test_best_fit_devices(free, count, milli, expected):
    assert best_fit_devices(np.array(free, dtype=np.int64), count, milli) == expected


@pytest.mark.parametrize(
    "name", ["best-fit", "dot-product", "gpu-clustering", "gpu-packing", "least-allocated"]
)
def test_best_fit_device_rule_is_used_by_the_baselines(name):
    state = cluster((64000, 64 * GIB, 4))
    occupy(state, 0, gpu_used=(300, 700, 700, 0))  # free 700, 300, 300, 1000
    policy = build_policy(name)
    engine = Engine(state, policy)
    assert engine.place(pod(100, gpus=1, milli=250)) == Placement(0, (1,))
    assert engine.place(pod(100, gpus=1, milli=1000)) == Placement(0, (3,))
    assert engine.place(pod(100, gpus=1, milli=400)) == Placement(0, (0,))


# ----------------------------------------------------------------- best-fit


def test_best_fit_score():
    state = cluster((64000, 64 * GIB, 4), (96000, 64 * GIB, 8))
    occupy(state, 0, cpu=16000, gpu_used=(500,))  # c = 48000, R = 3500
    p = pod(8000, gpus=1)
    # node 0: 1 − (0.5·40000/128000 + 0.5·2500/8000) = 1 − 0.3125 → 68
    assert BestFit().score(state, 0, p) == 68
    # node 1: 1 − (0.5·88000/128000 + 0.5·7000/8000) = 1 − 0.78125 → 21
    assert BestFit().score(state, 1, p) == 21
    assert Engine(state, BestFit()).place(p) == Placement(0, (1,))


def test_best_fit_cpu_only_pod_counts_all_free_gpu():
    state = cluster((32000, 64 * GIB, 2), (32000, 64 * GIB))
    p = pod(16000)
    # node 0: 1 − (0.5·16000/128000 + 0.5·2000/8000) = 1 − 0.1875 → 81
    assert BestFit().score(state, 0, p) == 81
    # node 1: 1 − 0.0625 → 93
    assert BestFit().score(state, 1, p) == 93


# ------------------------------------------------------------------ dot-product


def test_dot_product_score_prefers_the_smallest_dot_product():
    state = cluster((64000, 64 * GIB, 4), (96000, 64 * GIB, 8))
    occupy(state, 0, cpu=16000, gpu_used=(500,))  # c = 48000, R = 3500
    p = pod(8000, gpus=1)
    # node 0: (0.375·0.0625 + 0.4375·0.125)/2 = 0.0390625 → 100·0.9609375 → 96
    assert DotProduct().score(state, 0, p) == 96
    # node 1: (0.75·0.0625 + 1·0.125)/2 = 0.0859375 → 91.40625 → 91
    assert DotProduct().score(state, 1, p) == 91
    assert Engine(state, DotProduct()).choose(p).node == 0


def test_dot_product_cpu_only_pod():
    state = cluster((128000, 64 * GIB, 8))
    # (1·0.5 + 1·0)/2 = 0.25 → 75
    assert DotProduct().score(state, 0, pod(64000)) == 75


# ---------------------------------------------------------------- gpu-clustering


def clustering_state():
    state = cluster(
        (64000, 64 * GIB, 4),  # only share-gpu pods
        (64000, 64 * GIB, 4),  # share-gpu and 1-gpu pods
        (64000, 64 * GIB, 8),  # empty
        (64000, 64 * GIB, 2),  # a CPU-only pod, no GPU pod
        (64000, 64 * GIB, 4),  # only 2-gpu pods
    )
    occupy(state, 0, gpu_used=(300,), tags=["share-gpu"])  # R = 3700
    occupy(state, 1, gpu_used=(300, 1000), tags=["share-gpu", "1-gpu"])  # R = 2700
    occupy(state, 3, cpu=4000)  # R = 2000
    occupy(state, 4, gpu_used=(1000, 1000), tags=["2-gpu"])  # R = 2000
    return state


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        # bases: 25·4300//8000 = 13, 25·5300//8000 = 16, 0, 25·6000//8000 = 18, 18
        (pod(100, gpus=1, milli=200), [13 + 75, 16 + 50, 0 + 25, 18 + 25, 18]),
        (pod(100, gpus=1), [13, 16 + 50, 0 + 25, 18 + 25, 18]),
        (pod(100, gpus=2), [13, 16, 0 + 25, 18 + 25, 18 + 75]),
        (pod(100), [0, 0, 0, 0, 0]),
    ],
)
def test_gpu_clustering_score(p, expected):
    state = clustering_state()
    assert [GpuClustering().score(state, i, p) for i in range(5)] == expected


def test_gpu_clustering_tags_follow_placements_and_releases():
    state = cluster((64000, 64 * GIB, 8), (64000, 64 * GIB, 8))
    engine = Engine(state, GpuClustering())
    share = pod(100, gpus=1, milli=500)
    first = engine.place(share)
    assert first == Placement(0, (0,))  # tie at 25 → rank
    # node 0 now hosts only share-gpu: 25·(8000−7500)//8000 = 1, + 75
    assert GpuClustering().score(state, 0, share) == 76
    whole = pod(100, gpus=1)
    # node 0 hosts only another kind: 1 < node 1's empty 25
    assert engine.place(whole) == Placement(1, (0,))
    state.release(first, share.cpu_m, share.mem_b, share.gpu_milli, share.tag)
    # node 0 hosts no GPU pod again: 0 + 25
    assert GpuClustering().score(state, 0, share) == 25


def test_gpu_clustering_base_truncates_toward_zero_like_the_reference():
    # 10 free GPUs: 25·(8000 − 10000)/8000 = −6.25, which the reference's integer
    # division truncates to −6 (Python's // would give −7); empty node → −6 + 25 = 19
    state = cluster((64000, 64 * GIB, 10))
    assert GpuClustering().score(state, 0, pod(100, gpus=1)) == 19


# ----------------------------------------------------------------- gpu-packing


def test_gpu_packing_untouched_nodes_prefer_fewer_gpus():
    state = cluster((64000, 64 * GIB, 8), (64000, 64 * GIB, 2), (64000, 64 * GIB, 4))
    p = pod(100, gpus=1, milli=300)
    # max(33 − F, F): 8 → 25, 2 → 31, 4 → 29
    assert [GpuPacking().score(state, i, p) for i in range(3)] == [25, 31, 29]
    assert Engine(state, GpuPacking()).choose(p).node == 1


def test_gpu_packing_fresh_gpus_on_a_node_in_use():
    state = cluster((64000, 64 * GIB, 4))
    occupy(state, 0, gpu_used=(600,))  # free 400, 1000, 1000, 1000
    # the first k fitting GPUs in ascending free order include fully free ones
    assert GpuPacking().score(state, 0, pod(100, gpus=1)) == 49  # max(50 − 1, 33)
    assert GpuPacking().score(state, 0, pod(100, gpus=2)) == 48
    assert GpuPacking().score(state, 0, pod(100, gpus=3)) == 47
    assert GpuPacking().score(state, 0, pod(100, gpus=1, milli=500)) == 49  # 400 too small


def test_gpu_packing_fresh_gpu_count_floor_is_33():
    state = cluster((64000, 64 * GIB, 20))
    occupy(state, 0, gpu_used=(1,))
    # 19 fully free devices used: max(50 − 19, 33) = 33
    assert GpuPacking().score(state, 0, pod(100, gpus=19)) == 33


def test_gpu_packing_shared_gpus_only():
    state = cluster((64000, 64 * GIB, 4))
    occupy(state, 0, gpu_used=(545, 1, 0, 0))  # free 455, 999, 1000, 1000
    # one slice of 300: tightest is 455 → 100 − ⌊455·100/1000⌋/10 = 100 − 45//10 = 96
    assert GpuPacking().score(state, 0, pod(100, gpus=1, milli=300)) == 96
    # two slices of 400: 455 and 999 → 100 − (45 + 99)//10 = 100 − 14 = 86
    assert GpuPacking().score(state, 0, pod(100, gpus=2, milli=400)) == 86
    # a slice of 999: the 999 device → 100 − 99//10 = 91
    assert GpuPacking().score(state, 0, pod(100, gpus=1, milli=999)) == 91


def test_gpu_packing_shared_floor_is_50_and_cpu_only_is_0():
    state = cluster((64000, 64 * GIB, 8))
    occupy(state, 0, gpu_used=(1,) * 8)  # every device at 999
    # 100 − (8·99)//10 = 100 − 79 = 21 → max(21, 50)
    assert GpuPacking().score(state, 0, pod(100, gpus=8, milli=10)) == 50
    assert GpuPacking().score(state, 0, pod(100)) == 0


# ------------------------------------------------------ least/most allocated


def alloc_state():
    state = cluster((4000, 8000, 2), (4000, 8000))
    occupy(state, 0, cpu=1000, mem=2000, gpu_used=(500,))
    occupy(state, 1, cpu=1000, mem=2000)
    return state


def test_least_allocated_integer_arithmetic():
    state = alloc_state()
    p = pod(500, 3000)
    # cpu (4000 − 1500)·100//4000 = 62, memory (8000 − 5000)·100//8000 = 37 → 99//2 = 49
    assert build_policy("least-allocated").score(state, 0, p) == 49
    # weights 3:1 → (62·3 + 37)//4 = 223//4 = 55
    weighted = build_policy("least-allocated", {"resources": {"cpu": 3, "memory": 1}})
    assert weighted.score(state, 0, p) == 55


def test_most_allocated_integer_arithmetic():
    state = alloc_state()
    p = pod(500, 3000)
    # cpu 1500·100//4000 = 37, memory 5000·100//8000 = 62 → 99//2 = 49
    assert build_policy("most-allocated").score(state, 0, p) == 49
    weighted = build_policy("most-allocated", {"resources": {"cpu": 3, "memory": 1}})
    assert weighted.score(state, 0, p) == 43  # (37·3 + 62)//4 = 173//4


def test_allocated_gpu_weight_counts_milli_and_skips_nodes_without_gpus():
    state = alloc_state()
    args = {"resources": {"cpu": 1, "memory": 1, "nvidia.com/gpu": 2}}
    p = pod(500, 3000, gpus=1, milli=300)
    # GPU requested 500 + 300 of 2000: least (1200·100//2000) = 60, most 800·100//2000 = 40
    assert build_policy("least-allocated", args).score(state, 0, p) == (62 + 37 + 2 * 60) // 4
    assert build_policy("most-allocated", args).score(state, 0, p) == (37 + 62 + 2 * 40) // 4
    # node 1 has no GPU: the resource is skipped, not scored 0
    assert build_policy("least-allocated", args).score(state, 1, pod(500, 3000)) == 49
    assert build_policy("most-allocated", args).score(state, 1, pod(500, 3000)) == 49


def test_allocated_scalar_resource_the_pod_does_not_request_is_skipped():
    # kube-scheduler returns (0, 0) for an extended resource the pod does not request, so
    # a CPU-only pod is scored on CPU and memory alone, even where the node has GPUs
    state = alloc_state()
    args = {"resources": {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}}
    assert build_policy("least-allocated", args).score(state, 0, pod(500, 3000)) == 49
    assert build_policy("most-allocated", args).score(state, 0, pod(500, 3000)) == 49


def test_allocated_over_capacity_requests():
    state = alloc_state()
    p = pod(5000, 2000)  # CPU beyond capacity (scored directly; the filter would refuse it)
    # least: cpu 0, memory (8000 − 4000)·100//8000 = 50 → 25
    assert build_policy("least-allocated").score(state, 1, p) == 25
    # most: cpu capped at 100, memory 50 → 75
    assert build_policy("most-allocated").score(state, 1, p) == 75


def test_least_spreads_and_most_packs():
    state = cluster((4000, 8000), (4000, 8000))
    occupy(state, 0, cpu=2000, mem=2000)
    p = pod(500, 500)
    assert Engine(state, build_policy("least-allocated")).choose(p).node == 1
    assert Engine(state, build_policy("most-allocated")).choose(p).node == 0


# ------------------------------------------------------------- volcano-binpack


def volcano_state():
    state = cluster((4000, 8000, 2), (4000, 8000))
    occupy(state, 0, cpu=1000, mem=2000, gpu_used=(500,))
    occupy(state, 1, cpu=1000, mem=2000)
    return state


def test_volcano_binpack_default_weights_ignore_gpu():
    state = volcano_state()
    p = pod(2000, 1000, gpus=1, milli=300)
    # cpu 3000/4000 = 0.75, memory 3000/8000 = 0.375 → 100·(1.125/2) = 56.25
    assert build_policy("volcano-binpack").score(state, 0, p) == pytest.approx(56.25)


def test_volcano_binpack_weights():
    state = volcano_state()
    p = pod(2000, 1000, gpus=1, milli=300)
    args = {"weight": 10, "resources": {"cpu": 5, "memory": 1, "nvidia.com/gpu": 2}}
    # (5·0.75 + 1·0.375 + 2·800/2000)/8 = 4.925/8 = 0.615625 → ×100×10
    assert build_policy("volcano-binpack", args).score(state, 0, p) == pytest.approx(615.625)


def test_volcano_binpack_skips_resources_the_pod_does_not_request():
    state = volcano_state()
    # memory 0 is not requested: cpu alone, 2000/4000 → 50
    assert build_policy("volcano-binpack").score(state, 0, pod(1000, 0)) == pytest.approx(50.0)


def test_volcano_binpack_zero_capacity_counts_its_weight_but_scores_nothing():
    state = volcano_state()
    args = {"resources": {"cpu": 1, "nvidia.com/gpu": 2}}
    # node 1 has no GPU: cpu 3000/4000·1, GPU 0 with weight 2 → 0.75/3 → 25
    p = pod(2000, 0, gpus=1, milli=300)
    assert build_policy("volcano-binpack", args).score(state, 1, p) == pytest.approx(25.0)


def test_volcano_binpack_any_resource_not_fitting_scores_the_node_zero():
    state = volcano_state()
    # memory 2000 + 6500 > 8000 while cpu would fit
    assert build_policy("volcano-binpack").score(state, 0, pod(1000, 6500)) == 0
    # the GPU too, when weighted: used 500 + 2·800 > 2000
    args = {"resources": {"cpu": 1, "memory": 1, "nvidia.com/gpu": 1}}
    assert build_policy("volcano-binpack", args).score(state, 0, pod(10, 10, 2, 800)) == 0
    # but unweighted it is not looked at: (1010/4000 + 2010/8000)/2 → 25.1875
    assert build_policy("volcano-binpack").score(state, 0, pod(10, 10, 2, 800)) == pytest.approx(
        25.1875
    )


def test_volcano_binpack_weight_zero_scores_every_node_zero():
    state = volcano_state()
    policy = build_policy("volcano-binpack", {"weight": 0})
    assert [policy.score(state, i, pod(1000, 1000)) for i in range(2)] == [0, 0]


# ----------------------------------------------------------------------- fgd

ONE_GPU = Shape(1000, 1000, 1)


def fgd_with(shapes):
    return Fgd(Fragmentation(shapes))


def test_fgd_zero_delta_scores_50():
    state = cluster((8000, 64 * GIB, 2))
    policy = fgd_with([(ONE_GPU, 1.0)])
    # before: the shape fits, no device below 1000 → 0; after [0, 1000]: still 0 → Δ = 0
    assert policy.score(state, 0, pod(1000, gpus=1)) == 50
    # a CPU-only typical shape: F = R before and after a CPU-only pod → Δ = 0
    assert fgd_with([(Shape(1000, 0, 0), 1.0)]).score(state, 0, pod(500)) == 50


def test_fgd_shared_pod_tries_each_device():
    state = cluster((8000, 64 * GIB, 4))
    occupy(state, 0, gpu_used=(700,))  # free 300, 1000, 1000, 1000; F before = 300
    policy = fgd_with([(ONE_GPU, 1.0)])
    p = pod(1000, gpus=1, milli=300)
    # on device 0: F after 0, Δ = −300 → ⌊100/(1 + e^−0.3)⌋ = ⌊57.44⌋ = 57
    # on device 1..3: F after 300 + 700, Δ = 700 → ⌊100/(1 + e^0.7)⌋ = ⌊33.18⌋ = 33
    assert policy.score(state, 0, p) == 57
    assert policy.devices(state, 0, p) == (0,)
    explained = policy.explain(state, 0, p)
    assert explained["frag_before_milli"] == 300
    assert explained["frag_after_milli"] == 0


def test_fgd_shared_pod_first_device_wins_equal_scores():
    state = cluster((8000, 64 * GIB, 4))
    occupy(state, 0, gpu_used=(0, 500, 0, 500))  # free 1000, 500, 1000, 500
    policy = fgd_with([(Shape(0, 500, 1), 1.0)])
    # before: every device ≥ 500, F = 0. A 100 slice on device 1 or 3 leaves 400 < 500:
    # Δ = 400 → 40; on device 0 or 2 leaves 900: Δ = 0 → 50. First such device: 0
    assert policy.score(state, 0, pod(0, gpus=1, milli=100)) == 50
    assert policy.devices(state, 0, pod(0, gpus=1, milli=100)) == (0,)


def test_fgd_whole_and_multi_gpu_pods():
    state = cluster((8000, 64 * GIB, 4))
    occupy(state, 0, gpu_used=(0, 500, 0, 550))  # free 1000, 500, 1000, 450
    policy = fgd_with([(Shape(0, 600, 1), 1.0)])
    # before: devices < 600 are fragments: 500 + 450 = 950
    p = pod(0, gpus=2, milli=400)
    # scored as taking the fullest fitting devices (450 and 500) → 50, 1000, 1000, 100 free:
    # F after = 150 → Δ = −800 → ⌊100/(1 + e^−0.8)⌋ = ⌊68.99⌋ = 68
    assert after_take((1000, 500, 1000, 450), 2, 400) == (1000, 100, 1000, 50)
    assert policy.score(state, 0, p) == 68
    # bound to the lowest-index devices that fit
    assert policy.devices(state, 0, p) == (0, 1)
    whole = pod(0, gpus=1)
    # after [0, 500, 1000, 450]: F = 950 → Δ = 0 → 50; bound to device 0
    assert policy.score(state, 0, whole) == 50
    assert policy.devices(state, 0, whole) == (0,)


def test_fgd_cpu_exhaustion_makes_the_whole_node_a_fragment():
    state = cluster((3000, 64 * GIB, 2))
    policy = fgd_with([(ONE_GPU, 1.0)])
    # a CPU pod leaving 500 < 1000 CPU: F goes 0 → 2000 → ⌊100/(1 + e^2)⌋ = ⌊11.92⌋ = 11
    assert policy.score(state, 0, pod(2500)) == 11
    # leaving exactly 1000: still fits → 50
    assert policy.score(state, 0, pod(2000)) == 50


def test_fgd_prefers_the_node_it_fragments_least():
    state = cluster((8000, 64 * GIB, 2), (8000, 64 * GIB, 2))
    occupy(state, 1, gpu_used=(800,))  # node 1: free 200, 1000 → F = 200
    policy = fgd_with([(ONE_GPU, 1.0)])
    p = pod(1000, gpus=1, milli=200)
    # node 0: Δ = +800 → ⌊100/(1 + e^0.8)⌋ = 31; node 1 device 0: Δ = −200 → 54
    assert policy.score(state, 0, p) == 31
    assert policy.score(state, 1, p) == 54
    assert Engine(state, policy).place(p) == Placement(1, (0,))


def test_fgd_built_from_the_registry_uses_the_context_workload():
    workload = [pod(1000, gpus=1)] * 19 + [pod(0, gpus=1, milli=500)]
    state = cluster((8000, 64 * GIB, 1))
    p = pod(0, gpus=1, milli=400)
    # coverage 0.95: only the 1-GPU shape; F after the slice = 600 → Δ = 600 → 35
    assert build_policy("fgd", None, PolicyContext(workload=workload)).score(state, 0, p) == 35
    # coverage 1: weights 19/20 and 1/20; the 500 shape still fits the 600 left:
    # Δ = 0.95·600 = 570 → ⌊100/(1 + e^0.57)⌋ = ⌊36.12⌋ = 36
    full = build_policy("fgd", {"coverage": 1.0}, PolicyContext(workload=workload))
    assert full.score(state, 0, p) == 36


# -------------------------------------------------------------------- random


def test_random_picks_every_feasible_node_and_never_an_infeasible_one():
    state = cluster(
        (8000, 8 * GIB, 2),
        (8000, 8 * GIB, 2),
        (500, 8 * GIB, 2),  # too little CPU
        (8000, 8 * GIB, 2),
        (8000, 8 * GIB),  # no GPU
        (8000, 8 * GIB, 2),
    )
    engine = Engine(state, build_policy("random", None, PolicyContext(seed=3)))
    p = pod(1000, gpus=1, milli=500)
    chosen = [engine.choose(p).node for _ in range(300)]
    assert set(chosen) == {0, 1, 3, 5}
    # not stuck on the rank order: no node takes more than half of the draws
    assert max(chosen.count(i) for i in {0, 1, 3, 5}) < 150


def test_random_shared_device_is_any_that_fits():
    state = cluster((8000, 8 * GIB, 4))
    occupy(state, 0, gpu_used=(0, 800, 0, 0))  # device 1 has 200 free
    engine = Engine(state, build_policy("random", None, PolicyContext(seed=5)))
    devices = {engine.choose(pod(100, gpus=1, milli=500)).devices for _ in range(200)}
    assert devices == {(0,), (2,), (3,)}
    # whole GPUs: lowest-index free ones
    assert engine.choose(pod(100, gpus=2)).devices == (0, 2)


def test_random_is_repeatable_per_seed():
    def draws(seed):
        state = cluster(*[(8000, 8 * GIB, 2)] * 8)
        engine = Engine(state, build_policy("random", None, PolicyContext(seed=seed)))
        return [engine.place(pod(100, gpus=1, milli=100)) for _ in range(30)]

    assert draws(11) == draws(11)
    assert draws(11) != draws(12)
