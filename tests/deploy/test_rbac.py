"""RBAC grants exactly what the code calls: nothing missing, nothing extra.

The calls are read from the code, not listed here: an AST walk over each component's
packages finds the ``kubernetes`` client API classes it builds and every endpoint method of
those classes it calls or hands over (a list method handed to the watch Reflector, as it
is or bound by ``functools.partial``, is both listed and watched; a custom resource's
group, version and plural are the call's literal arguments), plus the literal method and
path of raw requests
(``ApiClient.param_serialize``, which every raw ``call_api`` is built by). Each method's HTTP
method and path come from the client itself (its generated ``_<method>_serialize``), and
map to (apiGroup, resource, verb) the way the API server's authorizer sees the request.
The grants are read from the rendered manifests: every Role and ClusterRole bound to the
component's ServiceAccount.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import kubernetes.client
import pytest
import yaml

from cli.main import build_parser
from tests.deploy.manifests import (
    BASE,
    REPO,
    Obj,
    containers,
    find,
    kustomizations,
    label,
    render,
)

Permission = tuple[str, str, str]
"""(apiGroup, resource[/subresource], verb)"""

COMPONENTS = {
    "stowage-coordinator": ("coordinator", "common"),
    "stowage-agent": ("agent", "common"),
}
"""ServiceAccount -> the packages whose code runs under it."""

API_CLASSES = frozenset(n for n in kubernetes.client.__all__ if n.endswith("Api"))
"""The client's API class names; each is imported only when the code builds it (importing
all of them takes seconds)."""
_SERIALIZED = re.compile(r"method='(\w+)',\s*resource_path='([^']+)'")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass
class Calls:
    """What one component's code asks of the API server (and of anything else)."""

    permissions: set[Permission]
    raw_paths: set[tuple[str, str]]
    """(HTTP method, path) of raw calls that are not API server paths (the kubelet's)."""


@pytest.mark.parametrize("directory", kustomizations(), ids=label)
def test_each_service_account_is_granted_exactly_what_its_code_calls(directory: Path) -> None:
    objects = render(directory)
    for account, packages in COMPONENTS.items():
        if not any(o["kind"] == "ServiceAccount" and o["metadata"]["name"] == account
                   for o in objects):  # fmt: skip
            continue
        calls = scan(packages)
        granted = {p for p, _ in grants(objects, account)}
        assert calls.permissions, f"no API calls found in {packages}: the scan is broken"
        assert sorted(calls.permissions - granted) == [], f"{account}: missing grants"
        assert sorted(granted - calls.permissions) == [], f"{account}: granted but never used"


def test_each_component_runs_under_its_service_account() -> None:
    objects = render(BASE)
    for kind, name in (("Deployment", "stowage-coordinator"), ("DaemonSet", "stowage-agent")):
        pod = find(objects, kind, name)["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] in COMPONENTS
        find(objects, "ServiceAccount", pod["serviceAccountName"])


def test_the_coordinator_holds_its_lease_in_its_own_namespace_only() -> None:
    for (group, resource, _), kind in grants(render(BASE), "stowage-coordinator"):
        if (group, resource) == ("coordination.k8s.io", "leases"):
            assert kind == "Role"


@pytest.mark.parametrize("directory", kustomizations(), ids=label)
def test_the_coordinator_lists_approvals_in_its_own_namespace_and_writes_none(
    directory: Path,
) -> None:
    """A preemption approval is a ConfigMap in the coordinator's namespace, which only
    operators write: the coordinator may list ConfigMaps there (a Role in the namespace
    its configuration names), and nothing else with them anywhere."""
    objects = render(directory)
    if not any(o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "stowage-coordinator"
               for o in objects):  # fmt: skip
        pytest.skip("no coordinator in this kustomization")
    granted = [
        (verb, kind)
        for (group, resource, verb), kind in grants(objects, "stowage-coordinator")
        if (group, resource) == ("", "configmaps")
    ]
    assert granted == [("list", "Role")]
    config = yaml.safe_load(
        find(objects, "ConfigMap", "stowage-coordinator")["data"]["config.yaml"]
    )
    role = find(objects, "Role", "stowage-coordinator")
    assert role["metadata"]["namespace"] == config["kube"]["namespace"]


def test_approvers_may_create_approvals_and_nothing_else() -> None:
    role = find(render(BASE), "Role", "stowage-approver")
    assert role["metadata"]["namespace"] == "stowage-system"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]


def test_the_agent_reads_its_pods_from_the_api_server_not_the_kubelet() -> None:
    """The agent's kubelet pods source (a raw GET /pods on the kubelet) needs nodes/proxy,
    which can exec into any pod on the node; the DaemonSet uses the API server source, so
    no such grant is needed."""
    calls = scan(COMPONENTS["stowage-agent"])
    assert calls.raw_paths == {("GET", "/pods")}
    agents = find(render(BASE), "DaemonSet", "stowage-agent")
    (agent,) = containers(agents)
    assert build_parser().parse_args(agent["args"]).pods_source == "apiserver"


def test_the_reflector_watches_with_the_list_method_it_is_given() -> None:
    """The scan counts a list method handed to the Reflector as a watch too: it calls that
    method with watch=True."""
    source = (REPO / "coordinator/kube/watches.py").read_text()
    assert re.search(r"self\._list\(\s*watch=True", source)


