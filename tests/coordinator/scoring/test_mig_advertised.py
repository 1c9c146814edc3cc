"""What the device plugin advertises per MIG strategy, a pod's MIG ask, and the filter's
verdict: golden resource maps, each rule of the single strategy, and the refusals."""

from __future__ import annotations

import pytest

from coordinator.scoring.mig.advertised import (
    MIXED,
    SINGLE,
    Advertised,
    MigAsk,
    MigGpu,
    advertised,
    asks_of,
    refusal,
    strategy_of,
)

MIXED_NODE = [
    MigGpu(True, ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")),
    MigGpu(True, ("1c.2g.20gb", "1g.10gb+me", None)),
    MigGpu(False),
    MigGpu(False),
]
UNIFORM = [MigGpu(True, ("1g.10gb",) * 7), MigGpu(True, ("1g.10gb",) * 7)]


def test_mixed_strategy_one_resource_per_profile() -> None:
    assert advertised(MIXED_NODE, MIXED) == Advertised(
        {
            "nvidia.com/gpu": 2,
            "nvidia.com/mig-3g.40gb": 1,
            "nvidia.com/mig-2g.20gb": 1,
            "nvidia.com/mig-1g.10gb": 2,
            "nvidia.com/mig-1g.10gb.me": 1,
        }
    )


def test_single_strategy_advertises_uniform_instances_as_gpus() -> None:
    assert advertised(UNIFORM, SINGLE) == Advertised({"nvidia.com/gpu": 14})
    assert advertised([MigGpu(False)] * 3, SINGLE) == Advertised({"nvidia.com/gpu": 3})
    assert advertised([], SINGLE) == Advertised({})


@pytest.mark.parametrize(
    ("gpus", "why"),
    [
        ([MigGpu(True, ("1g.10gb",)), MigGpu(False)], "GPUs with MIG enabled and disabled"),
        ([MigGpu(True, ("1g.10gb",)), MigGpu(True)], "a MIG-enabled GPU has no instances"),
        (
            [MigGpu(True, ("1g.10gb",)), MigGpu(True, ("2g.20gb",))],
            "more than one MIG profile (1g.10gb, 2g.20gb)",
        ),
    ],
)
def test_single_strategy_refuses_a_node_that_is_not_uniform(gpus, why) -> None:
    assert advertised(gpus, SINGLE) == Advertised(invalid=f"single strategy: {why}")
    assert advertised(gpus, MIXED).invalid is None  # the mixed strategy takes any split


def test_the_strategy_shows_in_the_nodes_resources() -> None:
    assert strategy_of({"cpu": 8, "nvidia.com/mig-1g.10gb": 7}) == MIXED
    assert strategy_of({"cpu": 8, "nvidia.com/gpu": 7}) == SINGLE


def test_asks_per_strategy() -> None:
    requests = {"cpu": 1000, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 0}
    assert asks_of(requests, MIXED, MIXED_NODE) == [MigAsk("nvidia.com/mig-3g.40gb", "3g.40gb", 1)]
    assert asks_of({"nvidia.com/gpu": 2}, MIXED, MIXED_NODE) == []
    assert asks_of({"nvidia.com/gpu": 2}, SINGLE, UNIFORM) == [
        MigAsk("nvidia.com/gpu", "1g.10gb", 2)
    ]
    assert asks_of({"nvidia.com/gpu": 2}, SINGLE, [MigGpu(False)]) == []  # a whole GPU
    assert asks_of({"cpu": 1}, SINGLE, UNIFORM) == []


def test_refusal_counts_free_instances_of_the_asked_profile() -> None:
    offered = advertised(MIXED_NODE, MIXED)
    ask = [MigAsk("nvidia.com/mig-1g.10gb", "1g.10gb", 1)]
    assert refusal(ask, offered, {"nvidia.com/mig-1g.10gb": 1}) is None
    busy = refusal(ask, offered, {"nvidia.com/mig-1g.10gb": 2})
    assert busy is not None and not busy.unresolvable
    assert busy.reason == "MIG: 0 nvidia.com/mig-1g.10gb (1g.10gb) free < 1 requested"
    # the free 3g is no 1g: the profile must match
    other = refusal([MigAsk("nvidia.com/mig-4g.40gb", "4g.40gb", 1)], offered, {})
    assert other is not None and other.unresolvable
    assert other.reason == "MIG: 0 nvidia.com/mig-4g.40gb (4g.40gb) on the node < 1 requested"


def test_refusal_of_an_invalid_single_node_and_of_nothing_asked() -> None:
    bad = advertised([MigGpu(True, ("1g.10gb",)), MigGpu(False)], SINGLE)
    ask = [MigAsk("nvidia.com/gpu", "1g.10gb", 1)]
    found = refusal(ask, bad, {})
    assert found is not None and found.unresolvable
    assert found.reason == "MIG: single strategy: GPUs with MIG enabled and disabled"
    assert refusal([], bad, {}) is None
