"""Scale from zero: a node group with no node left is named by a hint only through the
template the operator declared for it (``autoscale.templates``), on the cluster of
:mod:`tests.coordinator.autoscale.rig`; every figure worked out by hand (cpu in
milli-cores)."""

from __future__ import annotations

from typing import Any

import pytest

from common.config import build
from common.errors import ConfigError
from coordinator.config import AutoscaleSettings, GroupTemplate, TaintSetting
from tests.coordinator.autoscale.rig import A100, GPU, POOL, Rig

A100_POOL = f"{POOL}:gpu-a100"
H100_POOL = f"{POOL}:gpu-h100"


def a100_template(gpus: str = "8") -> GroupTemplate:
    taints = (TaintSetting(key=GPU, value="present"),)
    return GroupTemplate(
        labels=dict(A100),
        taints=taints,
        allocatable={"cpu": 64, "memory": "512Gi", "pods": 110, GPU: gpus},
    )


def scaled_to_zero() -> Rig:
    rig = Rig()
    rig.cluster.remove_node("g1")
    rig.cluster.remove_node("g2")
    return rig


def test_a_group_scaled_to_zero_is_named_through_its_declared_template() -> None:
    rig = scaled_to_zero()
    assert rig.hint("research").group is None  # no node left: nothing to name
    hint = rig.hint("research", templates={A100_POOL: a100_template()})
    # Demand as with nodes (40 CPUs, 20 GPUs), and no node takes the A100 shape now: the
    # whole demand lacks. A new node offers 64 CPUs and 8 GPUs: ceil(20 / 8) = 3.
    assert (hint.room, hint.gap) == ({"cpu": 0, GPU: 0}, {"cpu": 40000, GPU: 20})
    assert (hint.group, hint.nodes) == (A100_POOL, 3)


def test_a_declared_template_is_judged_like_a_node_its_taint_included() -> None:
    rig = scaled_to_zero()
    # The pods tolerate nvidia.com/gpu: a template tainted otherwise is refused.
    template = a100_template()
    other = GroupTemplate(
        labels=template.labels,
        taints=(TaintSetting(key="dedicated", value="infer"),),
        allocatable=template.allocatable,
    )
    hint = rig.hint("research", templates={A100_POOL: other})
    assert hint.group is None
    assert "dedicated" in hint.reason


def test_a_group_with_nodes_is_judged_by_its_nodes_not_its_template() -> None:
    # g1 and g2 still exist (8 GPUs each): a template saying 16 GPUs (one node would do)
    # is not used, nor listed beside them.
    found = Rig().plan(templates={A100_POOL: a100_template("16")})
    hint = next(h for h in found.hints if h.queue == "research")
    assert (hint.group, hint.nodes) == (A100_POOL, 2)
    assert found.groups.count(A100_POOL) == 1


def test_a_declared_group_ends_the_deadlock_of_pods_selecting_it() -> None:
    template = GroupTemplate(allocatable={"cpu": "32", "pods": "110"})
    found = Rig().plan(templates={H100_POOL: template})
    assert found.deadlocks == ()
    assert H100_POOL in found.groups


@pytest.mark.parametrize(
    ("templates", "message"),
    [
        ({"gpu-h100": {"allocatable": {"cpu": "8"}}}, "is not <group label>:<value>"),
        ({"example.com/pool:x": {"allocatable": {"cpu": "8"}}}, "is not <group label>:<value>"),
        ({f"{POOL}:": {"allocatable": {"cpu": "8"}}}, "is not <group label>:<value>"),
        ({H100_POOL: {"allocatable": {"cpu": "eight"}}}, f"{H100_POOL}.allocatable.cpu"),
        ({H100_POOL: {}}, "expected the resources a new node offers"),
        ({H100_POOL: {"allocatable": {"cpu": "8"}, "taints": [{"key": "k", "effect": "No"}]}},
         rf"{H100_POOL}.taints\[0\]: expected a key and an effect"),
    ],
)  # fmt: skip
def test_bad_templates_are_refused_naming_the_key(templates: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        build(AutoscaleSettings, {"templates": templates}, where="autoscale")
    assert "autoscale" in str(raised.value)
