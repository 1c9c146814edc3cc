"""Every kustomization under daemonset/ renders, validates offline against the Kubernetes
schemas of several versions, and says what the install promises: namespaced where its
bindings point, nothing created on a host, the agent writing only where its enforcer writes,
metrics on and scraped, both pods hardened, network policies admitting only their callers,
and the overlays doing what their names say.

Schemas: ``kubernetes-validate`` (the API server's OpenAPI documents, strict: an unknown or
misspelt field fails). Custom resources (the Prometheus Operator's) have no schema there;
they are checked structurally against what they select.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes_validate
import kubernetes_validate.utils
import pytest

from agent import cgroups
from agent import metrics as agent_metrics
from cli.main import build_parser
from coordinator import main as coordinator_main
from tests.deploy.manifests import (
    BASE,
    DAEMONSET,
    NAMESPACE,
    REPO,
    Obj,
    containers,
    find,
    kustomizations,
    label,
    render,
    workloads,
)

VERSIONS = ("1.25.0", "1.28.0", "1.30.0", kubernetes_validate.latest_version())
"""The oldest API the manifests support (policy/v1, seccompProfile fields), two in use, and
the newest the validator ships."""
CUSTOM_KINDS = frozenset(
    {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PodMonitor")}
)
"""Custom resources, checked by test_monitors_select_what_they_scrape instead."""
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"})
KUSTOMIZATIONS = kustomizations()
OVERLAYS = DAEMONSET / "overlays"
COMPONENTS = DAEMONSET / "components"


@pytest.fixture(scope="module", autouse=True)
def _schemas_read_once() -> Iterator[None]:
    """kubernetes-validate re-reads its 1.2 MB definitions file on every call; reading each
    schema file once makes the whole check about fifteen times faster."""
    with pytest.MonkeyPatch.context() as patch:
        cached = functools.cache(kubernetes_validate.utils.schema_contents)
        patch.setattr(kubernetes_validate.utils, "schema_contents", cached)
        yield


def test_the_glob_finds_the_trees_an_operator_applies() -> None:
    found = {label(d) for d in KUSTOMIZATIONS}
    assert {
        "daemonset/base",
        "daemonset/base/agent",
        "daemonset/base/coordinator",
        "daemonset/overlays/gpu",
        "daemonset/overlays/dev",
        "daemonset/overlays/monitoring",
        "daemonset/overlays/extender-mtls",
        "daemonset/components/cgroup-v1-systemd",
        "daemonset/components/monitoring",
    } <= found


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_every_object_validates_against_each_kubernetes_version(directory: Path) -> None:
    failures = []
    for obj in render(directory):
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            continue
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = ".".join(str(p) for p in e.path)
                failures.append(f"{_name(obj)} on {version}: {where}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError:
                failures.append(f"{_name(obj)}: no {version} schema and no structural check")
    assert not failures, "\n".join(failures)


def test_monitors_select_what_they_scrape() -> None:
    objects = render(OVERLAYS / "monitoring")
    service = find(objects, "Service", "stowage-coordinator")
    monitor = find(objects, "ServiceMonitor", "stowage-coordinator")
    assert _selects(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert {e["path"] for e in monitor["spec"]["endpoints"]} == {"/metrics"}

    agents = find(objects, "DaemonSet", "stowage-agent")
    pod_monitor = find(objects, "PodMonitor", "stowage-agent")
    assert _selects(
        pod_monitor["spec"]["selector"], agents["spec"]["template"]["metadata"]["labels"]
    )
    assert pod_monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    (agent,) = containers(agents)
    endpoints = pod_monitor["spec"]["podMetricsEndpoints"]
    assert {e["port"] for e in endpoints} <= {p["name"] for p in agent["ports"]}
    assert monitor["metadata"]["namespace"] == pod_monitor["metadata"]["namespace"] == NAMESPACE

    dashboard = find(objects, "ConfigMap", "stowage-grafana-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"  # the sidecar's label
    (text,) = dashboard["data"].values()
    assert json.loads(text) == json.loads(
        (DAEMONSET / "monitoring/grafana-dashboard.json").read_text()
    )


@pytest.mark.parametrize("directory", [BASE / "agent", BASE / "coordinator", BASE], ids=label)
def test_each_half_applied_alone_lands_in_the_namespace_its_bindings_name(
    directory: Path,
) -> None:
    for obj in render(directory):
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in CLUSTER_SCOPED:
            assert namespace is None, _name(obj)
        else:
            assert namespace == NAMESPACE, _name(obj)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_no_namespaced_object_is_left_to_the_current_namespace(directory: Path) -> None:
    for obj in render(directory):
        if obj["kind"] not in CLUSTER_SCOPED:
            assert obj["metadata"].get("namespace"), _name(obj)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_bindings_name_the_service_accounts_where_they_are(directory: Path) -> None:
    objects = render(directory)
    accounts = {
        o["metadata"]["name"]: o["metadata"].get("namespace")
        for o in objects
        if o["kind"] == "ServiceAccount"
    }
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        for subject in binding["subjects"]:
            if subject["kind"] == "ServiceAccount" and subject["name"] in accounts:
                assert subject["namespace"] == accounts[subject["name"]], _name(binding)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_nothing_is_created_on_a_host_but_the_journal_directory(directory: Path) -> None:
    """FileOrCreate makes an empty file where none was (a kubelet config elsewhere), no type
    makes a directory in a missing file's place, and a mkdir under /sys/fs/cgroup makes a
    cgroup: every hostPath is an existing Directory, but the enforcer's own journal."""
    for workload in workloads(render(directory)):
        for volume in workload["spec"]["template"]["spec"].get("volumes", []):
            host = volume.get("hostPath")
            if host is None:
                continue
            kind = host.get("type")
            assert kind in ("Directory", "DirectoryOrCreate"), f"{volume['name']}: {kind!r}"
            if kind == "DirectoryOrCreate":
                assert host["path"] == "/var/lib/stowage", volume["name"]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_the_kubelet_config_is_read_inside_a_read_only_directory(directory: Path) -> None:
    for agent, pod, args in _agents(render(directory)):
        config = Path(args.kubelet_config)
        mount = _mount_of(agent, config)
        assert mount.get("readOnly") is True
        host = _host_path(pod, mount["name"])
        assert host["type"] == "Directory"
        on_host = Path(host["path"]) / config.relative_to(mount["mountPath"])
        assert on_host == Path("/var/lib/kubelet/config.yaml")  # kubeadm's, the default


