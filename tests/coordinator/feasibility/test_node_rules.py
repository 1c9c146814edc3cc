"""NodeUnschedulable, NodeName, TaintToleration and NodeAffinity, case by case from
kube-scheduler's documented behaviour (the plugins' docs and unit tests)."""

from __future__ import annotations

import pytest

from coordinator.feasibility import Outcome, could_run
from tests.coordinator.feasibility.objs import node, pod, snapshot


def rule_of(p, n) -> str:
    verdict = could_run(p, n.name, snapshot([n]))
    return "fits" if verdict.fits else verdict.rule


# ------------------------------------------------------------- NodeUnschedulable


def test_a_cordoned_node_takes_no_pod() -> None:
    assert rule_of(pod("p"), node("n", unschedulable=True)) == "NodeUnschedulable"
    assert rule_of(pod("p"), node("n")) == "fits"


@pytest.mark.parametrize(
    "toleration, fits",
    [
        (
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoSchedule",
            },
            True,
        ),
        ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),
        (
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoExecute",
            },
            False,
        ),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_a_cordoned_node_takes_a_pod_tolerating_the_unschedulable_taint(toleration, fits) -> None:
    # The cordon is no taint on the Node here: only spec.unschedulable says it.
    verdict = rule_of(pod("p", tolerations=[toleration]), node("n", unschedulable=True))
    assert verdict == ("fits" if fits else "NodeUnschedulable")


# --------------------------------------------------------------------- NodeName


def test_a_pod_naming_a_node_fits_only_there() -> None:
    named = pod("p", on="a")
    assert rule_of(named, node("b")) == "NodeName"
    assert rule_of(named, node("a")) == "fits"


# -------------------------------------------------------------- TaintToleration


@pytest.mark.parametrize(
    "taint, toleration, fits",
    [
        # Effects: NoSchedule and NoExecute filter, PreferNoSchedule only scores.
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, None, False),
        ({"key": "k", "value": "v", "effect": "NoExecute"}, None, False),
        ({"key": "k", "value": "v", "effect": "PreferNoSchedule"}, None, True),
        # Equal (also the default operator) needs the same key and value.
        (
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "k", "operator": "Equal", "value": "v"},
            True,
        ),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "v"}, True),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "w"}, False),
        # Exists ignores the value; an empty key with Exists tolerates every key.
        (
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "k", "operator": "Exists"},
            True,
        ),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, {"operator": "Exists"}, True),
        (
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "j", "operator": "Exists"},
            False,
        ),
        # An empty effect tolerates every effect; a given one only its own.
        (
            {"key": "k", "value": "v", "effect": "NoExecute"},
            {"key": "k", "operator": "Exists"},
            True,
        ),
        (
            {"key": "k", "value": "v", "effect": "NoExecute"},
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            False,
        ),
        (
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            True,
        ),
    ],
)
def test_taints_and_tolerations(taint, toleration, fits) -> None:
    tolerations = [toleration] if toleration else []
    verdict = rule_of(pod("p", tolerations=tolerations), node("n", taints=[taint]))
    assert verdict == ("fits" if fits else "TaintToleration")


def test_every_filtering_taint_must_be_tolerated() -> None:
    taints = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    one = pod("p", tolerations=[{"key": "a", "operator": "Exists"}])
    assert rule_of(one, node("n", taints=taints)) == "TaintToleration"


# ----------------------------------------------------------------- NodeAffinity


def terms(*expressions, fields=None) -> dict:
    term: dict = {"matchExpressions": list(expressions)}
    if fields:
        term["matchFields"] = fields
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def test_node_selector_needs_every_label() -> None:
    n = node("n", labels={"zone": "a", "disk": "ssd"})
    assert rule_of(pod("p", nodeSelector={"zone": "a"}), n) == "fits"
    assert rule_of(pod("p", nodeSelector={"zone": "a", "disk": "hdd"}), n) == "NodeAffinity"
    assert rule_of(pod("p", nodeSelector={"gpu": "yes"}), n) == "NodeAffinity"


@pytest.mark.parametrize(
    "expression, fits",
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "absent", "operator": "NotIn", "values": ["a"]}, True),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "absent", "operator": "Exists"}, False),
        ({"key": "absent", "operator": "DoesNotExist"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
        ({"key": "cores", "operator": "Gt", "values": ["31"]}, True),
        ({"key": "cores", "operator": "Gt", "values": ["32"]}, False),
        ({"key": "cores", "operator": "Lt", "values": ["33"]}, True),
        ({"key": "cores", "operator": "Lt", "values": ["32"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # not an integer
        ({"key": "absent", "operator": "Lt", "values": ["1"]}, False),
    ],
)
def test_required_node_affinity_operators(expression, fits) -> None:
    n = node("n", labels={"zone": "a", "cores": "32"})
    assert rule_of(pod("p", affinity=terms(expression)), n) == ("fits" if fits else "NodeAffinity")


def test_match_fields_select_the_node_by_name() -> None:
    affinity = terms(fields=[{"key": "metadata.name", "operator": "In", "values": ["a"]}])
    assert rule_of(pod("p", affinity=affinity), node("a")) == "fits"
    assert rule_of(pod("p", affinity=affinity), node("b")) == "NodeAffinity"


def test_terms_are_ored_and_an_empty_term_matches_nothing() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                ]
            }
        }
    }
    assert rule_of(pod("p", affinity=affinity), node("n", labels={"zone": "a"})) == "fits"
    empty = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
        }
    }
    assert rule_of(pod("p", affinity=empty), node("n", labels={"zone": "a"})) == "NodeAffinity"


def test_an_unknown_operator_makes_the_pod_unjudgeable_not_guessed() -> None:
    odd = pod("p", affinity=terms({"key": "zone", "operator": "Near", "values": ["a"]}))
    verdict = could_run(odd, "n", snapshot([node("n")]))
    assert verdict.outcome is Outcome.UNJUDGEABLE
    assert "Near" in verdict.reason
