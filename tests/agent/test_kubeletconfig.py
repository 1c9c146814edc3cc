from __future__ import annotations

import pytest

from agent import kubeletconfig
from agent.kubeletconfig import KubeletConfigError

MIB, GIB = 2**20, 2**30


@pytest.mark.parametrize(
    ("config", "expected_b"),
    [
        ({}, 100 * MIB),  # kubelet's default memory.available<100Mi
        ({"evictionHard": {"nodefs.available": "10%"}}, 0),
        (
            {"evictionHard": {"nodefs.available": "10%"}, "mergeDefaultEvictionSettings": True},
            100 * MIB,
        ),
        ({"evictionHard": {"memory.available": "1Gi"}}, GIB),
        ({"evictionHard": {"memory.available": "10%"}}, 4 * GIB // 10 + 1),
    ],
)
def test_eviction_threshold_rules(config, expected_b):
    assert kubeletconfig.reservations(config, 4 * GIB).eviction_hard_b == expected_b


def test_reserved_system_cpus_replace_cpu_reservations():
    config = {
        "kubeReserved": {"cpu": "2", "memory": "1Gi"},
        "systemReserved": {"cpu": "500m"},
        "reservedSystemCPUs": "0-1,8",
    }
    res = kubeletconfig.reservations(config, 64 * GIB)
    assert (res.kube_reserved_m, res.system_reserved_m, res.reserved_cpus_m) == (0, 0, 3000)
    assert res.kube_reserved_b == GIB


@pytest.mark.parametrize(
    "config",
    [
        {"kubeReserved": {"memory": "lots"}},
        {"kubeReserved": {"memory": "-1Gi"}},
        {"systemReserved": "1Gi"},
        {"evictionHard": {"memory.available": "120%"}},
        {"evictionHard": ["memory.available<1Gi"]},
        {"reservedSystemCPUs": "0-x"},
    ],
)
def test_bad_values_are_errors_naming_the_key(config):
    with pytest.raises(KubeletConfigError) as info:
        kubeletconfig.reservations(config, GIB)
    assert any(key in str(info.value) for key in config)


def test_load_rejects_non_kubelet_documents(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("kind: Pod\n")
    with pytest.raises(KubeletConfigError, match="KubeletConfiguration"):
        kubeletconfig.load(path)
    path.write_text("a: [unclosed\n")
    with pytest.raises(KubeletConfigError, match="invalid YAML"):
        kubeletconfig.load(path)
