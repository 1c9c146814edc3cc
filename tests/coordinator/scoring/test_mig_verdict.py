"""The MIG verdict's parts that the live tests do not reach on their own."""

from __future__ import annotations

from coordinator.scoring.mig.advertised import MigGpu
from coordinator.scoring.mig.verdict import explain, in_use


def test_in_use_adds_the_bound_pods_requests() -> None:
    bound = [{"nvidia.com/mig-1g.10gb": 2, "cpu": 100}, {"nvidia.com/mig-1g.10gb": 1}]
    assert in_use(bound) == {"nvidia.com/mig-1g.10gb": 3, "cpu": 100}


def test_a_mig_node_is_shown_to_a_pod_asking_nothing_of_it() -> None:
    """A CPU pod on a node with MIG GPUs: nothing asked, so it fits, and the instances
    are listed (what an operator looks at)."""
    shown = explain(
        {"cpu": 1000}, {"nvidia.com/mig-1g.10gb": 7}, {}, [MigGpu(True, ("1g.10gb",) * 7)]
    )
    assert shown is not None
    assert (shown["asks"], shown["verdict"]) == ([], "fits")
    assert shown["instances"]["nvidia.com/mig-1g.10gb"]["free"] == 7


def test_a_single_strategy_node_known_only_by_its_report() -> None:
    """No MIG resource on the Node (single strategy) but MIG GPUs in the report."""
    shown = explain(
        {"nvidia.com/gpu": 1},
        {"nvidia.com/gpu": 7},
        {"nvidia.com/gpu": 7},
        [MigGpu(True, ("1g.10gb",) * 7)],
    )
    assert shown is not None
    assert shown["asks"] == [{"resource": "nvidia.com/gpu", "profile": "1g.10gb", "count": 1}]
    assert shown["verdict"] == "MIG: 0 nvidia.com/gpu (1g.10gb) free < 1 requested"
    assert explain({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 8}, {}, [MigGpu(False)] * 8) is None
