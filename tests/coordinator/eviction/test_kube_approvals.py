"""The approval format (:mod:`coordinator.kube.approvals`): the digest and plan id by their
definition, strict reading of an approval ConfigMap and of the plan published on a pod,
why an approval does not approve a plan, and the reader finding approvals in its own
namespace only."""

from __future__ import annotations

import hashlib
import json

import pytest
from kubernetes import client

from coordinator.kube import approvals
from coordinator.kube.approvals import Approval, ApprovalReader, Invalid, Published
from coordinator.kube.client import KubeError, api_client
from hack.kubeapi import KubeApi
from hack.kubeapi.faults import Fault

NOW = 1_790_000_000.0
DATA = {"pod": "team-a/big", "plan": "p", "digest": "d", "expires": "2026-09-21T14:28:20Z"}


def test_the_digest_is_sha256_of_the_node_and_the_sorted_uids() -> None:
    expected = hashlib.sha256(b"gpu-1|uid-a,uid-b").hexdigest()[:16]
    assert approvals.victims_digest("gpu-1", ["uid-b", "uid-a"]) == expected
    assert approvals.victims_digest("gpu-1", ["uid-a", "uid-b"]) == expected


@pytest.mark.parametrize(
    ("node", "uids"), [("gpu-2", ["uid-a", "uid-b"]), ("gpu-1", ["uid-a"]), ("gpu-1", ["uid-c"])]
)
def test_another_node_or_other_victims_make_another_digest(node: str, uids: list[str]) -> None:
    assert approvals.victims_digest(node, uids) != approvals.victims_digest(
        "gpu-1", ["uid-a", "uid-b"]
    )


def test_the_plan_id_binds_the_digest_to_the_pod() -> None:
    assert approvals.plan_id("ns/big", "0123") == hashlib.sha256(b"ns/big|0123").hexdigest()[:12]
    assert approvals.plan_id("ns/other", "0123") != approvals.plan_id("ns/big", "0123")


def test_an_approval_configmap_is_read() -> None:
    found = approvals.parse("cm", "u1", DATA)
    assert found == Approval("cm", "u1", "team-a/big", "p", "d", 1_790_000_900.0)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "data.pod is missing"),
        ({k: v for k, v in DATA.items() if k != "digest"}, "data.digest is missing"),
        (
            {**DATA, "expiry": "x"},
            "data.expiry is not an approval key (pod, plan, digest, expires)",
        ),
        ({**DATA, "expires": "soon"}, "data.expires: 'soon' is not an RFC 3339 time"),
        (
            {**DATA, "expires": "2026-09-21T14:28:20"},
            "data.expires: '2026-09-21T14:28:20' has no time zone (add Z)",
        ),
        ({**DATA, "plan": 7}, "data values must be strings"),
    ],
)
def test_a_malformed_approval_says_what_is_wrong(data: dict | None, reason: str) -> None:
    assert approvals.parse("cm", "u1", data) == Invalid("cm", reason)