LAYOUTS = {
    "v2-systemd": (2, "kubepods.slice"),
    "v2-cgroupfs": (2, "kubepods"),
    "v1-systemd": (1, "kubepods.slice"),
    "v1-cgroupfs": (1, "kubepods"),
}


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_the_agent_writes_only_where_its_enforcer_writes(directory: Path, tmp_path: Path) -> None:
    """The read-write host mounts are the kubepods tree the enforcer finds on a host of the
    layout the manifest is for (the agent's own detection, on a host tree made here) and the
    journal's directory; with enforcement off, the journal's only."""
    match = re.fullmatch(r"cgroup-(v\d-\w+)", directory.name)
    version, tree_name = LAYOUTS[match.group(1) if match else "v2-systemd"]
    root = tmp_path / "sys" / "fs" / "cgroup"
    if version == 2:
        root.mkdir(parents=True)
        (root / "cgroup.controllers").write_text("cpu memory\n")
        (root / tree_name).mkdir()
    else:
        for controller in ("memory", "cpu,cpuacct"):
            (root / controller / tree_name).mkdir(parents=True)
    layout = cgroups.detect(root)
    assert layout is not None
    tree = layout.pods_dir(None, "cpu")  # what agent.enforcer.Enforcer writes below
    for agent, pod, args in _agents(render(directory)):
        cgroup_root = Path(args.cgroup_root or Path(args.sys_root) / "fs" / "cgroup")
        expected = {Path(args.enforcer_journal).parent: "/var/lib/stowage"}
        if args.enforce:
            expected[cgroup_root / tree.relative_to(root)] = str(
                Path("/sys/fs/cgroup") / tree.relative_to(root)
            )
        writable = {
            Path(m["mountPath"]): _host_path(pod, m["name"])["path"]
            for m in agent["volumeMounts"]
            if not m.get("readOnly") and _host_path(pod, m["name"]) is not None
        }
        assert writable == expected


