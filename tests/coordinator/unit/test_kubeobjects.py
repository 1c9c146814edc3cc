from __future__ import annotations

import math

import pytest

from coordinator.state.kubeobjects import ObjectError, node_spec, pod_request

GIB, MIB = 2**30, 2**20


def pod(requests=None, limits=None, annotations=None, labels=None, qos=None):
    body = {
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {},
                     "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests or {},
                                                             "limits": limits or {}}}]},
    }  # fmt: skip
    if qos:
        body["status"] = {"qosClass": qos}
    return body


def test_node_spec_from_allocatable_and_labels():
    spec = node_spec({
        "metadata": {"name": "g1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}},
        "status": {"capacity": {"cpu": "64"}, "allocatable": {"cpu": "63500m", "memory": "500Gi",
                                                              "nvidia.com/gpu": "8"}},
    })  # fmt: skip
    assert (spec.name, spec.cpu_m, spec.mem_b, spec.gpus, spec.gpu_model) == (
        "g1",
        63_500,
        500 * GIB,
        8,
        "NVIDIA-H100",
    )
    with pytest.raises(ObjectError, match="g2"):
        node_spec({"metadata": {"name": "g2"}, "status": {"allocatable": {"cpu": "lots"}}})
    with pytest.raises(ObjectError, match="metadata.name"):
        node_spec({"status": {}})


def test_whole_and_shared_gpu_pods():
    whole = pod(requests={"cpu": "4", "memory": "8Gi"}, limits={"nvidia.com/gpu": "2"})
    r = pod_request(whole, 512 * MIB)
    assert (r.cpu_m, r.mem_b, r.gpus, r.gpu_milli, r.name) == (4000, 8 * GIB, 2, 1000, "ns/p")
    shared = pod(
        requests={"cpu": "1"},
        annotations={"stowage.io/gpu-milli": "250", "stowage.io/gpu-models": "A100|H100"},
    )
    r = pod_request(shared, 512 * MIB)
    assert (r.gpus, r.gpu_milli, r.gpu_models) == (1, 250, frozenset({"A100", "H100"}))
    with pytest.raises(ObjectError, match="gpu-milli"):
        pod_request(pod(annotations={"stowage.io/gpu-milli": "1500"}), 0)


def test_a_pods_contiguity_need_is_never_below_the_threshold():
    """Applied once, here: the filter and the policies read the one number."""
    huge = pod(
        requests={"cpu": "2", "hugepages-2Mi": "256Mi", "memory": "2Gi"},
        limits={"cpu": "2", "hugepages-2Mi": "256Mi", "memory": "2Gi"},
    )
    assert pod_request(huge, 512 * MIB).contiguous_b == 512 * MIB
    assert pod_request(huge, 0).contiguous_b == 256 * MIB
    sized = pod(annotations={"stowage.io/needs-contiguous-memory": "2Gi"})
    assert pod_request(sized, 512 * MIB).contiguous_b == 2 * GIB
    assert pod_request(pod(requests={"cpu": "1"}), 512 * MIB).contiguous_b == 0


def test_contiguity_batch_and_numa_flags():
    huge = pod(
        requests={"cpu": "2", "hugepages-2Mi": "1Gi", "memory": "2Gi"},
        limits={"cpu": "2", "hugepages-2Mi": "1Gi", "memory": "2Gi"},
    )
    r = pod_request(huge, 512 * MIB)
    assert r.contiguous_b == GIB  # hugepage requests need contiguous memory
    assert r.numa_aligned  # Guaranteed with whole CPUs
    opted = pod(
        requests={"cpu": "500m"}, annotations={"stowage.io/needs-contiguous-memory": "true"}
    )
    assert pod_request(opted, 512 * MIB).contiguous_b == 512 * MIB
    assert not pod_request(opted, 0).numa_aligned
    assert pod_request(pod(), 0).batch  # BestEffort
    assert pod_request(pod(requests={"cpu": "1"}, labels={"stowage.io/qos": "batch"}), 0).batch
    assert not pod_request(pod(requests={"cpu": "1"}), 0).batch
    assert math.isclose(pod_request(pod(requests={"cpu": "1.5"}), 0).cpu_m, 1500)
