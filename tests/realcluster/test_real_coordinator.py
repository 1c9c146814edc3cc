"""The coordinator against the real API server, with the RBAC it ships and nothing more.

Two real ``stowage coordinator`` processes authenticate as the ``stowage-coordinator``
ServiceAccount (a TokenRequest token), bound to the ClusterRoles of ``daemonset/base`` as
``kubectl kustomize`` renders them: every verb a test here needs — list/watch Nodes,
patch their annotations, get/create/update the Lease, create TokenReviews — comes from
those files, so removing one fails a test as it would fail in a cluster.

The agent side uses real ServiceAccount tokens: a pod of the ``stowage-agent``
ServiceAccount bound to a node, a TokenRequest bound to that pod with the coordinator's
audience, checked by the real API server's TokenReview (which names the pod's node).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from common import annotations as ann
from common import codec
from common.clock import SystemClock
from coordinator import ingest
from coordinator.config import EventSettings
from coordinator.kube.events import EventRecorder, EventType, ObjectRef, Recorded
from coordinator.kube.leader import Fence
from coordinator.metrics import CoordinatorMetrics
from hack.cluster import coordinator
from hack.cluster.controlplane import Program
from tests.coordinator.integration.integration_rig import GIB, node_report
from tests.kit import until
from tests.realcluster import kit

OWNER = "test-coordinator"
NODES = ("rc-coord-0", "rc-coord-1", "rc-coord-2")
LEASE = "stowage-coordinator"
SETTINGS = kit.coordinator_settings(LEASE, ingest={"auth": "tokenreview", "audience": kit.AUDIENCE})
TAKEOVER_S = 20.0


@pytest.fixture(scope="module")
def kubeconfig(cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shipped RBAC applied, three GPU nodes Ready, and a kubeconfig of the
    coordinator's ServiceAccount."""
    cluster.apply(kit.shipped_rbac())
    for name in NODES:
        cluster.add_node(name, OWNER)
    cluster.wait_ready(NODES)
    path = tmp_path_factory.mktemp("coordinator") / "coordinator.kubeconfig"
    yield cluster.kubeconfig_for(kit.COORDINATOR_SA, path)
    cluster.delete_owned(OWNER)


def agent_pod(cluster: kit.Cluster, node: str) -> client.V1Pod:
    """A pod of the agent's ServiceAccount bound to ``node`` (as the DaemonSet's would be)."""
    name = f"stowage-agent-{node}"
    try:
        return cluster.core.read_namespaced_pod(name, kit.NAMESPACE)
    except client.exceptions.ApiException as e:
        if e.status != 404:
            raise
    body = {
        "metadata": {"name": name, "labels": {kit.OWNER: OWNER}},
        "spec": {
            "serviceAccountName": kit.AGENT_SA,
            "nodeName": node,
            "containers": [{"name": "agent", "image": "stowage:test"}],
        },
    }
    return cluster.core.create_namespaced_pod(kit.NAMESPACE, body)


