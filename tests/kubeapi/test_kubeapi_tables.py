"""``kubectl get`` columns as the apiserver's printers define them, read from real kubectl
output (``-o wide`` too), with ages against an injected clock; and the pod STATUS and
RESTARTS rules on the container states kubectl users meet."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from collections.abc import Iterator

import pytest
from kubernetes import client

from hack.kubeapi import KubeApi, printers
from hack.kubeapi.resources import NAMESPACES
from tests.hosts import FakeClock
from tests.kubeapi.kubeapi_support import binding, needs_kubectl

AGE_S = 10.5 * 3600  # every object made by a test reads "10h" whatever second it was made


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> Iterator[KubeApi]:
    with KubeApi.in_thread(clock=clock) as api:
        yield api


def age(clock: FakeClock, obj: dict) -> None:
    """Move the clock to AGE_S after ``obj`` was created."""
    created = dt.datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    clock.wall_s = created.timestamp() + AGE_S


def table(output: str) -> list[dict[str, str]]:
    """kubectl's aligned columns as one dict per row: column names are separated by two
    or more spaces (a name may hold one), and each column starts where its name does."""
    header, *lines = output.splitlines()
    starts = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", header)]
    rows = []
    for line in lines:
        bounds = [start for _, start in starts[1:]] + [len(line)]
        rows.append(
            {
                name: line[start:end].strip()
                for (name, start), end in zip(starts, bounds, strict=True)
            }
        )
    return rows


def headers(output: str) -> list[str]:
    return re.split(r"\s{2,}", output.splitlines()[0].strip())


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60 + 7, "3h5m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (50 * 3600, "2d2h"),
        (10 * 86400 + 3600, "10d"),
        (3 * 365 * 86400, "3y"),
        (3 * 365 * 86400 + 4 * 86400, "3y4d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration_as_kubectl_shows_ages(seconds, shown):
    assert printers.human_duration(seconds) == shown


@needs_kubectl
def test_kubectl_get_pods_and_wide(kube, clock, kubectl, core):
    kube.add_node("worker-1", address="10.0.0.7")
    running = kube.add_pod("web", phase="Pending")
    kube.add_pod("queued", phase="Pending")
    core.create_namespaced_pod_binding(
        "web", "default", binding("web", "worker-1"), _preload_content=False
    )
    age(clock, running)
    out = kubectl("get", "pods")
    assert headers(out) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table(out) == [
        {"NAME": "queued", "READY": "0/1", "STATUS": "Pending", "RESTARTS": "0", "AGE": "10h"},
        {"NAME": "web", "READY": "1/1", "STATUS": "Running", "RESTARTS": "0", "AGE": "10h"},
    ]
    wide = kubectl("get", "pods", "-o", "wide")
    assert headers(wide) == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
        "READINESS GATES",
    ]  # fmt: skip
    rows = {r["NAME"]: r for r in table(wide)}
    assert [rows["web"][c] for c in ("IP", "NODE", "NOMINATED NODE", "READINESS GATES")] == [
        "10.244.0.2", "worker-1", "<none>", "<none>",
    ]  # fmt: skip
    assert [rows["queued"][c] for c in ("IP", "NODE")] == ["<none>", "<none>"]


@needs_kubectl
def test_kubectl_get_nodes_and_wide(kube, clock, kubectl):
    node = kube.add_node(
        "cp-1", address="10.0.0.7", labels={"node-role.kubernetes.io/control-plane": ""}
    )
    kube.add_node("worker-1", unschedulable=True)
    kube.add_node("worker-2", ready=False)
    age(clock, node)
    out = kubectl("get", "nodes")
    assert headers(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [(r["NAME"], r["STATUS"], r["ROLES"], r["AGE"], r["VERSION"]) for r in table(out)] == [
        ("cp-1", "Ready", "control-plane", "10h", "v1.32.4"),
        ("worker-1", "Ready,SchedulingDisabled", "<none>", "10h", "v1.32.4"),
        ("worker-2", "NotReady", "<none>", "10h", "v1.32.4"),
    ]
    wide = kubectl("get", "nodes", "-o", "wide")
    assert headers(wide) == [
        "NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
        "KERNEL-VERSION", "CONTAINER-RUNTIME",
    ]  # fmt: skip
    first = table(wide)[0]
    assert [first[c] for c in headers(wide)[5:]] == [
        "10.0.0.7", "<none>", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "containerd://1.7.24",
    ]  # fmt: skip


@needs_kubectl
def test_kubectl_get_namespaces_leases_events_and_pdbs(kube, clock, kubectl, api_client):
    age(clock, kube.store.list(NAMESPACES, None)[0][0])
    out = kubectl("get", "namespaces")
    assert headers(out) == ["NAME", "STATUS", "AGE"]
    assert table(out)[0] == {"NAME": "default", "STATUS": "Active", "AGE": "10h"}

    lease = client.V1Lease(
        metadata=client.V1ObjectMeta(name="stowage-leader"),
        spec=client.V1LeaseSpec(holder_identity="coordinator-0"),
    )
    client.CoordinationV1Api(api_client).create_namespaced_lease("default", lease)
    out = kubectl("get", "leases")
    assert headers(out) == ["NAME", "HOLDER", "AGE"]
    assert table(out) == [{"NAME": "stowage-leader", "HOLDER": "coordinator-0", "AGE": "10h"}]

    seen = dt.datetime.fromtimestamp(clock.wall_s - 150, dt.UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="worker-1.throttled"),
        involved_object=client.V1ObjectReference(kind="Node", name="worker-1"),
        reason="Throttled",
        message="best-effort quota applied ",
        type="Normal",
        source=client.V1EventSource(component="stowage-coordinator"),
        first_timestamp=seen,
        last_timestamp=seen,
        count=3,
    )
    client.CoreV1Api(api_client).create_namespaced_event("default", event)
    out = kubectl("get", "events")
    assert headers(out) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert table(out) == [
        {
            "LAST SEEN": "2m30s",
            "TYPE": "Normal",
            "REASON": "Throttled",
            "OBJECT": "node/worker-1",
            "MESSAGE": "best-effort quota applied",
        }
    ]
    wide = table(kubectl("get", "events", "-o", "wide"))[0]
    assert [wide[c] for c in ("SOURCE", "FIRST SEEN", "COUNT", "NAME")] == [
        "stowage-coordinator", "2m30s", "3", "worker-1.throttled",
    ]  # fmt: skip

    kube.add_pdb("web-pdb", "default", {"app": "web"}, disruptions_allowed=1, min_available=2)
    out = kubectl("get", "pdb")
    assert headers(out) == [
        "NAME",
        "MIN AVAILABLE",
        "MAX UNAVAILABLE",
        "ALLOWED DISRUPTIONS",
        "AGE",
    ]
    assert table(out) == [
        {
            "NAME": "web-pdb",
            "MIN AVAILABLE": "2",
            "MAX UNAVAILABLE": "N/A",
            "ALLOWED DISRUPTIONS": "1",
            "AGE": "10h",
        }
    ]


NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC).timestamp()


def pod(phase="Running", statuses=(), init=(), init_statuses=(), **extra) -> dict:
    containers = [{"name": s.get("name", f"c{i}")} for i, s in enumerate(statuses)] or [
        {"name": "main"}
    ]
    status = {"phase": phase, "containerStatuses": list(statuses), **extra.pop("status", {})}
    if init_statuses:
        status["initContainerStatuses"] = list(init_statuses)
    return {
        "metadata": {"name": "p", "creationTimestamp": "2026-01-01T11:00:00Z", **extra},
        "spec": {"containers": containers, "initContainers": list(init)},
        "status": status,
    }


RUNNING = {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}}
DONE = {"name": "a", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}


@pytest.mark.parametrize(
    ("obj", "ready", "status", "restarts"),
    [
        (pod(statuses=[RUNNING]), "1/1", "Running", "0"),
        (
            pod(
                statuses=[
                    RUNNING,
                    {
                        "name": "b",
                        "ready": False,
                        "restartCount": 3,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"finishedAt": "2026-01-01T11:58:00Z"}},
                    },
                ]
            ),
            "1/2",
            "CrashLoopBackOff",
            "3 (2m ago)",
        ),
        (
            pod(
                "Succeeded",
                [{"name": "a", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}],
            ),
            "0/1",
            "Completed",
            "0",
        ),
        (
            pod(statuses=[{"name": "a", "state": {"terminated": {"exitCode": 137}}}]),
            "0/1",
            "ExitCode:137",
            "0",
        ),
        (
            pod(statuses=[RUNNING], deletionTimestamp="2026-01-01T12:00:30Z"),
            "1/1",
            "Terminating",
            "0",
        ),
        (
            pod(
                "Pending",
                init=[{"name": "setup"}],
                init_statuses=[{"name": "setup", "state": {"running": {}}}],
            ),
            "0/1",
            "Init:0/1",
            "0",
        ),
        (
            pod(
                "Pending",
                init=[{"name": "setup"}],
                init_statuses=[{"name": "setup", "state": {"terminated": {"exitCode": 2}}}],
            ),
            "0/1",
            "Init:ExitCode:2",
            "0",
        ),
        (
            pod(
                init=[{"name": "proxy", "restartPolicy": "Always"}],
                init_statuses=[
                    {"name": "proxy", "started": True, "ready": True, "state": {"running": {}}}
                ],
                statuses=[RUNNING],
            ),
            "2/2",
            "Running",
            "0",
        ),
        (
            pod(
                "Pending",
                status={
                    "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
                    ]
                },
            ),
            "0/1",
            "SchedulingGated",
            "0",
        ),
        (pod("Failed", status={"reason": "Evicted"}), "0/1", "Evicted", "0"),
        (
            pod(
                statuses=[DONE, RUNNING | {"name": "b"}],
                status={"conditions": [{"type": "Ready", "status": "True"}]},
            ),
            "1/2",
            "Running",  # a finished container beside a running one: the pod still runs
            "0",
        ),
        (
            pod(
                statuses=[DONE, RUNNING | {"name": "b"}],
                status={"conditions": [{"type": "Ready", "status": "False"}]},
            ),
            "1/2",
            "NotReady",
            "0",
        ),
    ],
)
def test_pod_ready_status_and_restarts(obj, ready, status, restarts):
    cells, _ = printers.row("Pod", obj, NOW)
    assert cells[1:5] == [ready, status, restarts, "60m"]


def test_finished_pods_rows_are_completed():
    _, conditions = printers.row("Pod", pod("Succeeded"), NOW)
    assert conditions == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    assert printers.row("Pod", pod("Running"), NOW)[1] == []


def test_types_without_a_printer_keep_name_and_created_at(kube, api_client):
    review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token="x"))
    answer = client.AuthenticationV1Api(api_client).create_token_review(
        review,
        _headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
        _preload_content=False,
    )
    got = answer.json()
    assert [c["name"] for c in got["columnDefinitions"]] == ["Name", "Created At"]


@needs_kubectl
def test_kubectl_get_watch_prints_rows_under_one_header(kube, clock, core, tmp_path):
    kube.add_node("worker-1")
    created = kube.add_pod("web", phase="Pending")
    age(clock, created)
    kube.kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "kubeconfig")}
    watching = subprocess.Popen(
        ["kubectl", "--cache-dir", str(tmp_path / "cache"), "get", "pods", "--watch"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert watching.stdout is not None
        lines = [watching.stdout.readline(), watching.stdout.readline()]
        core.create_namespaced_pod_binding(
            "web", "default", binding("web", "worker-1"), _preload_content=False
        )  # two MODIFIED: bound, then started by the emulated kubelet
        lines += [watching.stdout.readline(), watching.stdout.readline()]
    finally:
        watching.kill()
        watching.communicate(timeout=30)
    assert [line.split() for line in lines] == [
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        ["web", "0/1", "Pending", "0", "10h"],
        ["web", "0/1", "Pending", "0", "10h"],
        ["web", "1/1", "Running", "0", "10h"],
    ]
