"""The scheduler wiring under ``daemonset/scheduler`` and ``daemonset/overlays/scheduler``.

Every kube-scheduler configuration validates for its API version against a strict schema
(:mod:`tests.deploy.kubescheduler_types`); each calls the coordinator where its Service
is, on paths and verbs a running coordinator answers (asked over HTTP, as kube-scheduler
and Volcano ask); and each overlay renders a second scheduler that reads the
configuration of its version, with the name, Lease and permissions that configuration
names.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from aiohttp.test_utils import TestClient

from common.config import build
from coordinator.app import make_app, make_extender_app
from coordinator.config import CoordinatorSettings
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from tests.coordinator.extender.conftest import NoAuthenticator
from tests.coordinator.extender.kubejson import NODES, POD_UID, pod
from tests.coordinator.extender.test_extender_volcano import node_info, task
from tests.deploy.kubescheduler_types import DURATION, GROUP, VERSIONS, schema
from tests.hosts import FakeClock

REPO = Path(__file__).resolve().parents[2]
SCHEDULER = REPO / "daemonset/scheduler"
OVERLAYS = REPO / "daemonset/overlays/scheduler"
SAMPLE = SCHEDULER / "kube-scheduler-config.yaml"
"""The control plane's own kube-scheduler calling Stowage for GPU pods (no second one)."""
VOLCANO = SCHEDULER / "volcano-scheduler.conf"
PROFILE = "stowage-scheduler"

SUPPORTED = {"v1": (25, None), "v1beta3": (23, 25), "v1beta2": (22, 24), "v1beta1": (19, 21)}
"""Kubernetes minors each API version is offered for (docs/scheduler.md says the same)."""
BIN_PACKING = {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}
"""kube-scheduler's own MostAllocated weights, the same in every version's spelling."""
SECOND_SCHEDULER_DIRS = [f"{v}{tls}" for v in VERSIONS for tls in ("", "-mtls")]


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def second_scheduler_config(directory: str) -> dict[str, Any]:
    return load(SCHEDULER / directory / "kube-scheduler-config.yaml")


def version_of(config: dict[str, Any]) -> str:
    group, _, version = config["apiVersion"].partition("/")
    assert group == GROUP
    return version


def problems(config: dict[str, Any], version: str) -> list[str]:
    """Everything the schema of ``version`` finds wrong with ``config``, one line each."""
    validator = jsonschema.Draft202012Validator(schema(version))
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(config)
    ]


ALL_CONFIGS = [
    SAMPLE,
    *(SCHEDULER / d / "kube-scheduler-config.yaml" for d in SECOND_SCHEDULER_DIRS),
]


def test_every_api_version_has_a_plain_and_a_mutual_tls_second_scheduler() -> None:
    found = sorted(p.parent.name for p in SCHEDULER.glob("*/kube-scheduler-config.yaml"))
    assert found == sorted(SECOND_SCHEDULER_DIRS)


def test_the_schemas_are_valid_json_schemas() -> None:
    for version in VERSIONS:
        jsonschema.Draft202012Validator.check_schema(schema(version))


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: str(p.relative_to(SCHEDULER)))
def test_each_configuration_validates_for_its_version(path: Path) -> None:
    config = load(path)
    version = version_of(config)
    if path != SAMPLE:
        assert path.parent.name.removesuffix("-mtls") == version
    assert problems(config, version) == []


# ---------------------------------------------------------------- the schemas can fail


