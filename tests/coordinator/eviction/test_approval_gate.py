"""The approval gate of the eviction executor against the API emulator: a plan that needs a
person's approval is published on the pending pod with how to approve it, and executed
only on an approval ConfigMap in the coordinator's own namespace that names the pod, the
plan and the digest of its victims, before it expires, once. Whatever the pod's owner
writes — the old approval annotation, ``true``, an approval in their own namespace —
approves nothing. The ids and digests expected here are computed from their definition
(SHA-256 of ``node|sorted UIDs``; of ``pod|digest``), not by the code under test."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from cli import approve as approve_cli
from common import annotations as ann
from coordinator.eviction.answers import Plan, Victim
from coordinator.kube.approvals import LABEL, PLAN_KEY
from hack.kubeapi import KubeApi
from hack.kubeapi.faults import Fault
from hack.kubeapi.resources import PODS
from tests.coordinator.eviction.executorrig import COORDINATOR_NS, Rig, preemption

POD = "default/big"


def digest_of(node: str, *victims: Victim) -> str:
    text = node + "|" + ",".join(sorted(v.uid for v in victims))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def id_of(pod: str, digest: str) -> str:
    return hashlib.sha256(f"{pod}|{digest}".encode()).hexdigest()[:12]


def approval(
    rig: Rig, plan: Plan, *, expires_in_s: float = 600, namespace: str = COORDINATOR_NS,
    pod: str = POD, digest: str | None = None, names: str | None = None,
    **data: str,
) -> str:  # fmt: skip
    """An approval ConfigMap as an operator writes it by hand (of ``plan``, or labelled and
    naming plan id ``names``); its name."""
    digest = digest or digest_of(plan.node, *plan.victims)
    pid = names or id_of(pod, digest)
    body = {
        "metadata": {"generateName": f"stowage-approval-{pid}-", "labels": {LABEL: pid}},
        "data": {
            "pod": pod,
            "plan": pid,
            "digest": digest,
            "expires": ann.timestamp(rig.clock.wall() + expires_in_s),
            **data,
        },
    }
    rig.kube.add_namespace(namespace)
    made = client.CoreV1Api(rig.client).create_namespaced_config_map(namespace, body)
    return str(made.metadata.name)


def pending(rig: Rig) -> None:
    rig.pod("big", node=None, phase="Pending")


def annotate(rig: Rig, values: dict[str, str]) -> None:
    def update(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].setdefault("annotations", {}).update(values)
        obj["metadata"]["resourceVersion"] = ""
        return obj

    rig.kube.store.update(PODS, "default", "big", update)


def refusals(rig: Rig) -> list[str]:
    return [e["message"] for e in rig.events("big") if e["reason"] == "PreemptionApprovalRefused"]


# ---------------------------------------------------------------------- publishing


async def test_a_plan_is_published_on_the_pod_with_how_to_approve_it(rig: Rig) -> None:
    pending(rig)
    a, b = rig.pod("a"), rig.pod("b")
    plan = preemption([b, a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    digest = digest_of("n1", a, b)
    pairs, _ = ann.parse(rig.annotations("big")[PLAN_KEY])
    assert pairs == {
        "id": id_of(POD, digest),
        "digest": digest,
        "node": "n1",
        "victims": f"default/b:{b.uid}|default/a:{a.uid}",
        "expires": ann.timestamp(rig.clock.wall() + 900),
        "approve": "kubectl stowage approve default/big --approvals-namespace stowage-system",
    }
    (proposed,) = [e for e in rig.events("big") if e["reason"] == "PreemptionPlanProposed"]
    message = proposed["message"]
    assert message.startswith(f"plan {id_of(POD, digest)} awaits approval until ")
    assert "big fits on n1; approve: kubectl stowage approve default/big" in message
    assert message.endswith(" | kubectl create -f -")
    assert rig.exists(a) and rig.exists(b)


async def test_a_long_plan_is_cut_before_the_command_to_copy(rig: Rig) -> None:
    pending(rig)
    victims = [rig.pod(f"victim-with-a-long-name-{i:02d}") for i in range(10)]
    reason = "big fits on n1 after evicting " + ", ".join(f"default/{v.name}" for v in victims)
    plan = Plan("preemption", "n1", tuple(victims), POD, "team-a", reason * 3, True, (10.0,))
    assert await rig.cycle(plan) == ["awaiting-approval"]
    (proposed,) = [e for e in rig.events("big") if e["reason"] == "PreemptionPlanProposed"]
    message = proposed["message"]
    assert len(message) <= 1024
    assert "…; approve: kubectl stowage approve default/big" in message
    expires = ann.timestamp(rig.clock.wall() + 900)
    tail = (
        f'"digest":"{digest_of("n1", *victims)}","expires":"{expires}"}}}}\' | kubectl create -f -'
    )
    assert message.endswith(tail)


# ---------------------------------------------------------------------- approving


async def test_an_operator_approval_executes_the_plan(rig: Rig) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)
    approval(rig, plan)
    assert await rig.cycle(plan) == ["evicted"]
    assert not rig.exists(a)
    assert PLAN_KEY not in rig.annotations("big")
    assert "PreemptionExecuted" in rig.reasons("big")


async def test_an_approval_is_used_once(kube: KubeApi) -> None:
    rig = Rig(kube)  # dry run: the victims stay, so the same plan comes back
    try:
        pending(rig)
        a = rig.pod("a")
        plan = preemption([a], needs_approval=True)
        assert await rig.cycle(plan) == ["awaiting-approval"]
        used = approval(rig, plan, expires_in_s=3600)
        assert await rig.cycle(plan) == ["dry-run"]
        rig.clock.advance(300)  # the queue's cooldown
        assert await rig.cycle(plan) == ["awaiting-approval"]  # proposed again
        assert await rig.cycle(plan) == ["awaiting-approval"]
        assert rig.log.lines()[-1].endswith(f"{used} was used already")
        approval(rig, plan)  # a new approval is a new decision
        assert await rig.cycle(plan) == ["dry-run"]
    finally:
        rig.close()


async def test_kubectl_stowage_approve_approves_the_published_plan(
    rig: Rig, tmp_path: Path
) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    config = rig.kube.kubeconfig(tmp_path / "kubeconfig")
    args = argparse.Namespace(
        pod=POD, approvals_namespace=COORDINATOR_NS, ttl=900.0, kubeconfig=str(config),
        context=None,
    )  # fmt: skip
    out = io.StringIO()
    assert await asyncio.to_thread(approve_cli.main, args, out, rig.clock) == 0
    assert f"evict default/a (UID {a.uid}) on n1" in out.getvalue()
    assert await rig.cycle(plan) == ["evicted"]
    assert not rig.exists(a)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
async def test_the_kubectl_command_in_the_event_approves_the_plan(rig: Rig, tmp_path: Path) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    (proposed,) = [e for e in rig.events("big") if e["reason"] == "PreemptionPlanProposed"]
    command = re.search(r"echo '[^']*' \| kubectl create -f -", proposed["message"])
    assert command is not None, proposed["message"]
    config = rig.kube.kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)}
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", command[0]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert await rig.cycle(plan) == ["evicted"]
    assert not rig.exists(a)


# ------------------------------------------------------------ what approves nothing


async def test_patching_the_pending_pod_approves_nothing(rig: Rig) -> None:
    """The pod's owner can write its annotations and create objects in its namespace."""
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    pid = id_of(POD, digest_of("n1", a))
    for value in (pid, "true"):
        annotate(rig, {"stowage.io/approve-preemption": value})
        assert await rig.cycle(plan) == ["awaiting-approval"]
    approval(rig, plan, namespace="default")  # right contents, the owner's namespace
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)
    assert rig.evicted() == 0