def test_the_agent_serves_metrics_where_it_is_scraped_and_probed() -> None:
    objects = render(BASE)
    ((agent, _, args),) = _agents(objects)
    port = int(args.metrics_listen.rpartition(":")[2])
    (named,) = [p for p in agent["ports"] if p["containerPort"] == port]
    annotations = find(objects, "DaemonSet", "stowage-agent")["spec"]["template"]["metadata"][
        "annotations"
    ]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port
    probe = agent["livenessProbe"]["httpGet"]
    assert probe["port"] == named["name"]
    assert (annotations["prometheus.io/path"], probe["path"]) == ("/metrics", "/healthz")


async def test_the_agent_metrics_listener_answers_the_scrape_and_probe_paths() -> None:
    """The paths the manifest scrapes and probes, on the agent's real metrics listener."""
    objects = render(BASE)
    ((agent, _, _),) = _agents(objects)
    template = find(objects, "DaemonSet", "stowage-agent")["spec"]["template"]
    paths = [
        agent["livenessProbe"]["httpGet"]["path"],
        template["metadata"]["annotations"]["prometheus.io/path"],
    ]
    site = await agent_metrics.serve(agent_metrics.AgentMetrics(), "127.0.0.1", 0)
    try:
        async with aiohttp.ClientSession() as session:
            for path in paths:
                async with session.get(f"{site.url}{path}") as response:
                    assert response.status == 200, path
    finally:
        await site.stop()


def test_the_coordinator_runs_two_hardened_replicas_with_a_budget() -> None:
    objects = render(BASE)
    deployment = find(objects, "Deployment", "stowage-coordinator")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    anti = pod["spec"]["affinity"]["podAntiAffinity"]
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or [
        t["podAffinityTerm"] for t in anti["preferredDuringSchedulingIgnoredDuringExecution"]
    ]
    assert any(_selects(t["labelSelector"], labels) for t in terms)
    budget = find(objects, "PodDisruptionBudget", "stowage-coordinator")
    assert _selects(budget["spec"]["selector"], labels)
    assert budget["spec"]["minAvailable"] == 1
    (coordinator,) = containers(deployment)
    assert coordinator["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert coordinator["livenessProbe"]["httpGet"]["path"] == "/healthz"
    ports = {p["name"] for p in coordinator["ports"]}
    assert coordinator["readinessProbe"]["httpGet"]["port"] in ports
    assert coordinator["livenessProbe"]["httpGet"]["port"] in ports
    context = {**pod["spec"]["securityContext"], **coordinator["securityContext"]}
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] != 0
    assert context["readOnlyRootFilesystem"] is True
    _assert_confined(pod["spec"], coordinator)


