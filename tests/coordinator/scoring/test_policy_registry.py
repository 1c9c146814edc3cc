"""The policy registry: one entry per policy module, strict argument checking."""

from __future__ import annotations

from pathlib import Path

import pytest

import coordinator.scoring.policies
from common.errors import ConfigError
from coordinator.scoring.base import Policy
from coordinator.scoring.registry import POLICIES, PolicyContext, build_policy


def test_policies_match_the_policy_modules():
    directory = Path(coordinator.scoring.policies.__file__).parent
    modules = {p.stem.replace("_", "-") for p in directory.glob("*.py")} - {"--init--"}
    assert set(POLICIES) == modules
    assert len(modules) >= 10


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_builds_with_defaults_and_knows_its_name(name):
    policy = build_policy(name, None, PolicyContext())
    assert isinstance(policy, Policy)
    assert policy.name == name
    assert build_policy(name, {}).name == name


def test_unknown_policy():
    with pytest.raises(ConfigError, match="'tetris'"):
        build_policy("tetris")


@pytest.mark.parametrize(
    ("name", "raw", "key"),
    [
        ("fgd", {"bogus": 1}, "fgd.bogus"),
        ("best-fit", {"coverage": 0.9}, "best-fit.coverage"),
        ("random", {"seed": 1}, "random.seed"),
        ("stowage", {"alpha": 0.3}, "stowage.alpha"),
        ("volcano-binpack", {"binpack.weight": 2}, "volcano-binpack.binpack.weight"),
        ("least-allocated", {"weight": 1}, "least-allocated.weight"),
    ],
)
def test_unknown_argument_keys(name, raw, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.") + ": unknown"):
        build_policy(name, raw)


@pytest.mark.parametrize(
    ("name", "raw", "key"),
    [
        ("fgd", {"coverage": "x"}, "fgd.coverage"),
        ("fgd", {"coverage": True}, "fgd.coverage"),
        ("fgd", {"coverage": None}, "fgd.coverage"),
        ("volcano-binpack", {"weight": True}, "volcano-binpack.weight"),
        ("volcano-binpack", {"weight": 1.5}, "volcano-binpack.weight"),
        ("volcano-binpack", {"weight": "10"}, "volcano-binpack.weight"),
        ("volcano-binpack", {"resources": "cpu"}, "volcano-binpack.resources"),
        ("volcano-binpack", {"resources": {"cpu": "1"}}, "volcano-binpack.resources.cpu"),
        ("least-allocated", {"resources": {"cpu": True}}, "least-allocated.resources.cpu"),
        ("stowage", {"relearn_max": 100.0}, "stowage.relearn_max"),
        ("stowage", {"stranding_weight": "0.3"}, "stowage.stranding_weight"),
    ],
)
def test_wrong_types(name, raw, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.") + ": expected"):
        build_policy(name, raw)


@pytest.mark.parametrize(
    ("name", "raw", "key"),
    [
        ("fgd", {"coverage": 0}, "fgd.coverage"),
        ("fgd", {"coverage": 1.5}, "fgd.coverage"),
        ("fgd", {"coverage": -0.1}, "fgd.coverage"),
        ("volcano-binpack", {"weight": 101}, "volcano-binpack.weight"),
        ("volcano-binpack", {"weight": -1}, "volcano-binpack.weight"),
        ("stowage", {"coverage": 0.0}, "stowage.coverage"),
        ("stowage", {"stranding_weight": -0.5}, "stowage.stranding_weight"),
        ("stowage", {"scale_milli": 0}, "stowage.scale_milli"),
        ("stowage", {"relearn_max": 10}, "stowage.relearn_max"),
        ("least-allocated", {"resources": {"cpu": 101}}, "resources.cpu"),
        ("volcano-binpack", {"resources": {"memory": -1}}, "resources.memory"),
        ("most-allocated", {"resources": {"gpu": 1}}, "resources.gpu"),
    ],
)
def test_out_of_range_values(name, raw, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_policy(name, raw)


def test_resource_names_must_be_strings():
    with pytest.raises(ConfigError, match=r"most-allocated\.resources: keys must be strings"):
        build_policy("most-allocated", {"resources": {1: 1}})


def test_arguments_must_be_a_mapping():
    with pytest.raises(ConfigError, match="fgd: arguments must be a mapping"):
        build_policy("fgd", [("coverage", 0.9)])  # type: ignore[arg-type]


def test_good_arguments_are_used():
    fgd = build_policy("fgd", {"coverage": 1})  # an int is a fine float
    assert fgd.frag.shapes == []
    volcano = build_policy("volcano-binpack", {"weight": 7, "resources": {"nvidia.com/gpu": 3}})
    assert volcano.weight == 7
    assert dict(volcano.weights.weights) == {"nvidia.com/gpu": 3}
    stowage = build_policy("stowage", {"stranding_weight": 1, "relearn_max": 64})
    assert stowage.args.stranding_weight == 1
    assert stowage.args.relearn_max == 64