async def test_an_approval_of_other_victims_executes_nothing(rig: Rig) -> None:
    pending(rig)
    a, b = rig.pod("a"), rig.pod("b")
    first = preemption([a], needs_approval=True)
    assert await rig.cycle(first) == ["awaiting-approval"]
    approval(rig, first)
    second = preemption([b], needs_approval=True)  # the planner now picks another victim
    assert await rig.cycle(second) == ["awaiting-approval"]
    assert await rig.cycle(second) == ["awaiting-approval"]
    assert rig.exists(a) and rig.exists(b)
    pairs, _ = ann.parse(rig.annotations("big")[PLAN_KEY])
    assert pairs["digest"] == digest_of("n1", b)


async def test_an_approval_labelled_for_the_plan_but_naming_other_victims_is_refused(
    rig: Rig,
) -> None:
    pending(rig)
    a, b = rig.pod("a"), rig.pod("b")
    plan = preemption([b], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    current = id_of(POD, digest_of("n1", b))
    # Copied from an approval of an earlier plan (victim a) and relabelled by hand.
    approval(rig, plan, digest=digest_of("n1", a), names=current)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(b)
    (told,) = refusals(rig)
    assert f"approves victims {digest_of('n1', a)}" in told and "the victims changed" in told


async def test_an_expired_approval_executes_nothing(rig: Rig) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    name = approval(rig, plan, expires_in_s=60)
    rig.clock.advance(60)  # the plan itself waits 900 s
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)
    assert refusals(rig) == [
        f"plan {id_of(POD, digest_of('n1', a))} not approved: {name} expired at"
        f" {ann.timestamp(rig.clock.wall())}"
    ]
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert len(refusals(rig)) == 1  # told once


async def test_an_approval_for_another_pod_executes_nothing(rig: Rig) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    pid = id_of(POD, digest_of("n1", a))
    approval(rig, plan, names=pid, pod="default/other")
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)
    assert "is for pod default/other, not default/big" in refusals(rig)[0]


async def test_a_malformed_approval_is_told_and_changes_nothing(rig: Rig) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    name = approval(rig, plan, expires="tomorrow")
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)
    assert refusals(rig)[0].endswith(f"{name}: data.expires: 'tomorrow' is not an RFC 3339 time")


async def test_an_unreadable_approval_store_executes_nothing(rig: Rig) -> None:
    pending(rig)
    a = rig.pod("a")
    plan = preemption([a], needs_approval=True)
    assert await rig.cycle(plan) == ["awaiting-approval"]
    approval(rig, plan)
    rig.kube.faults.add(Fault.error(500, method="GET", path="/configmaps"))
    assert await rig.cycle(plan) == ["awaiting-approval"]
    assert rig.exists(a)
    assert "HTTP 500" in rig.log.lines()[-1]


async def test_an_unapproved_plan_expires_and_a_late_approval_does_nothing(
    kube: KubeApi,
) -> None:
    rig = Rig(kube, enabled=True, approval_ttl_s=600)
    try:
        pending(rig)
        a = rig.pod("a")
        plan = preemption([a], needs_approval=True)
        assert await rig.cycle(plan) == ["awaiting-approval"]
        rig.clock.advance(600)
        await rig.executor.start_cycle()
        assert PLAN_KEY not in rig.annotations("big")
        assert "PreemptionPlanExpired" in rig.reasons("big")
        # Approved too late: no plan awaits, and no new one is proposed for a cooldown.
        approval(rig, plan)
        assert await rig.cycle(plan) == ["awaiting-approval"]
        assert rig.exists(a)
        assert "expired unapproved" in rig.log.lines()[-1]
    finally:
        rig.close()
