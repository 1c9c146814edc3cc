"""The pods collector against the real Kubernetes client and a real HTTP server on 127.0.0.1.

``FakeKube`` is a small, faithful stand-in for both sources: ``GET /api/v1/pods`` honours
``fieldSelector=spec.nodeName=X`` and answers 401 with a ``Status`` for a wrong bearer
token, as the API server does; ``GET /pods`` answers the kubelet's PodList. It runs in its
own thread because the collector is synchronous. TLS tests use a throwaway self-signed
certificate made with the ``openssl`` command and are skipped where it is missing.
"""

from __future__ import annotations

import json
import logging
import shutil
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from agent.collectors import pods
from agent.collectors.base import NoData
from agent.hostpaths import HostPaths
from agent.kernelfiles import CollectorError
from agent.settings import AgentSettings, PodsSettings
from common import codec, podspec
from common.schema import PodsSection, Resources
from tests.kit import free_port

NODE = "node-a"
TOKEN = "good-token-0123456789"
MI = 2**20
GI = 2**30
NOW = 1_700_000_000.0


class FakeClock:
    def wall(self) -> float:
        return NOW

    def monotonic(self) -> float:
        return 100.0


# ----------------------------------------------------------------------- pod JSON


def container(
    name: str,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    c: dict[str, Any] = {
        "name": name,
        "image": f"registry.example/{name}:1.0",
        "imagePullPolicy": "IfNotPresent",
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def pod_json(
    name: str,
    node: str = NODE,
    *,
    namespace: str = "default",
    phase: str = "Running",
    qos: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as the API server stores it (trimmed of fields the collector ignores)."""
    spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "containers": containers if containers is not None else [container("app")],
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if overhead:
        spec["overhead"] = overhead
        spec["runtimeClassName"] = "kata"
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    status: dict[str, Any] = {
        "phase": phase,
        "hostIP": "10.0.0.7",
        "podIP": "10.244.1.9",
        "startTime": "2024-05-01T10:00:00Z",
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if phase == "Running" else "False",
                "lastTransitionTime": "2024-05-01T10:00:05Z",
            }
        ],
    }
    if qos:
        status["qosClass"] = qos
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}")),
            "resourceVersion": "4711",
            "creationTimestamp": "2024-05-01T09:59:58Z",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": status,
    }


def trainer() -> dict[str, Any]:
    """The worked example for the arithmetic test (expected values in that test)."""
    return pod_json(
        "trainer",
        namespace="ml",
        priority=1000,
        priority_class="batch-high",
        containers=[
            container(
                "main",
                requests={
                    "cpu": "2",
                    "memory": "4Gi",
                    "nvidia.com/gpu": "1",
                    "hugepages-2Mi": "256Mi",
                    "example.com/foo": "3",
                },
                limits={
                    "cpu": "4",
                    "memory": "8Gi",
                    "nvidia.com/gpu": "1",
                    "hugepages-2Mi": "256Mi",
                    "example.com/foo": "3",
                },
            ),
            container(
                "helper", requests={"cpu": "250m", "memory": "256Mi"}, limits={"memory": "512Mi"}
            ),
        ],
        init_containers=[
            container(
                "setup",
                requests={"cpu": "3", "memory": "1Gi"},
                limits={"cpu": "3", "memory": "1Gi"},
            ),
            container(
                "proxy",
                requests={"cpu": "500m", "memory": "512Mi"},
                limits={"cpu": "1", "memory": "1Gi"},
                restart_policy="Always",
            ),
            container("migrate", requests={"cpu": "2", "memory": "6Gi"}, limits={"memory": "6Gi"}),
        ],
        overhead={"cpu": "100m", "memory": "128Mi"},
        labels={"app": "trainer", "kueue.x-k8s.io/queue-name": "team-a"},
        annotations={"volcano.sh/queue-name": "research"},
    )


def cluster_pods() -> list[dict[str, Any]]:
    guaranteed = {"cpu": "500m", "memory": "1Gi"}
    return [
        trainer(),
        pod_json(
            "web",
            qos="Guaranteed",
            containers=[container("nginx", requests=guaranteed, limits=guaranteed)],
        ),
        pod_json("idle"),
        pod_json("done-job", phase="Succeeded", qos="BestEffort"),
        pod_json("crashed", phase="Failed", qos="BestEffort"),
        pod_json("elsewhere", node="node-b", qos="BestEffort"),
    ]


# ---------------------------------------------------------------------- the server


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeKube:
    """API server (``/api/v1/pods``) and kubelet (``/pods``) for the pods of ``NODE``."""

    def __init__(self, pods_: list[dict[str, Any]], tls: ssl.SSLContext | None = None) -> None:
        self.pods = pods_
        self.token = TOKEN
        self.fail_with: int | None = None
        self.hang = False
        self.release = threading.Event()
        self.queries: list[dict[str, list[str]]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.kube = self  # type: ignore[attr-defined]
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        kube: FakeKube = self.server.kube  # type: ignore[attr-defined]
        url = urlparse(self.path)
        if kube.hang:
            kube.release.wait(10)
        if url.path == "/api/v1/pods":
            self._apiserver(kube, parse_qs(url.query))
        elif url.path == "/pods":
            self._kubelet(kube)
        else:
            self._send(404, _status(404, "NotFound", "the server could not find the resource"))

    def _authorized(self, kube: FakeKube) -> bool:
        # Kubernetes' bearer-token authenticator takes the scheme in any case.
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        return scheme.lower() == "bearer" and token == kube.token

    def _apiserver(self, kube: FakeKube, query: dict[str, list[str]]) -> None:
        kube.queries.append(query)
        if not self._authorized(kube):
            return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
        if kube.fail_with == 403:
            return self._send(
                403,
                _status(
                    403,
                    "Forbidden",
                    "pods is forbidden: User "
                    '"system:serviceaccount:stowage:agent" cannot list '
                    'resource "pods" in API group "" at the cluster scope',
                ),
            )
        if kube.fail_with is not None:
            return self._send(
                kube.fail_with,
                _status(kube.fail_with, "ServiceUnavailable", "the server is unable to handle it"),
            )
        items = kube.pods
        for selector in query.get("fieldSelector", []):
            field, sep, value = selector.partition("=")
            if field != "spec.nodeName" or not sep:
                return self._send(
                    400, _status(400, "BadRequest", f'field label not supported: "{field}"')
                )
            value = value.removeprefix("=")
            items = [p for p in items if p["spec"].get("nodeName") == value]
        self._send(
            200,
            {
                "apiVersion": "v1",
                "kind": "PodList",
                "metadata": {"resourceVersion": "123456"},
                "items": items,
            },
        )

    def _kubelet(self, kube: FakeKube) -> None:
        if not self._authorized(kube):
            return self._send(401, "Unauthorized", content_type="text/plain; charset=utf-8")
        items = [p for p in kube.pods if p["spec"].get("nodeName") == NODE]
        self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# ------------------------------------------------------------------------ fixtures


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    server = FakeKube(cluster_pods())
    yield server
    server.stop()


@pytest.fixture
def make_collector() -> Iterator[Callable[..., pods.PodsCollector]]:
    """Build collectors (``environ`` empty unless given) and close them all afterwards."""
    made: list[pods.PodsCollector] = []

    def make(environ: dict[str, str] | None = None, **settings: Any) -> pods.PodsCollector:
        c = pods.PodsCollector(
            PodsSettings(**settings), NODE, FakeClock(), environ={} if environ is None else environ
        )
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def write_kubeconfig(path: Path, server: str, token: str, ca_file: Path | None = None) -> str:
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "test", "cluster": cluster}],
                "users": [{"name": "agent", "user": {"token": token}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "agent"}}],
            }
        )
    )
    return str(path)


@pytest.fixture
def kubeconfig(kube: FakeKube, tmp_path: Path) -> str:
    return write_kubeconfig(tmp_path / "kubeconfig", kube.url, TOKEN)


@pytest.fixture
def token_file(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return str(path)


def by_name(section: PodsSection) -> dict[str, Any]:
    return {p.name: p for p in section.pods}


# --------------------------------------------------------------------------- tests


def test_apiserver_lists_only_this_nodes_live_pods(kube, kubeconfig, make_collector):
    section = make_collector(source="apiserver", kubeconfig=kubeconfig).collect()

    assert section.source == "apiserver"
    assert section.measured_at == NOW
    assert sorted(by_name(section)) == ["idle", "trainer", "web"]  # no node-b, no finished
    assert kube.queries[-1]["fieldSelector"] == [f"spec.nodeName={NODE}"]
    assert kube.queries[-1]["resourceVersion"] == ["0"]  # served from the watch cache
    assert codec.validate(section) == section
    assert codec.decode(PodsSection, codec.encode(section)) == section


def test_pod_identity_priority_and_given_qos(kube, kubeconfig, make_collector):
    got = by_name(make_collector(source="apiserver", kubeconfig=kubeconfig).collect())

    t = got["trainer"]
    assert (t.namespace, t.phase, t.priority, t.priority_class) == (
        "ml",
        "Running",
        1000,
        "batch-high",
    )
    assert t.uid == str(uuid.uuid5(uuid.NAMESPACE_URL, "ml/trainer"))
    assert got["web"].qos_class == "Guaranteed"
    assert (got["idle"].priority, got["idle"].priority_class) == (0, None)


def test_requests_and_limits_follow_the_scheduler(kube, kubeconfig, make_collector):
    """Worked by hand for ``trainer()``.

    Requests. Containers: cpu 2 + 0.25 = 2250m, memory 4Gi + 256Mi = 4352Mi.
    Init, in order (sidecar total starts at 0):
      setup   (regular): 3000m, 1024Mi                        -> init peak 3000m, 1024Mi
      proxy   (sidecar): adds 500m/512Mi to the containers    -> sum 2750m, 4864Mi
                         sidecar total now 500m, 512Mi
      migrate (regular): 2000m + 500m, 6144Mi + 512Mi         -> init peak 3000m, 6656Mi
    max(sum, init peak) = 3000m, 6656Mi; plus overhead 100m, 128Mi = 3100m, 6784Mi.

    Limits. Containers: cpu 4000m (helper has none), memory 8Gi + 512Mi = 8704Mi.
      setup: 3000m, 1024Mi -> peak 3000m, 1024Mi
      proxy: sum 5000m, 9728Mi; sidecar total 1000m, 1024Mi
      migrate: 0 + 1000m, 6144Mi + 1024Mi = 7168Mi -> peak 3000m, 7168Mi
    max = 5000m, 9728Mi; overhead raises both (both limits exist) -> 5100m, 9856Mi.
    GPU, hugepages and example.com/foo only appear in ``main``.
    """
    t = by_name(make_collector(source="apiserver", kubeconfig=kubeconfig).collect())["trainer"]

    assert t.requests == Resources(
        cpu_m=3100, mem_b=6784 * MI, gpu=1, hugepages_b=256 * MI, extended={"example.com/foo": 3}
    )
    assert t.limits == Resources(
        cpu_m=5100, mem_b=9856 * MI, gpu=1, hugepages_b=256 * MI, extended={"example.com/foo": 3}
    )
    assert t.qos_class == "Burstable"  # computed: qosClass omitted, helper has no cpu limit


def test_overhead_is_not_added_to_missing_limits():
    pod = pod_json(
        "kata",
        overhead={"cpu": "250m", "memory": "160Mi"},
        containers=[container("c", requests={"cpu": "1"}, limits={"memory": "1Gi"})],
    )

    # The memory limit is also the request (API defaulting), then overhead is added.
    assert podspec.requests(pod) == {"cpu": 1.25, "memory": GI + 160 * MI}
    assert podspec.limits(pod) == {"memory": GI + 160 * MI}  # no cpu limit: stays absent


def test_rounding_happens_once_after_summing():
    pod = pod_json(
        "tiny",
        containers=[
            container("a", requests={"cpu": "0.5m"}),
            container("b", requests={"cpu": "0.5m"}),
        ],
    )
    assert podspec.totals(podspec.requests(pod)).cpu_m == 1  # Go: 1m, not 1m + 1m


@pytest.mark.parametrize(
    ("containers", "init", "expected"),
    [
        # Limits only: API defaulting makes them the requests too.
        (
            [
                container("a", limits={"cpu": "1", "memory": "1Gi"}),
                container("b", limits={"cpu": "200m", "memory": "64Mi"}),
            ],
            [],
            "Guaranteed",
        ),
        (
            [
                container(
                    "a",
                    requests={"cpu": "1", "memory": "1Gi"},
                    limits={"cpu": "1", "memory": "1Gi"},
                )
            ],
            [container("init", limits={"cpu": "1", "memory": "1Gi"})],
            "Guaranteed",
        ),
        (
            [container("a", requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1"})],
            [],
            "Burstable",
        ),  # no memory limit
        (
            [
                container(
                    "a",
                    requests={"cpu": "500m", "memory": "1Gi"},
                    limits={"cpu": "1", "memory": "1Gi"},
                )
            ],
            [],
            "Burstable",
        ),  # request < limit
        (
            [container("a", limits={"cpu": "1", "memory": "1Gi"})],
            [container("init", requests={"cpu": "100m"})],
            "Burstable",
        ),  # init lacks limits
        ([container("a"), container("b")], [], "BestEffort"),
        ([container("a", requests={"cpu": "0"})], [], "BestEffort"),  # zero counts as unset
        (
            [container("a", limits={"nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"})],
            [],
            "BestEffort",
        ),  # only cpu and memory decide QoS
    ],
)
def test_qos_class_is_computed_like_kubernetes(containers, init, expected):
    assert podspec.qos_class(pod_json("p", containers=containers, init_containers=init)) == expected


def test_qos_class_uses_pod_level_resources_when_set():
    data = pod_json("p", containers=[container("a"), container("b")])
    data["spec"]["resources"] = {"limits": {"cpu": "2", "memory": "2Gi"}}
    pod = data

    assert podspec.qos_class(pod) == "Guaranteed"
    assert podspec.requests(pod) == {"cpu": 2, "memory": 2 * GI}


def test_labels_are_filtered_and_labels_win_over_annotations(kube, kubeconfig, make_collector):
    kube.pods = [
        pod_json(
            "p",
            labels={"app": "x", "kueue.x-k8s.io/queue-name": "team-a", "stowage.io/qos": "label"},
            annotations={
                "volcano.sh/queue-name": "research",
                "stowage.io/qos": "annotation",
                "stowage.io/checkpoint": "x" * 5000,
                "kubectl.kubernetes.io/x": "{}",
            },
        )
    ]
    collector = make_collector(
        source="apiserver",
        kubeconfig=kubeconfig,
        label_keys=(
            "kueue.x-k8s.io/queue-name",
            "volcano.sh/queue-name",
            "stowage.io/qos",
            "stowage.io/checkpoint",
            "stowage.io/absent",
        ),
    )

    (p,) = collector.collect().pods
    # The 5000-character annotation exceeds the schema's text cap: dropped, pod kept.
    assert p.labels == {
        "kueue.x-k8s.io/queue-name": "team-a",
        "volcano.sh/queue-name": "research",
        "stowage.io/qos": "label",
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Through the API server: only the mirror annotation, which the kubelet never runs
        # a pod with; config.source there is whatever the pod's owner wrote.
        ("apiserver", {"mirror": True, "file": False, "api": False, "plain": False}),
        # The kubelet's own list: it writes config.source on every pod itself.
        ("kubelet", {"mirror": True, "file": True, "api": False, "plain": False}),
    ],
)
def test_static_pods_are_marked_by_what_the_kubelet_controls(
    kube, kubeconfig, token_file, make_collector, source, expected
):
    kube.pods = [
        pod_json("mirror", annotations={"kubernetes.io/config.mirror": "0f3c"}),
        pod_json("file", annotations={"kubernetes.io/config.source": "file"}),
        pod_json("api", annotations={"kubernetes.io/config.source": "api"}),
        pod_json("plain"),
    ]
    settings = (
        {"kubeconfig": kubeconfig}
        if source == "apiserver"
        else {"kubelet_url": kube.url, "token_file": token_file}
    )
    section = make_collector(source=source, **settings).collect()
    assert {p.name: p.static for p in section.pods} == expected


def test_pod_with_malformed_quantity_is_skipped_and_warned_once(
    kube, kubeconfig, make_collector, caplog
):
    kube.pods = [
        *cluster_pods(),
        pod_json("broken", namespace="ns", containers=[container("c", requests={"cpu": "lots"})]),
        pod_json("negative", containers=[container("c", requests={"memory": "-1Gi"})]),
    ]
    collector = make_collector(source="apiserver", kubeconfig=kubeconfig)

    with caplog.at_level(logging.WARNING, logger=pods.__name__):
        first = collector.collect()
        second = collector.collect()

    assert sorted(by_name(first)) == sorted(by_name(second)) == ["idle", "trainer", "web"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2
    assert "ns/broken" in warned[0] and "lots" in warned[0]
    assert "default/negative" in warned[1]


def test_kubelet_source_reads_pods_with_the_token_file(kube, token_file, make_collector):
    section = make_collector(
        source="kubelet", kubelet_url=kube.url + "/", token_file=token_file
    ).collect()

    assert section.source == "kubelet"
    assert sorted(by_name(section)) == ["idle", "trainer", "web"]
    assert by_name(section)["trainer"].requests.cpu_m == 3100
    assert kube.queries == []  # the API server was not asked


def test_kubelet_wrong_token_is_a_collector_error(kube, tmp_path, make_collector):
    (tmp_path / "token").write_text("stale-token-abcdef")
    collector = make_collector(
        source="kubelet", kubelet_url=kube.url, token_file=str(tmp_path / "token")
    )

    with pytest.raises(CollectorError, match="HTTP 401") as err:
        collector.collect()
    assert "stale-token-abcdef" not in str(err.value)


def test_kubelet_missing_token_file_is_a_collector_error(kube, tmp_path, make_collector):
    collector = make_collector(
        source="kubelet", kubelet_url=kube.url, token_file=str(tmp_path / "nope")
    )
    with pytest.raises(CollectorError, match="nope"):
        collector.collect()


def test_apiserver_wrong_token_is_a_collector_error(kube, tmp_path, make_collector):
    config = write_kubeconfig(tmp_path / "kc", kube.url, "wrong-token-xyz")
    with pytest.raises(CollectorError, match="HTTP 401, authentication failed") as err:
        make_collector(source="apiserver", kubeconfig=config).collect()
    assert "wrong-token-xyz" not in str(err.value)


def test_apiserver_forbidden_is_a_collector_error(kube, kubeconfig, make_collector):
    kube.fail_with = 403
    with pytest.raises(CollectorError, match="HTTP 403, forbidden"):
        make_collector(source="apiserver", kubeconfig=kubeconfig).collect()


def test_closed_port_is_no_data(tmp_path, make_collector):
    config = write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{free_port()}", TOKEN)

    with pytest.raises(NoData) as err:
        make_collector(source="apiserver", kubeconfig=config).collect()
    assert err.value.reason == "pods-source-unreachable: connection refused"


def test_server_error_is_no_data(kube, kubeconfig, make_collector):
    kube.fail_with = 503
    with pytest.raises(NoData) as err:
        make_collector(source="apiserver", kubeconfig=kubeconfig).collect()
    assert err.value.reason == "pods-source-unreachable: HTTP 503"


def test_slow_source_times_out_as_no_data(kube, token_file, make_collector):
    kube.hang = True  # the handler waits until the fixture releases it
    collector = make_collector(
        source="kubelet", kubelet_url=kube.url, token_file=token_file, timeout_s=0.2
    )
    with pytest.raises(NoData) as err:
        collector.collect()
    assert err.value.reason == "pods-source-unreachable: timeout"


def test_unreadable_kubeconfig_is_a_collector_error(tmp_path, make_collector):
    (tmp_path / "kc").write_text("just some text\n")
    with pytest.raises(CollectorError, match="client config"):
        make_collector(source="apiserver", kubeconfig=str(tmp_path / "kc")).collect()


@pytest.mark.parametrize(
    ("settings", "environ", "expected"),
    [
        ({"kubeconfig": "/k"}, {}, "apiserver"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, "apiserver"),
        (
            {"kubelet_url": "https://10.0.0.7:10250"},
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1"},
            "apiserver",
        ),  # in a cluster the API server wins
        ({"kubelet_url": "https://10.0.0.7:10250"}, {}, "kubelet"),
        ({"kubelet_url": "https://10.0.0.7:10250"}, {"KUBERNETES_SERVICE_HOST": ""}, "kubelet"),
        ({"source": "kubelet", "kubeconfig": "/k"}, {"KUBERNETES_SERVICE_HOST": "x"}, "kubelet"),
    ],
)
def test_auto_source_selection(settings, environ, expected):
    assert pods.choose_source(PodsSettings(**settings), environ) == expected


def test_auto_without_any_source_and_none_are_no_data(make_collector):
    with pytest.raises(NoData, match="^pods-source-unavailable: "):
        make_collector(source="auto").collect()
    with pytest.raises(NoData) as err:
        make_collector(
            source="none", kubeconfig="/k", environ={"KUBERNETES_SERVICE_HOST": "x"}
        ).collect()
    assert err.value.reason == "pods-disabled"


def test_auto_uses_the_kubelet_end_to_end(kube, token_file, make_collector):
    section = make_collector(kubelet_url=kube.url, token_file=token_file).collect()
    assert section.source == "kubelet"


def test_kubelet_source_without_url_is_a_collector_error(make_collector):
    with pytest.raises(CollectorError, match="kubelet URL"):
        make_collector(source="kubelet").collect()


def test_build_uses_the_agent_settings(tmp_path):
    settings = AgentSettings(
        paths=HostPaths(proc=tmp_path, sys=tmp_path, cgroup=tmp_path),
        node_name=NODE,
        pods=PodsSettings(source="none"),
    )
    collector = pods.build(settings, FakeClock())
    assert collector.name == pods.NAME == "pods"
    with pytest.raises(NoData):
        collector.collect()
    collector.close()


def test_importing_the_module_does_not_import_kubernetes():
    code = "import agent.collectors.pods, sys; assert 'kubernetes' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A self-signed certificate for 127.0.0.1, and an unrelated one to fail verification."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    out = tmp_path_factory.mktemp("certs")
    for name in ("server", "other"):
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(out / f"{name}.key"),
                "-out",
                str(out / f"{name}.crt"),
            ],
            check=True,
            capture_output=True,
        )
    return {"crt": out / "server.crt", "key": out / "server.key", "other": out / "other.crt"}


@pytest.fixture
def tls_kube(certs: dict[str, Path]) -> Iterator[FakeKube]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs["crt"], certs["key"])
    server = FakeKube(cluster_pods(), tls=context)
    yield server
    server.stop()


def test_kubelet_https_verified_with_the_ca_file(tls_kube, certs, token_file, make_collector):
    section = make_collector(
        source="kubelet",
        kubelet_url=tls_kube.url,
        token_file=token_file,
        kubelet_ca_file=str(certs["crt"]),
    ).collect()
    assert sorted(by_name(section)) == ["idle", "trainer", "web"]


def test_kubelet_https_unverified_without_a_ca_file_warns_once(
    tls_kube, token_file, make_collector, caplog
):
    # filterwarnings=error would turn urllib3's InsecureRequestWarning into a failure here.
    collector = make_collector(source="kubelet", kubelet_url=tls_kube.url, token_file=token_file)
    with caplog.at_level(logging.WARNING, logger=pods.__name__):
        collector.collect()
        collector.collect()
    assert [r.getMessage() for r in caplog.records] == [
        "pods: the kubelet's TLS certificate is not verified (no kubelet CA file)"
    ]


def test_kubelet_https_with_the_wrong_ca_is_a_collector_error(
    tls_kube, certs, token_file, make_collector
):
    collector = make_collector(
        source="kubelet",
        kubelet_url=tls_kube.url,
        token_file=token_file,
        kubelet_ca_file=str(certs["other"]),
    )
    with pytest.raises(CollectorError, match="CERTIFICATE_VERIFY_FAILED"):
        collector.collect()


def in_cluster(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    certs: dict[str, Path],
    server: FakeKube,
    token: str,
) -> dict[str, str]:
    """Point the client's in-cluster loader at ``server``, as a pod's service account would."""
    from kubernetes.config import incluster_config

    (tmp_path / "sa-token").write_text(token)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "sa-token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(certs["crt"]))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.server.server_address[1]))
    return {"KUBERNETES_SERVICE_HOST": "127.0.0.1"}


def test_in_cluster_service_account(tls_kube, certs, tmp_path, make_collector, monkeypatch):
    environ = in_cluster(monkeypatch, tmp_path, certs, tls_kube, TOKEN)  # no newline, as projected

    section = make_collector(environ=environ).collect()
    assert section.source == "apiserver"
    assert sorted(by_name(section)) == ["idle", "trainer", "web"]


def test_token_never_reaches_an_error_message(
    tls_kube, certs, tmp_path, make_collector, monkeypatch
):
    # The loader keeps a trailing newline; http.client then rejects the header, quoting it.
    environ = in_cluster(monkeypatch, tmp_path, certs, tls_kube, TOKEN + "\n")

    with pytest.raises(CollectorError, match="newline in the token file") as err:
        make_collector(environ=environ).collect()
    assert TOKEN not in str(err.value)
