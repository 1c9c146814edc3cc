"""Who is BE, LS or system: the one rule the coordinator names BE pods by and the agent
checks directives against."""

from __future__ import annotations

import pytest
from msgspec import structs

from common.qos import Qos, classify, system_reason
from common.schema import PodInfo, Resources

NONE = Resources(cpu_m=0, mem_b=0, gpu=0, hugepages_b=0)
KEY = "stowage.io/qos"


def pod(**changes: object) -> PodInfo:
    base = PodInfo(
        namespace="default",
        name="p",
        uid="u",
        phase="Running",
        qos_class="Burstable",
        priority=0,
        priority_class=None,
        requests=NONE,
        limits=NONE,
        labels={},
    )
    return structs.replace(base, **changes)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, Qos.LS),
        ({"qos_class": "Guaranteed"}, Qos.LS),
        ({"qos_class": "Guaranteed", "labels": {KEY: "BE"}}, Qos.LS),  # promised its CPU
        ({"qos_class": "BestEffort"}, Qos.BE),
        ({"labels": {KEY: "BE"}}, Qos.BE),
        ({"labels": {"koordinator.sh/qosClass": "BE"}}, Qos.BE),
        ({"qos_class": "BestEffort", "labels": {KEY: "LS"}}, Qos.LS),
        ({"qos_class": "BestEffort", "labels": {"koordinator.sh/qosClass": "LSR"}}, Qos.LS),
        ({"labels": {KEY: "LS", "koordinator.sh/qosClass": "BE"}}, Qos.LS),  # ours wins
        ({"labels": {KEY: "batch"}, "qos_class": "BestEffort"}, Qos.BE),  # unknown: class
        ({"labels": {KEY: "BE"}, "namespace": "kube-system"}, Qos.SYSTEM),
        ({"labels": {KEY: "BE"}, "priority": 2_000_000_000}, Qos.SYSTEM),
        ({"labels": {KEY: "BE"}, "priority": 1_999_999_999}, Qos.BE),
        ({"qos_class": "BestEffort", "priority_class": "system-node-critical"}, Qos.SYSTEM),
        ({"qos_class": "BestEffort", "priority_class": "system-cluster-critical"}, Qos.SYSTEM),
        ({"qos_class": "BestEffort", "static": True}, Qos.SYSTEM),
    ],
)
def test_classify(changes: dict[str, object], expected: Qos) -> None:
    assert classify(pod(**changes), KEY) is expected


def test_the_label_key_is_configurable() -> None:
    assert classify(pod(labels={"example.com/tier": "BE"}), "example.com/tier") is Qos.BE
    assert classify(pod(labels={"example.com/tier": "BE"}), KEY) is Qos.LS


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, None),
        ({"static": True, "namespace": "kube-system"}, "static pod"),
        ({"namespace": "kube-system"}, "namespace kube-system"),
        ({"priority_class": "system-node-critical"}, "priority class system-node-critical"),
        ({"priority": 2_000_001_000}, "priority 2000001000"),
    ],
)
def test_system_reason_names_the_rule(changes: dict[str, object], reason: str | None) -> None:
    assert system_reason(pod(**changes)) == reason