def post_report(url: str, node: str, token: str) -> int:
    data = codec.encode(node_report(node, free_2mib_b=64 * GIB))
    request = urllib.request.Request(
        url + ingest.REPORTS_PATH,
        data=data,
        method="POST",
        headers={"Content-Type": ingest.CONTENT_TYPE, "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


def annotation(cluster: kit.Cluster, node: str, key: str) -> str:
    found = cluster.core.read_node(node).metadata.annotations or {}
    return str(found.get(key, ""))


def lease_holder(cluster: kit.Cluster) -> str:
    """The Lease's holder identity; empty while there is no Lease or no holder."""
    try:
        lease = client.CoordinationV1Api(cluster.api).read_namespaced_lease(LEASE, kit.NAMESPACE)
    except client.exceptions.ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def leading(url: str) -> bool:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    return any(
        line.startswith("stowage_leader ") and line.endswith(" 1.0") for line in text.splitlines()
    )


def holder_pid(holder: str) -> int:
    """The pid in the Lease's holder identity (``host_pid_random``); -1 for none."""
    parts = holder.split("_")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else -1


def test_the_real_agent_reports_with_a_pod_bound_token_and_its_node_is_annotated(
    cluster: kit.Cluster, kubeconfig: Path, tmp_path: Path
) -> None:
    node = NODES[0]
    token = cluster.token(
        kit.AGENT_SA, audiences=(kit.AUDIENCE,), bound_pod=agent_pod(cluster, node)
    )
    token_file = tmp_path / "token"
    token_file.write_text(token)
    with coordinator.running(cluster.plane, kubeconfig, SETTINGS) as (_, url):
        cluster.plane.start(
            f"agent-{node}",
            [
                *coordinator.STOWAGE,
                "agent",
                "--coordinator",
                url,
                "--token-file",
                str(token_file),
                "--node-name",
                node,
                "--interval",
                "1",
                "--pods-source",
                "none",
            ],
            cwd=kit.REPO,
        )
        state = until(
            lambda: (
                annotation(cluster, node, ann.STATE).startswith("fresh")
                and annotation(cluster, node, ann.STATE)
            ),
            f"{node}'s {ann.STATE} annotation says fresh",
        )
        assert ";at=" in state
        # The agent's measurements of this machine, as the publisher writes them.
        assert annotation(cluster, node, ann.FULLNESS).startswith("cpu=")
        assert lease_holder(cluster), "the coordinator holds its Lease"


def test_a_token_reports_for_the_node_of_its_pod_and_no_other(
    cluster: kit.Cluster, kubeconfig: Path
) -> None:
    pod = agent_pod(cluster, NODES[1])
    token = cluster.token(kit.AGENT_SA, audiences=(kit.AUDIENCE,), bound_pod=pod)
    other_audience = cluster.token(kit.AGENT_SA, audiences=("someone-else",), bound_pod=pod)
    unbound = cluster.token(kit.AGENT_SA, audiences=(kit.AUDIENCE,))
    with coordinator.running(cluster.plane, kubeconfig, SETTINGS) as (_, url):
        assert post_report(url, NODES[1], token) == 200
        assert post_report(url, NODES[2], token) == 403, "a node reports only for itself"
        assert post_report(url, NODES[1], other_audience) == 401, "the coordinator's audience only"
        assert post_report(url, NODES[1], unbound) == 401, "a token naming no node"
        assert post_report(url, NODES[1], token[:-4] + "AAAA") == 401, "a forged signature"


@contextlib.contextmanager
def two_replicas(
    cluster: kit.Cluster, kubeconfig: Path
) -> Iterator[dict[int, tuple[Program, str]]]:
    """Two coordinators sharing the Lease, by pid, once one of them holds it."""
    with (
        coordinator.running(cluster.plane, kubeconfig, SETTINGS, "replica-a") as a,
        coordinator.running(cluster.plane, kubeconfig, SETTINGS, "replica-b") as b,
    ):
        by_pid = {a[0].process.pid: a, b[0].process.pid: b}
        until(lambda: holder_pid(lease_holder(cluster)) in by_pid, "a leader")
        yield by_pid


def test_kill_9_of_the_leader_hands_the_lease_to_the_other_replica_which_publishes(
    cluster: kit.Cluster, kubeconfig: Path
) -> None:
    with two_replicas(cluster, kubeconfig) as by_pid:
        killed = holder_pid(lease_holder(cluster))
        other = next(pid for pid in by_pid if pid != killed)
        os.kill(killed, signal.SIGKILL)
        until(
            lambda: holder_pid(lease_holder(cluster)) == other,
            "the surviving replica holds the Lease",
            TAKEOVER_S,
        )
        assert leading(by_pid[other][1])
        # The new leader publishes: a node added now gets its annotations from it alone.
        cluster.add_node("rc-coord-late", OWNER)
        until(
            lambda: annotation(cluster, "rc-coord-late", ann.STATE),
            "the new node annotated",
            TAKEOVER_S,
        )


def test_a_paused_leader_is_replaced_and_steps_down_when_it_resumes(
    cluster: kit.Cluster, kubeconfig: Path
) -> None:
    with two_replicas(cluster, kubeconfig) as by_pid:
        paused = holder_pid(lease_holder(cluster))
        other = next(pid for pid in by_pid if pid != paused)
        os.kill(paused, signal.SIGSTOP)
        try:
            until(
                lambda: holder_pid(lease_holder(cluster)) == other,
                "the other replica leads",
                TAKEOVER_S,
            )
        finally:
            os.kill(paused, signal.SIGCONT)
        until(
            lambda: not leading(by_pid[paused][1]),
            "the resumed replica steps down",
            TAKEOVER_S,
        )
        assert leading(by_pid[other][1])
        assert holder_pid(lease_holder(cluster)) == other


def test_events_about_a_node_and_a_pod_are_accepted_with_the_shipped_rbac(
    cluster: kit.Cluster, kubeconfig: Path
) -> None:
    """The recorder as the coordinator writes with it (its ServiceAccount, the shipped
    ClusterRole): the real API server takes a Node's Event only in ``default`` and a pod's
    only in the pod's namespace, and refuses the rest with 422."""
    fence = Fence(renew_deadline_s=3600.0, monotonic=time.monotonic)
    fence.renewed(time.monotonic())
    metrics = CoordinatorMetrics()
    api = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    recorder = EventRecorder(api, fence, SystemClock(), EventSettings(), metrics, instance="rc")
    pod = agent_pod(cluster, NODES[2])
    node_ref = ObjectRef.node(NODES[2])
    pod_ref = ObjectRef(
        kind="Pod", name=pod.metadata.name, namespace=kit.NAMESPACE, uid=pod.metadata.uid
    )
    assert (
        recorder.record(node_ref, EventType.NORMAL, "RealClusterProbe", "about a node")
        is Recorded.SENT
    )
    assert (
        recorder.record(pod_ref, EventType.NORMAL, "RealClusterProbe", "about a pod")
        is Recorded.SENT
    )
    seen = {
        (e.metadata.namespace, e.involved_object.kind)
        for e in cluster.core.list_event_for_all_namespaces(
            field_selector="reason=RealClusterProbe"
        ).items
    }
    assert seen == {("default", "Node"), (kit.NAMESPACE, "Pod")}