def test_the_agent_is_confined_but_for_the_root_user_it_reads_as() -> None:
    agents = find(render(BASE), "DaemonSet", "stowage-agent")
    (agent,) = containers(agents)
    assert agent["securityContext"]["readOnlyRootFilesystem"] is True
    _assert_confined(agents["spec"]["template"]["spec"], agent)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_network_policies_admit_only_their_callers(directory: Path) -> None:
    """Each policy selects one of the workloads, denies by default (Ingress in policyTypes,
    no rule without sources), names only ports the pods serve, and the coordinator's admits
    the agents and the second scheduler of its namespace."""
    objects = render(directory)
    pods = {w["metadata"]["name"]: w for w in workloads(objects)}
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        (target,) = [
            w for w in pods.values()
            if _selects(policy["spec"]["podSelector"], w["spec"]["template"]["metadata"]["labels"])
        ]  # fmt: skip
        assert "Ingress" in policy["spec"]["policyTypes"]
        served = {p["name"] for c in containers(target) for p in c.get("ports", [])}
        for rule in policy["spec"]["ingress"]:
            assert rule.get("from") and rule.get("ports"), _name(policy)
            assert {p["port"] for p in rule["ports"]} <= served, _name(policy)
        if target["metadata"]["name"] == "stowage-agent":
            ports = {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]}
            assert ports == {"metrics"}
        if target["metadata"]["name"] == "stowage-coordinator":
            sources = [s["podSelector"] for r in policy["spec"]["ingress"] for s in r["from"]
                       if set(s) == {"podSelector"}]  # fmt: skip
            for caller in ("stowage-agent", "stowage-scheduler"):
                if caller in pods:
                    labels = pods[caller]["spec"]["template"]["metadata"]["labels"]
                    assert any(_selects(s, labels) for s in sources), caller


def _admitted(policy: Obj) -> dict[str, set[str]]:
    """Each source a policy names (``pod:NAME`` by ``app.kubernetes.io/name``,
    ``ns:NAMESPACE``) → the ports it may reach."""
    found: dict[str, set[str]] = {}
    for rule in policy["spec"]["ingress"]:
        ports = {p["port"] for p in rule["ports"]}
        for source in rule["from"]:
            names = set(source.get("podSelector", {}).get("matchLabels", {}).values())
            keys = {f"pod:{n}" for n in names} if set(source) == {"podSelector"} else set()
            spaces = source.get("namespaceSelector", {})
            keys |= {f"ns:{n}" for n in spaces.get("matchLabels", {}).values()}
            keys |= {f"ns:{n}" for e in spaces.get("matchExpressions", []) for n in e["values"]}
            for key in keys:
                found.setdefault(key, set()).update(ports)
    return found


SCHEDULERS = ("pod:stowage-scheduler", "ns:kube-system", "ns:volcano-system")


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=label)
def test_each_caller_of_the_coordinator_is_admitted_to_its_own_port_only(
    directory: Path, tmp_path: Path
) -> None:
    """Schedulers reach the extender, agents the port their ``--coordinator`` names,
    Prometheus the port it scrapes (``prometheus.io/port``); a port of the extender's own
    (the mTLS overlay) is the schedulers' alone. ``/debug`` and ``/ui`` are on no port the
    pod declares: the debug listener is on 127.0.0.1 as shipped."""
    objects = render(directory)
    policies = [o for o in objects if _name(o) == "NetworkPolicy/stowage-coordinator"]
    if not policies:
        pytest.skip("no coordinator in this tree")
    (policy,) = policies
    deployment = find(objects, "Deployment", "stowage-coordinator")
    (container,) = containers(deployment)
    numbers = {p["name"]: p["containerPort"] for p in container["ports"]}
    admitted = _admitted(policy)
    scraped = int(deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"])
    assert admitted["ns:monitoring"] == {n for n, p in numbers.items() if p == scraped}
    for _, _, agent in _agents(objects):
        port = int(agent.coordinator.rpartition(":")[2])
        assert admitted["pod:stowage-agent"] == {n for n, p in numbers.items() if p == port}
    for scheduler in SCHEDULERS:
        assert admitted[scheduler] == set(numbers), scheduler
    if "extender" in numbers:
        assert all("extender" not in ports for source, ports in admitted.items()
                   if source not in SCHEDULERS)  # fmt: skip
    config = tmp_path / "config.yaml"  # the ConfigMap's file, where the args expect it
    config.write_text(find(objects, "ConfigMap", "stowage-coordinator")["data"]["config.yaml"])
    args = [f"--config={config}" if a.startswith("--config=") else a for a in container["args"]]
    debug = coordinator_main.settings_from(build_parser().parse_args(args)).server.debug_listen
    assert debug is not None
    host, _, port = debug.rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) not in numbers.values()


