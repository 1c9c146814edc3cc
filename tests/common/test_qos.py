"""Who is BE, LS or system: the one rule the coordinator names BE pods by and the agent
checks directives against."""

from __future__ import annotations

import pytest

from common.qos import Qos, classify, system_reason
from tests.common.podinfo import QOS_KEY, pod_info


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, Qos.LS),
        ({"qos_class": "Guaranteed"}, Qos.LS),
        ({"qos_class": "Guaranteed", "labels": {QOS_KEY: "BE"}}, Qos.LS),  # promised its CPU
        ({"qos_class": "BestEffort"}, Qos.BE),
        ({"labels": {QOS_KEY: "BE"}}, Qos.BE),
        ({"labels": {"koordinator.sh/qosClass": "BE"}}, Qos.BE),
        ({"qos_class": "BestEffort", "labels": {QOS_KEY: "LS"}}, Qos.LS),
        ({"qos_class": "BestEffort", "labels": {"koordinator.sh/qosClass": "LSR"}}, Qos.LS),
        ({"labels": {QOS_KEY: "LS", "koordinator.sh/qosClass": "BE"}}, Qos.LS),  # ours wins
        ({"labels": {QOS_KEY: "batch"}, "qos_class": "BestEffort"}, Qos.BE),  # unknown: class
        ({"labels": {QOS_KEY: "BE"}, "namespace": "kube-system"}, Qos.SYSTEM),
        ({"labels": {QOS_KEY: "BE"}, "priority": 2_000_000_000}, Qos.SYSTEM),
        ({"labels": {QOS_KEY: "BE"}, "priority": 1_999_999_999}, Qos.BE),
        ({"qos_class": "BestEffort", "priority_class": "system-node-critical"}, Qos.SYSTEM),
        ({"qos_class": "BestEffort", "priority_class": "system-cluster-critical"}, Qos.SYSTEM),
        ({"qos_class": "BestEffort", "static": True}, Qos.SYSTEM),
    ],
)
def test_classify(changes: dict[str, object], expected: Qos) -> None:
    assert classify(pod_info(**changes), QOS_KEY) is expected


def test_the_label_key_is_configurable() -> None:
    assert classify(pod_info(labels={"example.com/tier": "BE"}), "example.com/tier") is Qos.BE
    assert classify(pod_info(labels={"example.com/tier": "BE"}), QOS_KEY) is Qos.LS


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
    assert system_reason(pod_info(**changes)) == reason