@pytest.mark.parametrize(
    ("api", "method", "watched", "expected"),
    [
        ("CoreV1Api", "list_node", True, {("", "nodes", "list"), ("", "nodes", "watch")}),
        ("CoreV1Api", "read_namespaced_pod", False, {("", "pods", "get")}),
        ("CoreV1Api", "create_namespaced_pod_eviction", False, {("", "pods/eviction", "create")}),
        (
            "CoordinationV1Api",
            "replace_namespaced_lease",
            False,
            {("coordination.k8s.io", "leases", "update")},
        ),
        (
            "CoreV1Api",
            "delete_collection_namespaced_pod",
            False,
            {("", "pods", "deletecollection")},
        ),
        ("CoreV1Api", "patch_node_status", False, {("", "nodes/status", "patch")}),
        (
            "AuthenticationV1Api",
            "create_token_review",
            False,
            {("authentication.k8s.io", "tokenreviews", "create")},
        ),
    ],
)
def test_client_methods_map_to_what_the_authorizer_checks(
    api: str, method: str, watched: bool, expected: set[Permission]
) -> None:
    cls = getattr(kubernetes.client, api)
    assert permissions(*endpoint(cls, method), watched=watched) == expected


# ------------------------------------------------------------------------ the code


@functools.cache
def scan(packages: tuple[str, ...]) -> Calls:
    trees = [ast.parse(p.read_text()) for pkg in packages for p in (REPO / pkg).rglob("*.py")]
    built = {
        getattr(kubernetes.client, name) for tree in trees for node in ast.walk(tree)
        if isinstance(node, ast.Call) and (name := _called(node)) in API_CLASSES
    }  # fmt: skip
    watched = {
        method.attr for tree in trees for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called(node) == "Reflector"
        for arg in node.args if (method := _handed(arg)) is not None
    }  # fmt: skip
    arguments: dict[int, list[ast.expr]] = {}
    """A method's node (by id) -> the positional arguments it is called or bound with."""
    for node in (n for t in trees for n in ast.walk(t) if isinstance(n, ast.Call)):
        if isinstance(node.func, ast.Attribute):
            arguments[id(node.func)] = node.args
        if (bound := _handed(node)) is not None:
            arguments[id(bound)] = node.args[1:]
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for function in (n for t in trees for n in ast.walk(t) if isinstance(n, functions)):
        called = {_called(n) for n in ast.walk(function) if isinstance(n, ast.Call)}
        if "call_api" in called:  # else its path escapes this scan
            assert "param_serialize" in called, f"{function.name}: call_api without a literal path"
    owners: dict[str, list[type]] = {}
    for cls in built:
        for name in dir(cls):
            if name.startswith("_") and name.endswith("_serialize"):
                owners.setdefault(name.removeprefix("_").removesuffix("_serialize"), []).append(cls)
    calls = Calls(set(), set())
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in owners:
                classes = owners[node.attr]
                assert len(classes) == 1, f"{node.attr} is ambiguous among {classes}"
                http, path = endpoint(classes[0], node.attr)
                path = filled(classes[0], node.attr, path, arguments.get(id(node), []))
                assert "{group}" not in path and "{plural}" not in path, (
                    f"{node.attr}: a custom resource without a literal group and plural"
                )
                calls.permissions |= permissions(http, path, node.attr in watched)
            elif isinstance(node, ast.Call) and _called(node) == "param_serialize":
                http, path = (a.value for a in node.args[:2] if isinstance(a, ast.Constant))
                if path.startswith(("/api/", "/apis/")):
                    calls.permissions |= permissions(http, path, watched=False)
                else:
                    calls.raw_paths.add((http, path))
    return calls


@functools.cache
def endpoint(cls: type, method: str) -> tuple[str, str]:
    """The HTTP method and path template the client sends for ``method``."""
    source = inspect.getsource(getattr(cls, f"_{method}_serialize"))
    (found,) = _SERIALIZED.findall(source)
    return found


def filled(cls: type, method: str, path: str, args: list[ast.expr]) -> str:
    """``path`` with the path parameters that the call gives as literal positional
    arguments filled in (a custom resource's group, version and plural)."""
    names = [n for n in inspect.signature(getattr(cls, method)).parameters if n != "self"]
    for name, arg in zip(names, args, strict=False):
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            path = path.replace(f"{{{name}}}", arg.value)
    return path


def permissions(http: str, path: str, watched: bool) -> set[Permission]:
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    named = len(rest) > 1
    if http == "GET":
        verbs = {"get"} if named else {"list", "watch"} if watched else {"list"}
    elif http == "DELETE":
        verbs = {"delete" if named else "deletecollection"}
    else:
        verbs = {_VERBS[http]}
    return {(group, resource, verb) for verb in verbs}


def _handed(node: ast.expr) -> ast.Attribute | None:
    """The client method an argument hands over: as it is, or as ``partial(method, ...)``."""
    if isinstance(node, ast.Attribute):
        return node
    if isinstance(node, ast.Call) and _called(node) == "partial" and node.args:
        first = node.args[0]
        return first if isinstance(first, ast.Attribute) else None
    return None


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


# --------------------------------------------------------------------- the manifests


def grants(objects: tuple[Obj, ...], account: str) -> list[tuple[Permission, str]]:
    """Each permission bound to ServiceAccount ``account``, with the kind of role granting it."""
    found = []
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = binding["subjects"]
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account for s in subjects):
            continue
        ref = binding["roleRef"]
        role = find(objects, ref["kind"], ref["name"])
        for rule in role["rules"]:
            assert "*" not in [*rule["apiGroups"], *rule["resources"], *rule["verbs"]], rule
            found += [
                ((group, resource, verb), role["kind"])
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            ]
    return found