def test_the_gpu_overlay_runs_agents_on_gpu_nodes_only() -> None:
    pod = find(render(OVERLAYS / "gpu"), "DaemonSet", "stowage-agent")["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]} in term[
        "matchExpressions"
    ]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert all("key" in t for t in pod["tolerations"]), "still tolerates every taint"


def test_the_dev_overlay_runs_one_debug_coordinator_and_agents_that_never_enforce() -> None:
    objects = render(OVERLAYS / "dev")
    deployment = find(objects, "Deployment", "stowage-coordinator")
    assert deployment["spec"]["replicas"] == 1
    budget = find(objects, "PodDisruptionBudget", "stowage-coordinator")["spec"]
    assert budget.get("minAvailable", 0) < 1, "one replica and minAvailable 1 block drains"
    (coordinator,) = containers(deployment)
    assert build_parser().parse_args(coordinator["args"]).log_level == "DEBUG"
    ((_, _, args),) = _agents(objects)
    assert args.log_level == "DEBUG"
    assert args.enforce is False


def test_the_kustomizations_docs_install_shows_build(tmp_path: Path) -> None:
    """Each kustomization in docs/install.md that builds on a checkout (``../stowage/``)
    renders, with the checkout where it expects it."""
    (tmp_path / "stowage").symlink_to(REPO)
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs/install.md").read_text(), re.S)
    mine = [b for b in blocks if b.startswith("resources:") and "../stowage/" in b]
    assert mine
    for number, block in enumerate(mine):
        directory = tmp_path / f"example{number}"
        directory.mkdir()
        (directory / "kustomization.yaml").write_text(block)
        objects = render(directory)
        assert any(o["kind"] == "DaemonSet" for o in objects)


def test_the_image_is_the_one_make_image_builds() -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not installed")
    command = subprocess.run(
        [make, "-s", "-n", "image"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    (tag,) = re.findall(r"docker build -t (\S+) \.", command)
    for directory in KUSTOMIZATIONS:
        for workload in workloads(render(directory)):
            for container in containers(workload):
                repository = container["image"].rpartition(":")[0]
                if repository.rpartition("/")[2] == "stowage":
                    assert container["image"] == tag, f"{label(directory)}: {_name(workload)}"
    images = {c["image"] for w in workloads(render(BASE)) for c in containers(w)}
    assert images == {tag}


# ----------------------------------------------------------------------------- helpers


def _name(obj: Obj) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _selects(selector: Obj, labels: Obj) -> bool:
    assert set(selector) <= {"matchLabels"}, f"unexpected selector {selector}"
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _agents(objects: tuple[Obj, ...]) -> list[tuple[Obj, Obj, Any]]:
    """(container, pod spec, parsed command line) of each stowage agent container."""
    found = []
    for workload in workloads(objects):
        for container in containers(workload):
            args = container.get("args") or []
            parsed = build_parser().parse_args(args) if "agent" in args else None
            if parsed is not None and parsed.command == "agent":
                found.append((container, workload["spec"]["template"]["spec"], parsed))
    return found


def _mount_of(container: Obj, path: Path) -> Obj:
    """The volume mount ``path`` lies in (the deepest one)."""
    holding = [m for m in container["volumeMounts"] if path.is_relative_to(m["mountPath"])]
    assert holding, f"{path} is in no mount"
    return max(holding, key=lambda m: len(Path(m["mountPath"]).parts))


def _host_path(pod: Obj, volume: str) -> Any:
    (found,) = [v for v in pod["volumes"] if v["name"] == volume]
    return found.get("hostPath")


def _assert_confined(pod: Obj, container: Obj) -> None:
    context = container["securityContext"]
    profile = (context.get("seccompProfile") or pod["securityContext"]["seccompProfile"])["type"]
    assert profile == "RuntimeDefault"
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    assert not context.get("privileged")