def an_approval(**changes: object) -> Approval:
    digest = approvals.victims_digest("n1", ["u-a"])
    fields = {
        "name": "cm", "uid": "u1", "pod": "ns/big", "plan": approvals.plan_id("ns/big", digest),
        "digest": digest, "expires_at": NOW + 60,
    }  # fmt: skip
    return Approval(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_matching_unexpired_approval_approves() -> None:
    digest = approvals.victims_digest("n1", ["u-a"])
    assert approvals.problem(an_approval(), "ns/big", digest, NOW) is None


@pytest.mark.parametrize(
    ("changes", "pod", "uids", "now", "problem"),
    [
        ({}, "ns/other", ["u-a"], NOW, "cm is for pod ns/big, not ns/other"),
        ({"plan": "000000000000"}, "ns/big", ["u-a"], NOW, "cm is for plan 000000000000"),
        ({}, "ns/big", ["u-b"], NOW, "cm is for plan"),  # other victims: another plan id
        ({"digest": "ffffffffffffffff"}, "ns/big", ["u-a"], NOW, "(the victims changed)"),
        ({}, "ns/big", ["u-a"], NOW + 60, "cm expired at 2026-09-21T14:14:20Z"),
    ],
)
def test_what_does_not_approve(
    changes: dict, pod: str, uids: list[str], now: float, problem: str
) -> None:
    digest = approvals.victims_digest("n1", uids)
    found = approvals.problem(an_approval(**changes), pod, digest, now)
    assert found is not None and problem in found


def test_an_invalid_approval_approves_nothing() -> None:
    assert approvals.problem(Invalid("cm", "data.pod is missing"), "ns/big", "d", NOW) == (
        "cm: data.pod is missing"
    )


def test_the_published_plan_reads_back() -> None:
    plan = Published("id1", "dg", "n1", (("ns/a", "u-a"), ("ns/b", "u-b")), NOW + 900)
    text = plan.annotation("team/big", "stowage-system", NOW)
    assert text == (
        "id=id1,digest=dg,node=n1,victims=ns/a:u-a|ns/b:u-b,expires=2026-09-21T14:28:20Z,"
        "approve=kubectl stowage approve team/big --approvals-namespace stowage-system;"
        "at=2026-09-21T14:13:20Z"
    )
    assert Published.read(text) == plan


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("id=a,node=n,victims=ns/a:u,expires=2026-09-21T14:28:20Z;at=x", "digest is missing"),
        ("id=a,digest=d,node=n,victims=a:u,expires=2026-09-21T14:28:20Z;at=x", "'a:u' is not"),
        ("id=a,digest=d,node=n,victims=ns/a,expires=2026-09-21T14:28:20Z;at=x", "'ns/a' is not"),
        ("id=a,digest=d,node=n,victims=ns/a:u,expires=later;at=x", "expires: 'later' is not"),
    ],
)
def test_a_malformed_published_plan_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Published.read(text)


def test_the_kubectl_command_carries_the_manifest() -> None:
    command = approvals.kubectl_command("ns/big", "dg", NOW + 900, "stowage-system")
    assert command.startswith("echo '") and command.endswith("' | kubectl create -f -")
    body = json.loads(command.removeprefix("echo '").removesuffix("' | kubectl create -f -"))
    pid = hashlib.sha256(b"ns/big|dg").hexdigest()[:12]
    assert body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "generateName": f"stowage-approval-{pid}-",
            "namespace": "stowage-system",
            "labels": {"stowage.io/approval": pid},
        },
        "data": {"pod": "ns/big", "plan": pid, "digest": "dg", "expires": "2026-09-21T14:28:20Z"},
    }


def test_the_reader_finds_the_plans_approvals_in_its_own_namespace_only() -> None:
    with KubeApi.in_thread() as kube:
        kube.add_namespace("stowage-system")
        kube.add_namespace("team-a")
        with api_client(host=kube.url) as api:
            core = client.CoreV1Api(api)
            for namespace in ("stowage-system", "team-a"):
                core.create_namespaced_config_map(
                    namespace, approvals.manifest("team-a/big", "dg", NOW + 900, namespace)
                )
            other = approvals.manifest("team-a/other", "dg", NOW + 900, "stowage-system")
            core.create_namespaced_config_map("stowage-system", other)
            reader = ApprovalReader(api, "stowage-system")
            pid = approvals.plan_id("team-a/big", "dg")
            (found,) = reader.find(pid)
            assert isinstance(found, Approval)
            assert (found.pod, found.plan, found.name.startswith(f"stowage-approval-{pid}-")) == (
                "team-a/big", pid, True,
            )  # fmt: skip
            assert reader.find("000000000000") == []
            kube.faults.add(Fault.error(403, path="/configmaps"))
            with pytest.raises(KubeError, match=f"list approvals of plan {pid} in stowage-system"):
                reader.find(pid)
