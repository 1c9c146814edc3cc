"""The planner tries no eviction set on a node whose live signals refuse the pod: what-if
states keep a node's reported signals, so every set there would be refused, and a node
with the most candidates the search weighs costs 4,095 sets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from coordinator.eviction import plan as planner
from coordinator.eviction.answers import Plan, Refusal
from coordinator.eviction.plan import narrow_victims, plan_preemption
from coordinator.state.cluster import ClusterState
from coordinator.state.signals import NodeSignals
from tests.coordinator.eviction.evictrig import NOW, EvictRig, node, pod, roomy_caps

CRITICAL = 2_000_000_000
CANDIDATES = 12  # small pods on one node, more than an 8-GPU node carries


def refusing(kind: str) -> tuple[NodeSignals, dict[str, str]]:
    """A node's reported signals, and what a pending pod asks, that refuse it there."""
    if kind == "contiguity":
        short = NodeSignals(measured_at=NOW, contiguous_2mib_b=2**20)
        return short, {"stowage.io/needs-contiguous-memory": "1Gi"}
    hot = NodeSignals(measured_at=NOW, cpu_used_pct=99.0)
    return hot, {"stowage.io/qos": "batch"}


def rig(kind: str) -> tuple[EvictRig, dict[str, Any]]:
    """gpu-a: room, but its report refuses the pod; gpu-b: fine, but full of low pods.
    Both carry many evictable low pods."""
    signals, asks = refusing(kind)
    rig = EvictRig(settings=roomy_caps()).nodes(node("gpu-a"), node("gpu-b"))
    rig.pods(*(pod(f"a-{k}", node="gpu-a", cpu="2") for k in range(CANDIDATES + 4)))
    rig.pods(*(pod(f"b-{k}", node="gpu-b", gpus=1) for k in range(8)))
    state = rig.cluster.state
    assert state is not None
    rig.cluster.signals["gpu-a"] = signals
    state.set_signals(state.index["gpu-a"], signals)
    return rig, pod("want", gpus=8, priority=CRITICAL, annotations=asks)


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The node of every eviction set the planner has a what-if state built for."""
    seen: list[str] = []
    given_back = planner.given_back

    def counting(state: ClusterState, rows: np.ndarray, released: Any) -> ClusterState:
        seen.extend(state.names[i] for i in rows.tolist())
        return given_back(state, rows, released)

    monkeypatch.setattr(planner, "given_back", counting)
    return seen


@pytest.mark.parametrize("kind", ["contiguity", "real-load"])
def test_a_plan_tries_no_set_where_the_report_refuses_the_pod(kind: str, judged: list[str]):
    rig_, wants = rig(kind)
    outcome = plan_preemption(rig_.view(), rig_.facts(wants), rig_.evictions, NOW)
    assert isinstance(outcome, Plan), outcome
    assert outcome.node == "gpu-b"
    assert judged and set(judged) == {"gpu-b"}


@pytest.mark.parametrize("kind", ["contiguity", "real-load"])
def test_preempt_leaves_such_a_node_out_without_trying_a_set(kind: str, judged: list[str]):
    rig_, wants = rig(kind)
    on_a = frozenset(f"uid-ns-a-{k}" for k in range(CANDIDATES + 4))
    on_b = frozenset(f"uid-ns-b-{k}" for k in range(8))
    answer = narrow_victims(
        rig_.view(), rig_.facts(wants), {"gpu-a": on_a, "gpu-b": on_b}, rig_.evictions, NOW
    )
    assert set(answer) == {"gpu-b"}
    assert len(answer["gpu-b"]) == 8
    assert "gpu-a" not in judged


def test_with_only_such_nodes_the_plan_is_refused_without_a_set_tried(judged: list[str]):
    rig_, wants = rig("contiguity")
    state = rig_.cluster.state
    assert state is not None
    short, _ = refusing("contiguity")
    rig_.cluster.signals["gpu-b"] = short
    state.set_signals(state.index["gpu-b"], short)
    outcome = plan_preemption(rig_.view(), rig_.facts(wants), rig_.evictions, NOW)
    assert isinstance(outcome, Refusal)
    assert "would still not fit after evicting every allowed pod" in outcome.reason
    assert judged == []
