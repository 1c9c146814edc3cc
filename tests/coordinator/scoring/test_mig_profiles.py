"""MIG geometry and the device plugin's resource names, against their published forms.

The tables are NVIDIA's MIG user guide's "Supported MIG Profiles" for A100-SXM4-40GB,
A100-SXM4-80GB and H100-SXM5-80GB (name, instances per GPU) and ``nvidia-smi mig -lgipp``'s
placements (start slices : size); the resource names are those the k8s-device-plugin
README lists for the mixed strategy, written out here rather than derived."""

from __future__ import annotations

import pytest

from coordinator.scoring.mig import profiles
from coordinator.scoring.mig.advertised import mixed_resource, profile_of
from coordinator.scoring.mig.profiles import A100_40GB, A100_80GB, H100_80GB, geometry_of

# name: (compute slices, memory slices, starts, instances per GPU)
GUIDE_A100_40GB = {
    "1g.5gb": (1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    "1g.5gb+me": (1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    "1g.10gb": (1, 2, (0, 2, 4, 6), 4),
    "2g.10gb": (2, 2, (0, 2, 4), 3),
    "3g.20gb": (3, 4, (0, 4), 2),
    "4g.20gb": (4, 4, (0,), 1),
    "7g.40gb": (7, 8, (0,), 1),
}
GUIDE_80GB = {
    "1g.10gb": (1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    "1g.10gb+me": (1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    "1g.20gb": (1, 2, (0, 2, 4, 6), 4),
    "2g.20gb": (2, 2, (0, 2, 4), 3),
    "3g.40gb": (3, 4, (0, 4), 2),
    "4g.40gb": (4, 4, (0,), 1),
    "7g.80gb": (7, 8, (0,), 1),
}


@pytest.mark.parametrize(
    ("geometry", "guide"),
    [(A100_40GB, GUIDE_A100_40GB), (A100_80GB, GUIDE_80GB), (H100_80GB, GUIDE_80GB)],
)
def test_geometry_is_the_user_guides(geometry: profiles.Geometry, guide: dict) -> None:
    got = {
        p.name: (p.compute, p.memory, p.starts, p.max_instances) for p in geometry.profiles.values()
    }
    assert got == guide


def test_a_full_split_never_exceeds_seven_compute_slices() -> None:
    """The fullest splits the guide lists use all 8 memory slices with 7 compute."""
    g = {p.name: p for p in H100_80GB.profiles.values()}
    assert g["4g.40gb"].compute + g["3g.40gb"].compute == profiles.COMPUTE_SLICES
    assert 3 * g["2g.20gb"].compute + g["1g.10gb"].compute == profiles.COMPUTE_SLICES


@pytest.mark.parametrize(
    ("name", "geometry"),
    [
        ("NVIDIA A100-SXM4-40GB", A100_40GB),
        ("NVIDIA A100-PCIE-40GB", A100_40GB),
        ("NVIDIA A100-SXM4-80GB", A100_80GB),
        ("NVIDIA A100 80GB PCIe", A100_80GB),
        ("NVIDIA H100 80GB HBM3", H100_80GB),
        ("NVIDIA H100 PCIe", H100_80GB),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200", None),
        ("NVIDIA A30", None),
        ("NVIDIA A100", None),
        ("Tesla T4", None),
    ],
)
def test_geometry_by_nvml_product_name(name: str, geometry: profiles.Geometry | None) -> None:
    assert geometry_of(name) is geometry


# The k8s-device-plugin README's mixed-strategy resources on an A100-40GB and an A100-80GB,
# plus the media-extension and compute-instance cases of internal/rm/rm.go.
MIXED_GOLDEN = {
    "1g.5gb": "nvidia.com/mig-1g.5gb",
    "2g.10gb": "nvidia.com/mig-2g.10gb",
    "3g.20gb": "nvidia.com/mig-3g.20gb",
    "7g.40gb": "nvidia.com/mig-7g.40gb",
    "1g.10gb": "nvidia.com/mig-1g.10gb",
    "2g.20gb": "nvidia.com/mig-2g.20gb",
    "3g.40gb": "nvidia.com/mig-3g.40gb",
    "7g.80gb": "nvidia.com/mig-7g.80gb",
    "1g.10gb+me": "nvidia.com/mig-1g.10gb.me",
    "1c.2g.20gb": None,
    "2g": None,
    "xg.10gb": None,
    "1g.10": None,
}


@pytest.mark.parametrize(("profile", "resource"), sorted(MIXED_GOLDEN.items()))
def test_mixed_strategy_resource_names(profile: str, resource: str | None) -> None:
    assert mixed_resource(profile) == resource
    if resource is not None:
        assert profile_of(resource) == profile


@pytest.mark.parametrize(
    "resource",
    ["nvidia.com/gpu", "nvidia.com/mig-", "nvidia.com/mig-1g", "nvidia.com/mig-1c.2g.20gb", "cpu"],
)
def test_other_resources_name_no_profile(resource: str) -> None:
    assert profile_of(resource) is None


def test_compute_of_reads_the_name() -> None:
    assert [profiles.compute_of(n) for n in ("3g.40gb", "1c.2g.20gb", "7g.80gb", "1g.10gb+me")] == [
        3,
        1,
        7,
        1,
    ]
    assert profiles.compute_of("1c.xg.20gb") is None
