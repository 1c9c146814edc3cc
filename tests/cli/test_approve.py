"""``stowage approve NS/POD`` against the API emulator, with a kubeconfig as an operator
has one: it writes the approval ConfigMap of the plan published on the pod, and refuses
(exit 1, nothing written) whatever in that annotation does not add up with the pods the
API server has — the pod's owner writes the annotation. Exit 2 when the API server
cannot be asked or refuses the approval."""

from __future__ import annotations

import argparse
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli import approve
from common import annotations as ann
from coordinator.kube.approvals import Published
from hack.kubeapi import KubeApi, objects
from hack.kubeapi.resources import CONFIGMAPS, PODS
from tests.hosts import FakeClock

NS = "stowage-system"


@pytest.fixture
def kube() -> Iterator[KubeApi]:
    with KubeApi.in_thread() as api:
        api.add_namespace(NS)
        api.add_namespace("team-a")
        api.add_namespace("team-b")
        yield api


class Cluster:
    def __init__(self, kube: KubeApi, tmp_path: Path) -> None:
        self.kube = kube
        self.clock = FakeClock()
        self.kubeconfig = kube.kubeconfig(tmp_path / "kubeconfig")
        kube.store.create(PODS, objects.pod("big", "team-a", phase="Pending"))
        self.victims = [
            kube.store.create(PODS, objects.pod(name, "team-b", node="gpu-1"))["metadata"]["uid"]
            for name in ("etl-0", "etl-1")
        ]

    def publish(self, **changes: Any) -> Published:
        """The plan as the coordinator publishes it (evicting etl-0 and etl-1 on gpu-1),
        changed as the pod's owner may change it."""
        uids = sorted(self.victims)
        digest = hashlib.sha256(("gpu-1|" + ",".join(uids)).encode()).hexdigest()[:16]
        fields: dict[str, Any] = {
            "plan": hashlib.sha256(f"team-a/big|{digest}".encode()).hexdigest()[:12],
            "digest": digest,
            "node": "gpu-1",
            "victims": (("team-b/etl-0", self.victims[0]), ("team-b/etl-1", self.victims[1])),
            "expires_at": self.clock.wall() + 900,
        }
        plan = Published(**{**fields, **changes})
        self.annotate(plan.annotation("team-a/big", NS, self.clock.wall()))
        return plan

    def annotate(self, text: str) -> None:
        def update(obj: dict[str, Any]) -> dict[str, Any]:
            obj["metadata"]["annotations"] = {"stowage.io/preemption-plan": text}
            obj["metadata"]["resourceVersion"] = ""
            return obj

        self.kube.store.update(PODS, "team-a", "big", update)

    def run(self, *argv: str) -> tuple[int, str]:
        parser = argparse.ArgumentParser()
        approve.add_arguments(parser)
        args = parser.parse_args([*argv, "--kubeconfig", str(self.kubeconfig)])
        out = io.StringIO()
        return approve.main(args, out, self.clock), out.getvalue()

    def approvals(self) -> list[dict[str, Any]]:
        found, _ = self.kube.store.list(CONFIGMAPS, NS)
        return found


def moved_to(node: str):  # type: ignore[no-untyped-def]
    def update(obj: dict[str, Any]) -> dict[str, Any]:
        obj["spec"]["nodeName"] = node
        obj["metadata"]["resourceVersion"] = ""
        return obj

    return update


@pytest.fixture
def cluster(kube: KubeApi, tmp_path: Path) -> Cluster:
    return Cluster(kube, tmp_path)


def test_the_published_plan_is_approved(cluster: Cluster) -> None:
    plan = cluster.publish()
    code, out = cluster.run("team-a/big")
    assert code == 0
    (made,) = cluster.approvals()
    expires = ann.timestamp(cluster.clock.wall() + 900)
    assert made["metadata"]["labels"] == {"stowage.io/approval": plan.plan}
    assert made["data"] == {
        "pod": "team-a/big", "plan": plan.plan, "digest": plan.digest, "expires": expires,
    }  # fmt: skip
    assert out.splitlines() == [
        f"approved plan {plan.plan} for team-a/big until {expires}"
        f" (configmap {NS}/{made['metadata']['name']}):",
        f"  evict team-b/etl-0 (UID {cluster.victims[0]}) on gpu-1",
        f"  evict team-b/etl-1 (UID {cluster.victims[1]}) on gpu-1",
    ]


def test_the_approval_ends_with_the_ttl_when_the_plan_waits_longer(cluster: Cluster) -> None:
    cluster.publish(expires_at=cluster.clock.wall() + 10 * 86_400)  # the owner's word
    assert cluster.run("team-a/big", "--ttl", "60")[0] == 0
    (made,) = cluster.approvals()
    assert made["data"]["expires"] == ann.timestamp(cluster.clock.wall() + 60)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ("nothing published", "no preemption plan awaits approval on team-a/big"),
        ("malformed", "the plan published on team-a/big is malformed: digest is missing"),
        ("victim dropped", "does not add up"),
        ("digest forged", "does not add up"),
        ("victim replaced", "victim team-b/etl-0 is another pod now"),
        ("victim gone", "victim team-b/etl-1 is gone"),
        ("victim elsewhere", "victim team-b/etl-0 is on gpu-9, not the plan's gpu-1"),
        ("expired", "the plan published on team-a/big expired at"),
    ],
)
def test_a_plan_that_does_not_add_up_is_not_approved(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], change: str, error: str
) -> None:
    if change == "malformed":
        cluster.annotate("id=1,node=gpu-1;at=x")
    elif change == "victim dropped":
        plan = cluster.publish()
        cluster.publish(victims=plan.victims[:1])  # digest and id kept
    elif change == "digest forged":
        cluster.publish(digest="0000000000000000")
    elif change == "victim replaced":
        cluster.publish()
        cluster.kube.store.delete(PODS, "team-b", "etl-0")
        cluster.kube.store.create(PODS, objects.pod("etl-0", "team-b", node="gpu-1"))
    elif change == "victim gone":
        cluster.publish()
        cluster.kube.store.delete(PODS, "team-b", "etl-1")
    elif change == "victim elsewhere":
        cluster.publish()
        cluster.kube.store.update(PODS, "team-b", "etl-0", moved_to("gpu-9"))
    elif change == "expired":
        cluster.publish(expires_at=cluster.clock.wall())
    code, out = cluster.run("team-a/big")
    assert code == 1 and out == ""
    assert error in capsys.readouterr().err
    assert cluster.approvals() == []


def test_a_pod_that_does_not_exist_is_exit_1(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cluster.run("team-a/nobody")[0] == 1
    assert capsys.readouterr().err == "stowage approve: pod team-a/nobody not found\n"


def test_an_approval_the_api_server_refuses_is_exit_2(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.publish()
    assert cluster.run("team-a/big", "--approvals-namespace", "elsewhere")[0] == 2
    assert "create an approval in elsewhere: HTTP 404" in capsys.readouterr().err


def test_a_missing_kubeconfig_is_exit_2(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.kubeconfig = tmp_path / "none"
    assert cluster.run("team-a/big")[0] == 2
    assert capsys.readouterr().err.startswith("stowage approve: cannot load the kubeconfig: ")


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["big"], "'big' is not NAMESPACE/NAME"),
        (["a/b/c"], "'a/b/c' is not NAMESPACE/NAME"),
        (["a/b", "--ttl", "0"], "'0': expected a positive number of seconds"),
        (["a/b", "--ttl", "soon"], "'soon' is not a number of seconds"),
    ],
)
def test_bad_arguments_are_refused(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    approve.add_arguments(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    assert error in capsys.readouterr().err