def _put(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting ``value`` at ``path`` (keys and list indexes, ``/``-separated)."""

    def mutate(config: dict[str, Any]) -> None:
        *parents, last = (int(k) if k.isdigit() else k for k in path.split("/"))
        node: Any = config
        for key in parents:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        if isinstance(node, list) and last == len(node):
            node.append(value)
        else:
            node[last] = value

    return mutate


FIT_WITH_STRATEGY = {
    "name": "NodeResourcesFit",
    "args": {"scoringStrategy": {"type": "MostAllocated"}},
}
MOST_ALLOCATED_PLUGIN = {"name": "NodeResourcesMostAllocated", "args": {"resources": []}}


@pytest.mark.parametrize(
    ("directory", "mutate", "where"),
    [
        ("v1beta1", _put("profiles/0/pluginConfig/1", FIT_WITH_STRATEGY), "scoringStrategy"),
        ("v1", _put("profiles/0/pluginConfig/1", MOST_ALLOCATED_PLUGIN), "pluginConfig/1/name"),
        ("v1beta2", _put("profiles/0/plugins/multiPoint", {}), "multiPoint"),
        ("v1beta3", _put("healthzBindAddress", "0.0.0.0:10251"), "healthzBindAddress"),
        ("v1beta3", _put("profiles/0/percentageOfNodesToScore", 50), "percentageOfNodesToScore"),
        ("v1", _put("extenders/0/nodeCacheCapible", True), "nodeCacheCapible"),
        ("v1", _put("extenders/0/enableHttps", True), "enableHttps"),
        ("v1", _put("extenders/0/weight", 0), "extenders/0/weight"),
        ("v1", _put("extenders/0/httpTimeout", "2 seconds"), "extenders/0/httpTimeout"),
        ("v1", _put("leaderElection/leaderElection", True), "leaderElection"),
        ("v1", _put("apiVersion", f"{GROUP}/v1beta3"), "apiVersion"),
        ("v1beta1-mtls", _put("extenders/0/tlsConfig/caFil", "/x"), "caFil"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_field_the_version_does_not_have_is_refused(
    directory: str, mutate: Callable[[dict[str, Any]], None], where: str
) -> None:
    config = second_scheduler_config(directory)
    version = version_of(config)
    mutate(config)
    found = problems(config, version)
    assert found, "the mutated configuration still validates"
    assert any(where in line for line in found), found


def test_what_a_version_has_is_accepted() -> None:
    """The schemas are not refusing everything: fields each version has pass."""
    cases = [
        ("v1beta2", _put("healthzBindAddress", "0.0.0.0:10251")),
        ("v1beta3", _put("profiles/0/plugins/multiPoint", {"enabled": [{"name": "X"}]})),
        ("v1", _put("profiles/0/percentageOfNodesToScore", 50)),
        ("v1", _put("parallelism", 16)),
        ("v1beta1", _put("profiles/0/pluginConfig/0/args/resources/0/weight", 2)),
        ("v1", _put("extenders/0/managedResources", [{"name": "nvidia.com/gpu"}])),
    ]
    for directory, mutate in cases:
        config = second_scheduler_config(directory)
        mutate(config)
        assert problems(config, version_of(config)) == [], directory


# ---------------------------------------------------------------- what each configures


def _keys(tree: Any) -> set[str]:
    if isinstance(tree, dict):
        return set(tree) | {k for v in tree.values() for k in _keys(v)}
    if isinstance(tree, list):
        return {k for v in tree for k in _keys(v)}
    return set()


def _weights(resources: list[dict[str, Any]]) -> dict[str, int]:
    return {r["name"]: r["weight"] for r in resources}


@pytest.mark.parametrize("directory", SECOND_SCHEDULER_DIRS)
def test_kube_scheduler_bin_packs_as_its_version_spells_it(directory: str) -> None:
    (profile,) = second_scheduler_config(directory)["profiles"]
    args = {c["name"]: c.get("args") for c in profile["pluginConfig"]}
    if directory.startswith("v1beta1"):
        assert "scoringStrategy" not in _keys(profile)
        score = profile["plugins"]["score"]
        assert {"name": "NodeResourcesLeastAllocated"} in score["disabled"]
        assert {"name": "NodeResourcesMostAllocated", "weight": 1} in score["enabled"]
        assert _weights(args["NodeResourcesMostAllocated"]["resources"]) == BIN_PACKING
    else:
        strategy = args["NodeResourcesFit"]["scoringStrategy"]
        assert strategy["type"] == "MostAllocated"
        assert _weights(strategy["resources"]) == BIN_PACKING
        assert "NodeResourcesMostAllocated" not in args


def _coordinator_lease() -> str:
    (configmap,) = [
        o
        for o in yaml.safe_load_all(
            (REPO / "daemonset/base/coordinator/configmap.yaml").read_text()
        )
        if o["metadata"]["name"] == "stowage-coordinator"
    ]
    settings = build(CoordinatorSettings, yaml.safe_load(configmap["data"]["config.yaml"]))
    return settings.leader.lease_name


@pytest.mark.parametrize("directory", SECOND_SCHEDULER_DIRS)
def test_a_second_scheduler_with_its_own_profile_and_lease(directory: str) -> None:
    """A profile of its own (default-scheduler stays the control plane's), and a Lease
    neither the control plane's scheduler nor the coordinator holds."""
    config = second_scheduler_config(directory)
    assert [p["schedulerName"] for p in config["profiles"]] == [PROFILE]
    election = config["leaderElection"]
    assert election["leaderElect"] is True
    assert election["resourceLock"] == "leases"
    assert election["resourceName"] not in ("kube-scheduler", _coordinator_lease())


def _extender_but_transport(config: dict[str, Any]) -> dict[str, Any]:
    (extender,) = config["extenders"]
    return {k: v for k, v in extender.items() if k not in ("urlPrefix", "enableHTTPS", "tlsConfig")}


def test_every_version_calls_the_extender_the_same_way() -> None:
    first, *others = SECOND_SCHEDULER_DIRS
    expected = _extender_but_transport(second_scheduler_config(first))
    for directory in others:
        assert _extender_but_transport(second_scheduler_config(directory)) == expected, directory
    assert expected["nodeCacheCapable"] is True
    assert expected["ignorable"] is True
    assert "bindVerb" not in expected  # kube-scheduler binds; the extender has no bind route
    assert "managedResources" not in expected  # every pod of the profile, GPU or not


def test_the_control_plane_sample_adds_the_extender_for_gpu_pods_only() -> None:
    sample = load(SAMPLE)
    assert "profiles" not in sample  # default-scheduler keeps its default plugins
    (extender,) = sample["extenders"]
    assert extender["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert sample["leaderElection"] == {"leaderElect": True}  # its usual Lease


def _coordinator_service() -> tuple[str, str, dict[str, int]]:
    """The coordinator Service's name, namespace and ports by name, from the base."""
    namespace = load(REPO / "daemonset/base/kustomization.yaml")["namespace"]
    services = yaml.safe_load_all((REPO / "daemonset/base/coordinator/service.yaml").read_text())
    (service,) = [s for s in services if s["metadata"]["name"] == "stowage-coordinator"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    return service["metadata"]["name"], namespace, ports


def _plain_urls() -> list[tuple[str, str]]:
    urls = [(d, second_scheduler_config(d)["extenders"][0]["urlPrefix"]) for d in VERSIONS]
    volcano = _volcano_arguments()
    return [*urls, ("volcano", volcano["extender.urlPrefix"])]


def test_plain_extender_urls_name_the_coordinator_service() -> None:
    name, namespace, ports = _coordinator_service()
    for where, url_prefix in _plain_urls():
        url = urlsplit(url_prefix)
        assert (url.scheme, url.hostname, url.port) == (
            "http",
            f"{name}.{namespace}.svc",
            ports["http"],
        ), where


def test_mutual_tls_configurations_verify_the_coordinator_by_its_service_name() -> None:
    name, namespace, _ = _coordinator_service()
    for version in VERSIONS:
        (extender,) = second_scheduler_config(f"{version}-mtls")["extenders"]
        url = urlsplit(extender["urlPrefix"])
        assert (url.scheme, url.hostname, extender["enableHTTPS"]) == (
            "https",
            f"{name}.{namespace}.svc",
            True,
        )
        tls = extender["tlsConfig"]
        assert tls["serverName"] == url.hostname
        assert {"caFile", "certFile", "keyFile"} <= set(tls)  # no caFile would mean insecure
        assert "insecure" not in tls


# ---------------------------------------------------------------- a running coordinator answers


@pytest.fixture
def services(clock: FakeClock) -> Services:
    settings = CoordinatorSettings()
    metrics = CoordinatorMetrics()
    cluster = LiveCluster(settings, clock, metrics)
    for node in NODES.values():
        cluster.upsert_node(node)
    return Services(
        settings=settings,
        clock=clock,
        metrics=metrics,
        cluster=cluster,
        authenticator=NoAuthenticator(),
    )


OFFERED = ["node-a", "gpu-1"]
KUBE_SCHEDULER_BODIES: dict[str, Any] = {
    "filterVerb": {"Pod": pod(), "Nodes": None, "NodeNames": OFFERED},
    "prioritizeVerb": {"Pod": pod(), "Nodes": None, "NodeNames": OFFERED},
    "preemptVerb": {
        "Pod": pod(),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"node-a": {"Pods": [{"UID": POD_UID}], "NumPDBViolations": 0}},
    },
}
"""What kube-scheduler sends for each verb with ``nodeCacheCapable: true``."""


def _answered_as_asked(verb: str, reply: Any) -> bool:
    """The reply has the shape kube-scheduler reads for ``verb``."""
    if verb == "filterVerb":
        return set(reply["NodeNames"]) <= set(OFFERED)
    if verb == "prioritizeVerb":
        return sorted(h["Host"] for h in reply) == sorted(OFFERED)
    return isinstance(reply["NodeNameToMetaVictims"], dict)


async def _call(client: TestClient, url_prefix: str, verb: str, body: Any) -> tuple[int, Any]:
    """POST ``body`` where kube-scheduler and Volcano send a verb: the prefix without its
    trailing slashes, a slash, the verb (``pkg/scheduler/extender.go``, Volcano's
    ``extender.go``)."""
    path = urlsplit(url_prefix.rstrip("/") + "/" + verb).path
    resp = await client.post(
        path, data=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    text = await resp.text()
    return resp.status, json.loads(text) if resp.content_type == "application/json" else text


async def test_every_extender_verb_is_a_route_the_coordinator_answers(
    aiohttp_client: Callable[..., Any], services: Services
) -> None:
    """Plain configurations call the main listener (every route), mutual-TLS ones the
    extender listener (``/scheduler/*`` only)."""
    main = await aiohttp_client(make_app(services))
    extender_only = await aiohttp_client(make_extender_app(services))
    for path in ALL_CONFIGS:
        (extender,) = load(path)["extenders"]
        client = extender_only if extender.get("enableHTTPS") else main
        asked = [verb for verb in KUBE_SCHEDULER_BODIES if verb in extender]
        assert asked == list(KUBE_SCHEDULER_BODIES), path
        for verb in asked:
            status, reply = await _call(
                client, extender["urlPrefix"], extender[verb], KUBE_SCHEDULER_BODIES[verb]
            )
            assert status == 200, (path, verb, reply)
            assert _answered_as_asked(verb, reply), (path, verb, reply)


def _volcano_arguments() -> dict[str, Any]:
    tiers = load(VOLCANO)["tiers"]
    (plugin,) = [p for tier in tiers for p in tier["plugins"] if p["name"] == "extender"]
    return plugin["arguments"]


VOLCANO_EXTENDER_ARGUMENTS = {
    f"extender.{name}"
    for name in (
        "urlPrefix",
        "httpTimeout",
        "onSessionOpenVerb",
        "onSessionCloseVerb",
        "predicateVerb",
        "prioritizeVerb",
        "preemptableVerb",
        "reclaimableVerb",
        "queueOverusedVerb",
        "jobEnqueueableVerb",
        "jobEnqueuedVerb",
        "jobReadyVerb",
        "allocateFuncVerb",
        "deallocateFuncVerb",
        "ignorable",
        "managedResources",
    )
}
"""The keys Volcano's extender plugin reads (``pkg/scheduler/plugins/extender/argument.go``)."""


def test_volcanos_extender_arguments_are_keys_the_plugin_reads() -> None:
    """Volcano reads its configuration leniently: a misspelt key is ignored without a
    word (a verb left unset is a call never made), so the keys are checked here."""
    args = _volcano_arguments()
    assert set(args) <= VOLCANO_EXTENDER_ARGUMENTS
    assert re.fullmatch(DURATION["pattern"], args["extender.httpTimeout"])
    assert {"extender.predicateVerb", "extender.prioritizeVerb"} <= set(args)


async def test_volcanos_verbs_are_routes_the_coordinator_answers(
    aiohttp_client: Callable[..., Any], services: Services
) -> None:
    args = _volcano_arguments()
    assert args["extender.ignorable"] is True
    client = await aiohttp_client(make_app(services))
    the_task = task(pod("4", "8Gi", gpus=2), 4000, 8 * 2**30, gpus=2)
    status, reply = await _call(
        client,
        args["extender.urlPrefix"],
        args["extender.predicateVerb"],
        {"task": the_task, "node": node_info("gpu-1")},
    )
    assert (status, reply) == (200, {"status": "", "code": 0})
    status, reply = await _call(
        client,
        args["extender.urlPrefix"],
        args["extender.prioritizeVerb"],
        {"task": the_task, "nodes": [node_info("gpu-1"), node_info("node-a")]},
    )
    assert status == 200
    assert set(reply["nodeScore"]) == {"gpu-1", "node-a"}


@pytest.mark.parametrize(
    ("url_prefix", "verb"),
    [
        ("http://c:8080/scheduler", "filters"),
        ("http://c:8080/scheduler", "bind"),
        ("http://c:8080/extender", "filter"),
        ("http://c:8080/volcano", "filter"),
    ],
)
async def test_a_verb_or_prefix_the_coordinator_does_not_serve_is_caught(
    aiohttp_client: Callable[..., Any], services: Services, url_prefix: str, verb: str
) -> None:
    """What the route checks above would meet if a configuration named a wrong path."""
    client = await aiohttp_client(make_app(services))
    status, _ = await _call(client, url_prefix, verb, KUBE_SCHEDULER_BODIES["filterVerb"])
    assert status == 404


def test_the_mutual_tls_listener_does_not_serve_volcano(services: Services) -> None:
    """Volcano's plugin has no TLS settings: its routes stay on the main listener."""
    paths = {r.resource.canonical for r in make_extender_app(services).router.routes()}
    assert paths and all(p.startswith("/scheduler/") for p in paths)


# ---------------------------------------------------------------- the rendered overlays


def kustomize(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` builds, by kind and name (a fresh copy
    each call: tests may change what they get)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("needs kubectl (kustomize) to build the overlays")
    built = _built(kubectl, directory)
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(built)}


@functools.cache
def _built(kubectl: str, directory: Path) -> str:
    """Each tree is built once per run: several tests read the same one."""
    return subprocess.run(
        [kubectl, "kustomize", str(directory)], check=True, capture_output=True, text=True
    ).stdout


@pytest.mark.parametrize("directory", SECOND_SCHEDULER_DIRS)
def test_each_version_directory_renders_a_scheduler_reading_its_configuration(
    directory: str,
) -> None:
    objects = kustomize(SCHEDULER / directory)
    config_text = (SCHEDULER / directory / "kube-scheduler-config.yaml").read_text()
    config = yaml.safe_load(config_text)
    version = version_of(config)

    deployment = objects[("Deployment", PROFILE)]
    namespace = deployment["metadata"]["namespace"]
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}

    (config_volume,) = [v for v in volumes.values() if "configMap" in v]
    configmap = objects[("ConfigMap", config_volume["configMap"]["name"])]
    assert configmap["metadata"]["namespace"] == namespace
    (key,) = configmap["data"]
    assert configmap["data"][key] == config_text
    assert f"--config={mounts[config_volume['name']]}/{key}" in container["command"]

    tag = container["image"].rpartition(":")[2]
    found = re.fullmatch(r"v1\.(\d+)\.\d+", tag)
    assert found, container["image"]
    minor = int(found.group(1))
    first, last = SUPPORTED[version]
    assert first <= minor and (last is None or minor <= last), (version, tag)

    if directory.endswith("-mtls"):
        tls = config["extenders"][0]["tlsConfig"]
        (secret_volume,) = [v for v in volumes.values() if "secret" in v]
        root = mounts[secret_volume["name"]] + "/"
        assert all(tls[f].startswith(root) for f in ("caFile", "certFile", "keyFile"))

    _check_hardened(pod_spec, container)
    _check_permissions(objects, config, pod_spec["serviceAccountName"], namespace)


def _check_hardened(pod_spec: dict[str, Any], container: dict[str, Any]) -> None:
    security = pod_spec["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    own = container["securityContext"]
    assert own["readOnlyRootFilesystem"] is True
    assert own["allowPrivilegeEscalation"] is False
    assert own["capabilities"]["drop"] == ["ALL"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], get["scheme"], ports.get(get["port"], get["port"])) == (
            "/healthz",
            "HTTPS",
            10259,  # kube-scheduler's secure port; /healthz needs no credentials there
        ), probe


def _check_permissions(
    objects: dict[tuple[str, str], Any], config: dict[str, Any], account: str, namespace: str
) -> None:
    """The scheduler's account holds kube-scheduler's shipped roles and its own Lease."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    bound = {
        (o["metadata"].get("namespace"), o["roleRef"]["kind"], o["roleRef"]["name"])
        for (kind, _), o in objects.items()
        if kind in ("ClusterRoleBinding", "RoleBinding") and subject in o["subjects"]
    }
    assert {
        (None, "ClusterRole", "system:kube-scheduler"),
        (None, "ClusterRole", "system:volume-scheduler"),
        ("kube-system", "Role", "extension-apiserver-authentication-reader"),
    } <= bound
    election = config["leaderElection"]
    lease_roles = [
        objects[("Role", name)]
        for ns, kind, name in bound
        if kind == "Role" and ns == election["resourceNamespace"] and ("Role", name) in objects
    ]
    rules = [
        (tuple(r.get("resourceNames", ())), tuple(sorted(r["verbs"])))
        for role in lease_roles
        for r in role["rules"]
        if r["apiGroups"] == ["coordination.k8s.io"] and r["resources"] == ["leases"]
    ]
    assert ((), ("create",)) in rules
    assert ((election["resourceName"],), ("get", "update")) in rules


OVERLAY_VERSIONS = {
    OVERLAYS: "v1",
    OVERLAYS / "mtls": "v1-mtls",
    **{OVERLAYS / "versions" / v: v for v in VERSIONS if v != "v1"},
}


@pytest.mark.parametrize(
    ("overlay", "directory"), OVERLAY_VERSIONS.items(), ids=lambda v: str(v).rpartition("/")[2]
)
def test_each_overlay_installs_stowage_with_the_scheduler_of_its_version(
    overlay: Path, directory: str
) -> None:
    """The overlay holds the scheduler of its version directory, and the coordinator its
    extender calls, at the address and port the configuration names, which a
    NetworkPolicy guarding the coordinator lets the scheduler reach."""
    objects = kustomize(overlay)
    scheduler = kustomize(SCHEDULER / directory)
    assert set(scheduler) <= set(objects)
    config = second_scheduler_config(directory)
    url = urlsplit(config["extenders"][0]["urlPrefix"])
    service = objects[("Service", "stowage-coordinator")]
    assert url.hostname == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == url.port]
    coordinator = objects[("Deployment", "stowage-coordinator")]["spec"]["template"]
    (container,) = coordinator["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}

    caller = objects[("Deployment", PROFILE)]["spec"]["template"]["metadata"]["labels"]
    guarding = [
        o
        for (kind, _), o in objects.items()
        if kind == "NetworkPolicy"
        and _selects(o["spec"]["podSelector"], coordinator["metadata"]["labels"])
        and "Ingress" in o["spec"].get("policyTypes", ["Ingress"])
    ]
    for policy in guarding:  # the scheduler may reach the extender's port
        assert any(
            port["targetPort"] in {p.get("port") for p in rule.get("ports", [])}
            and any(
                _selects(s["podSelector"], caller)
                for s in rule.get("from", [])
                if set(s) == {"podSelector"}
            )
            for rule in policy["spec"].get("ingress", [])
        ), policy["metadata"]["name"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (``matchLabels``, ``matchExpressions``) selects ``labels``."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    tests = {
        "In": lambda e: labels.get(e["key"]) in e["values"],
        "NotIn": lambda e: labels.get(e["key"]) not in e["values"],
        "Exists": lambda e: e["key"] in labels,
        "DoesNotExist": lambda e: e["key"] not in labels,
    }
    return all(tests[e["operator"]](e) for e in selector.get("matchExpressions", []))


def test_every_scheduler_overlay_is_tested() -> None:
    found = {p.parent for p in OVERLAYS.glob("**/kustomization.yaml")}
    assert found == set(OVERLAY_VERSIONS)
