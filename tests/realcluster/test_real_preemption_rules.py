"""kube-scheduler's own preemption, one scheduling rule at a time, with Stowage's ``preempt``
verb in the loop: the victims the real scheduler deletes are the ones written down here,
and the ones Stowage's planner picks over the same objects.

Each scenario is a small pool of kwok nodes (its own namespace and ``nodeSelector``)
holding pods bound by ``nodeName``, and one critical pending pod that fits nowhere until
something is evicted. kube-scheduler (the shipped config: ``preemptVerb`` on, the
extender ``ignorable``) finds its candidates (per node the fewest lower-priority pods its
filters need gone), asks Stowage, and deletes what Stowage answers for the node it then
picks. The rules:

* **TaintToleration, NodeUnschedulable, NodeAffinity**: a node the preemptor cannot use
  whatever is evicted (a taint it does not tolerate, cordoned, a required node affinity it
  does not match) is no candidate; its pods are the cheapest by Stowage's measure (a fresh
  checkpoint), so a planner blind to the rule would pick them.
* **NodePorts, InterPodAffinity, PodTopologySpread**: the victims are the pods whose going
  the rule needs (the host port's holder, not the cheaper holder of another port; the pod
  the preemptor's anti-affinity selects and the pod whose own anti-affinity selects the
  preemptor; the pod that skews the spread), not the cheaper bystanders, whose eviction
  would free resources the pod cannot use.
* **NodeResourcesFit's pod count**: a node with room for the pod's CPU and memory but
  not for one more pod needs a victim all the same (Stowage's own filter counts no pods).
* **PodDisruptionBudget**: kube-scheduler takes a budget-protected pod when nothing else
  helps; Stowage refuses, so the pod stays pending and the protected pod runs.
* **Levels, dropped not narrowed**: where Stowage allows only some of a node's victims and
  those alone would not make room, the node is dropped, not narrowed to them (narrowed, it
  would win kube-scheduler's choice by its lower-priority victims and free room the pod
  cannot use); another node's victims go instead.

All scenarios share one control plane, coordinator and kube-scheduler, and run at once;
the tests wait on one watch of this module's pods and one of Events.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import pytest
from kubernetes import client, watch

from common import config as config_loader
from coordinator.config import CoordinatorSettings
from coordinator.eviction.answers import Plan, Refusal
from coordinator.eviction.plan import plan_preemption
from hack.cluster import coordinator, scheduling
from hack.ports import free_port
from tests.coordinator.eviction.evictrig import EvictRig
from tests.kit import until
from tests.realcluster import kit

T = TypeVar("T")

OWNER: Final = "test-preemption-rules"
SETTINGS: Final = kit.coordinator_settings("rc-preemption-rules")
CLASSES: Final = {
    "rc-rules-critical": 1_000_000_000,
    "rc-rules-high": 10_000,
    "rc-rules-medium": 1_000,
    "rc-rules-low": 0,
}
ZONE: Final = "topology.kubernetes.io/zone"
WAIT_S: Final = 90.0
PREEMPTOR: Final = "urgent"
CHECKPOINT_AGE_S: Final = 3600.0
"""How long ago the pods not ``checkpointed`` were: far more than the module takes."""
NO_CANDIDATE: Final = "no candidate node for preemption"
"""kube-scheduler's verdict when it had candidates and its extenders removed them all."""


# ------------------------------------------------------------------ scenarios


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    spec: Mapping[str, Any] = field(default_factory=dict)
    """Set once the node is Ready (kwok and the node controller then leave it alone)."""
    pods: int = 110
    """Its pod capacity."""


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[NodeSpec, ...]
    pods: tuple[dict[str, Any], ...]
    """Bound by ``nodeName``, before the preemptor exists."""
    preemptor: dict[str, Any]
    victims: frozenset[str]
    """What kube-scheduler deletes, written by hand."""
    lands: str | None
    """Where the preemptor binds; None: it stays pending, nothing deleted."""
    budget: str | None = None
    """An ``app`` label a PodDisruptionBudget (``minAvailable: 1``) protects."""

    @property
    def namespace(self) -> str:
        return f"rr-{self.name}"

    @property
    def pool(self) -> dict[str, str]:
        return {scheduling.POOL_LABEL: f"rules-{self.name}"}


def node_name(scenario: str, suffix: str) -> str:
    return f"rr-{scenario}-{suffix}"


def pod(
    name: str,
    priority_class: str,
    *,
    node: str | None = None,
    gpus: int = 0,
    labels: Mapping[str, str] | None = None,
    checkpointed: bool = False,
    ports: tuple[int, ...] = (),
    **spec: Any,
) -> dict[str, Any]:
    """A pod of 1 CPU and 1 GiB (and ``gpus``), bound to ``node`` if given, whose last
    checkpoint was an hour ago — or, ``checkpointed``, now: then it is Stowage's cheapest
    victim of its level. (Without a checkpoint a pod would lose the work since it started,
    which for pods started during this module is less than since a checkpoint taken when
    the module was loaded: the cheapest would be whichever started last.)"""
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    if gpus:
        amounts = {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
        resources = {"requests": amounts, "limits": amounts}
    container: dict[str, Any] = {"name": "work", "image": "work:1", "resources": resources}
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    body: dict[str, Any] = {
        "metadata": {"name": name, "labels": {kit.OWNER: OWNER, **(labels or {})}},
        "spec": {
            "priorityClassName": priority_class,
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
            **spec,
        },
    }
    stamp = time.time() - (0 if checkpointed else CHECKPOINT_AGE_S)
    body["metadata"]["annotations"] = {"stowage.io/last-checkpoint": f"{stamp:.0f}"}
    if node is not None:
        body["spec"]["nodeName"] = node
    return body


def urgent(gpus: int = 0, **more: Any) -> dict[str, Any]:
    return pod(PREEMPTOR, "rc-rules-critical", gpus=gpus, schedulerName="stowage-scheduler", **more)


def full_pair(name: str, a_spec: Mapping[str, Any] = {}, **urgent_spec: Any) -> Scenario:
    """Nodes a and b, each full with a low 8-GPU pod, a's the cheaper (checkpointed now);
    the rule keeps the preemptor off a, so b's pod goes."""
    a, b = node_name(name, "a"), node_name(name, "b")
    return Scenario(
        name=name,
        nodes=(NodeSpec(a, spec=a_spec), NodeSpec(b, labels={"rr-side": "right"})),
        pods=(
            pod("low-a", "rc-rules-low", node=a, gpus=8, checkpointed=True),
            pod("low-b", "rc-rules-low", node=b, gpus=8),
        ),
        preemptor=urgent(gpus=8, **urgent_spec),
        victims=frozenset({"low-b"}),
        lands=b,
    )


_REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"


def _anti(match: Mapping[str, str]) -> dict[str, Any]:
    """Required anti-affinity to the pods ``match`` selects, per node."""
    term = {"labelSelector": {"matchLabels": dict(match)}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {_REQUIRED: [term]}}


def scenarios() -> tuple[Scenario, ...]:
    taint = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
    right = {"key": "rr-side", "operator": "In", "values": ["right"]}
    required: dict[str, Any] = {"nodeSelectorTerms": [{"matchExpressions": [right]}]}
    ports, anti, spread = (node_name(s, "a") for s in ("ports", "anti", "spread"))
    spread_b, guarded = node_name("spread", "b"), node_name("budget", "a")
    short_a, short_b = node_name("short", "a"), node_name("short", "b")
    counted = node_name("count", "a")
    skew = {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    return (
        full_pair("taint", {"taints": [taint]}),
        full_pair("cordon", {"unschedulable": True}),
        full_pair("affinity", affinity={"nodeAffinity": {_REQUIRED: required}}),
        Scenario(
            name="ports",
            nodes=(NodeSpec(ports),),
            # One victim: kube-scheduler 1.37 requeues a preemptor on its last victim's
            # deletion only when the rule that refused it cares about that victim; an
            # earlier deletion arrives while the preemption runs and is held back, so a
            # port holder deleted before a GPU holder left the pod pending for minutes.
            # The other port's holder, the cheapest, keeps a model that takes any host port
            # for a conflict from passing: its plan (and the verb, narrowing to the holder)
            # would want it gone too.
            pods=(
                pod("holder", "rc-rules-low", node=ports, ports=(8080,)),
                pod("bystander", "rc-rules-low", node=ports, checkpointed=True),
                pod("other-port", "rc-rules-low", node=ports, ports=(9090,), checkpointed=True),
            ),
            preemptor=urgent(ports=(8080,)),
            victims=frozenset({"holder"}),
            lands=ports,
        ),
        Scenario(
            name="anti",
            nodes=(NodeSpec(anti),),
            pods=(
                pod("noisy", "rc-rules-low", node=anti, labels={"app": "noisy"}),
                pod("loner", "rc-rules-low", node=anti, affinity=_anti({"role": "urgent"})),
                pod("quiet", "rc-rules-low", node=anti, checkpointed=True),
            ),
            preemptor=urgent(labels={"role": "urgent"}, affinity=_anti({"app": "noisy"})),
            victims=frozenset({"noisy", "loner"}),
            lands=anti,
        ),
        Scenario(
            name="spread",
            nodes=(
                NodeSpec(spread, labels={ZONE: "rr-zone-1"}),
                NodeSpec(spread_b, labels={ZONE: "rr-zone-2"}),
            ),
            pods=(
                pod("s-low", "rc-rules-low", node=spread, labels={"app": "spread"}),
                pod("s-medium", "rc-rules-medium", node=spread, labels={"app": "spread"}),
                pod("anchor", "rc-rules-high", node=spread_b, gpus=8, labels={"app": "spread"}),
            ),
            preemptor=urgent(gpus=8, labels={"app": "spread"}, topologySpreadConstraints=[skew]),
            victims=frozenset({"s-low"}),
            lands=spread,
        ),
        Scenario(
            name="count",
            # Room for two pods: CPU and memory to spare, as Stowage's own filter counts,
            # but kube-scheduler's NodeResourcesFit counts pods too.
            nodes=(NodeSpec(counted, pods=2),),
            pods=(
                pod("counted-low", "rc-rules-low", node=counted),
                pod("counted-medium", "rc-rules-medium", node=counted),
            ),
            preemptor=urgent(),
            victims=frozenset({"counted-low"}),
            lands=counted,
        ),
        Scenario(
            name="budget",
            nodes=(NodeSpec(guarded),),
            pods=(pod("guarded", "rc-rules-low", node=guarded, gpus=8, labels={"app": "guarded"}),),
            preemptor=urgent(gpus=8),
            victims=frozenset(),
            lands=None,
            budget="guarded",
        ),
        Scenario(
            name="short",
            nodes=(NodeSpec(short_a), NodeSpec(short_b)),
            pods=(
                pod("half-low", "rc-rules-low", node=short_a, gpus=4, checkpointed=True),
                pod("half-high", "rc-rules-high", node=short_a, gpus=4),
                pod("whole-medium", "rc-rules-medium", node=short_b, gpus=8),
            ),
            preemptor=urgent(gpus=8),
            victims=frozenset({"whole-medium"}),
            lands=short_b,
        ),
    )


SCENARIOS: Final = scenarios()


# ------------------------------------------------------------------ watching


class Watched:
    """One resource of the cluster as a list-then-watch delivers it (raw JSON), in the
    namespaces given: the latest object per ``(namespace, name)`` and the keys of those
    deleted or being deleted. Waiters wake on each event."""

    def __init__(self, list_all: Callable[..., Any], namespaces: frozenset[str], **kw: Any):
        self._list = list_all
        self._kw = kw
        self._namespaces = namespaces
        self._changed = threading.Condition()
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._deleted: set[tuple[str, str]] = set()
        self._gone: set[tuple[str, str]] = set()
        self._watch = watch.Watch()
        self._stopped = threading.Event()
        self._failed: Exception | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._follow()
        except Exception as e:  # a watch cut by stop() ends so too
            with self._changed:
                self._failed = None if self._stopped.is_set() else e
                self._changed.notify_all()

    def _follow(self) -> None:
        listed = json.loads(self._list(_preload_content=False, **self._kw).data)
        for obj in listed["items"]:
            self._saw("ADDED", obj)
        version = listed["metadata"]["resourceVersion"]
        while not self._stopped.is_set():
            for event in self._watch.stream(
                self._list, resource_version=version, timeout_seconds=2, **self._kw
            ):
                obj = event["raw_object"]
                version = obj["metadata"].get("resourceVersion", version)
                self._saw(event["type"], obj)

    def _saw(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if key[0] not in self._namespaces:
            return
        with self._changed:
            self._objects[key] = obj
            if kind == "DELETED" or meta.get("deletionTimestamp"):
                self._deleted.add(key)
            if kind == "DELETED":
                self._gone.add(key)
            self._changed.notify_all()

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The object as last seen ({} if never)."""
        with self._changed:
            return self._objects.get((namespace, name), {})

    def of(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's objects as last seen, deleted ones included."""
        with self._changed:
            return [obj for (ns, _), obj in self._objects.items() if ns == namespace]

    def gone(self, namespace: str) -> frozenset[str]:
        """Names of the namespace's objects deleted for good."""
        with self._changed:
            return frozenset(name for ns, name in self._gone if ns == namespace)

    def deleted(self, namespace: str) -> frozenset[str]:
        """Names of the namespace's objects deleted or being deleted."""
        with self._changed:
            return frozenset(name for ns, name in self._deleted if ns == namespace)

    def wait(
        self,
        check: Callable[[], T],
        what: str,
        timeout_s: float = WAIT_S,
        story: Callable[[], str] = str,
    ) -> T:
        """``check``'s first true answer, asked after every event; AssertionError naming
        ``what`` (and telling ``story``) after ``timeout_s``."""
        found: list[T] = []

        def answered() -> bool:
            if self._failed is not None:
                raise AssertionError(f"the watch failed: {self._failed!r}") from self._failed
            result = check()
            if result:
                found.append(result)
            return bool(result)

        with self._changed:
            if not self._changed.wait_for(answered, timeout_s):
                raise AssertionError(f"not within {timeout_s:g} s: {what}. {story()}")
        return found[0]

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()
        self._thread.join(timeout=10)


# ------------------------------------------------------------------ the run


@dataclass(frozen=True)
class Run:
    pods: Watched
    events: Watched
    planned: dict[str, Plan | Refusal]
    """Scenario → Stowage's planner over the scenario's objects as the API serves them."""
    live: dict[str, dict[str, Any]]
    """Scenario → the running coordinator's ``/debug/plan`` answer, before kube-scheduler
    starts."""


@pytest.fixture(scope="module")
def run(cluster: kit.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Every scenario's nodes, pods, budgets and pending preemptor; the plans; then the
    coordinator and kube-scheduler (the shipped config), left running for the tests."""
    cluster.apply(kit.shipped_rbac() + kit.scheduler_rbac())
    priority_classes(cluster)
    namespaces = frozenset(s.namespace for s in SCENARIOS)
    for ns in sorted(namespaces):
        cluster.namespace(ns, OWNER)
    policy = client.PolicyV1Api(cluster.api)
    mine = f"{kit.OWNER}={OWNER}"
    pods = Watched(cluster.core.list_pod_for_all_namespaces, namespaces, label_selector=mine)
    events = Watched(cluster.core.list_event_for_all_namespaces, namespaces)
    budgets = Watched(policy.list_pod_disruption_budget_for_all_namespaces, namespaces)
    out = tmp_path_factory.mktemp("preemption-rules")
    try:
        build(cluster, pods, budgets)
        planned = {s.name: planner(cluster, s) for s in SCENARIOS}
        kubeconfig = cluster.kubeconfig_for(kit.COORDINATOR_SA, out / "coordinator.kubeconfig")
        debug = free_port()
        with coordinator.running(cluster.plane, kubeconfig, SETTINGS, debug_port=debug) as (_, url):
            live = live_plans(debug, planned)
            config = scheduling.scheduler_config(extender_url=url, leader_elect=False)
            kubeconfig = cluster.kubeconfig_for("stowage-scheduler", out / "scheduler.kubeconfig")
            scheduler = cluster.plane.start_scheduler(config, kubeconfig=kubeconfig)
            try:
                yield Run(pods, events, planned, live)
            finally:
                scheduler.stop()
    finally:
        for watched in (pods, events, budgets):
            watched.stop()
        cluster.delete_owned(OWNER)


def priority_classes(cluster: kit.Cluster) -> None:
    api = client.SchedulingV1Api(cluster.api)
    for name, value in CLASSES.items():
        try:
            api.create_priority_class({"metadata": {"name": name}, "value": value})
        except client.exceptions.ApiException as e:
            if e.status != 409:
                raise


def build(cluster: kit.Cluster, pods: Watched, budgets: Watched) -> None:
    """The nodes (Ready, then tainted or cordoned), the bound pods (Running), the budgets
    (observed by the disruption controller) and the pending preemptors."""
    for s in SCENARIOS:
        for n in s.nodes:
            cluster.add_node(n.name, OWNER, gpus=8, labels={**s.pool, **n.labels}, pods=n.pods)
    cluster.wait_ready([n.name for s in SCENARIOS for n in s.nodes])
    for s in SCENARIOS:
        for n in s.nodes:
            if n.spec:
                cluster.core.patch_node(n.name, {"spec": dict(n.spec)})
        for body in s.pods:
            cluster.core.create_namespaced_pod(s.namespace, body)
    bound = {(s.namespace, p["metadata"]["name"]) for s in SCENARIOS for p in s.pods}
    pods.wait(
        lambda: all(pods.get(*key).get("status", {}).get("phase") == "Running" for key in bound),
        "every bound pod Running",
    )
    policy = client.PolicyV1Api(cluster.api)
    for s in SCENARIOS:
        if s.budget is not None:
            spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": s.budget}}}
            policy.create_namespaced_pod_disruption_budget(
                s.namespace, {"metadata": {"name": s.budget}, "spec": spec}
            )
            key = (s.namespace, s.budget)
            budgets.wait(lambda k=key: observed(budgets.get(*k)), f"budget {key} observed")
    for s in SCENARIOS:
        preemptor = {**s.preemptor, "spec": {**s.preemptor["spec"], "nodeSelector": s.pool}}
        cluster.core.create_namespaced_pod(s.namespace, preemptor)


def observed(budget: Mapping[str, Any]) -> bool:
    """The disruption controller has counted the budget's pods (and allows none to go)."""
    if not budget:
        return False
    status = budget.get("status") or {}
    return (
        status.get("observedGeneration") == budget["metadata"].get("generation")
        and status.get("expectedPods", 0) >= 1
        and status.get("disruptionsAllowed") == 0
    )


def listed(call: Callable[..., Any], *args: Any, **kw: Any) -> list[dict[str, Any]]:
    """The items of a list call as the API server's JSON."""
    answer = json.loads(call(*args, _preload_content=False, **kw).data)
    return list(answer["items"])


def planner(cluster: kit.Cluster, scenario: Scenario) -> Plan | Refusal:
    """What Stowage's planner makes of the scenario's nodes, pods and budgets as listed,
    with the settings the coordinator runs with, for its preemptor."""
    rig = EvictRig(settings=config_loader.build(CoordinatorSettings, SETTINGS))
    selector = ",".join(f"{k}={v}" for k, v in scenario.pool.items())
    rig.nodes(*listed(cluster.core.list_node, label_selector=selector))
    objects = listed(cluster.core.list_namespaced_pod, scenario.namespace)
    rig.pods(*objects)
    policy = client.PolicyV1Api(cluster.api)
    rig.budgets(*listed(policy.list_namespaced_pod_disruption_budget, scenario.namespace))
    preemptor = next(p for p in objects if p["metadata"]["name"] == PREEMPTOR)
    return plan_preemption(rig.view(), rig.facts(preemptor), rig.evictions, time.time())


def live_plans(debug_port: int, planned: Mapping[str, Plan | Refusal]) -> dict[str, Any]:
    """The coordinator's ``/debug/plan`` for each preemptor, once it has listed the
    budgets (before, it refuses every plan as unsafe; the preempt verb too)."""

    def answer(scenario: Scenario) -> dict[str, Any]:
        query = urllib.parse.urlencode({"pod": f"{scenario.namespace}/{PREEMPTOR}"})
        url = f"http://127.0.0.1:{debug_port}/debug/plan?{query}"
        with urllib.request.urlopen(url, timeout=5) as response:
            found: dict[str, Any] = json.loads(response.read())
        return found

    def listed_budgets() -> bool:
        return all("not listed" not in answer(s).get("refusal", "") for s in SCENARIOS)

    until(listed_budgets, "the coordinator's PodDisruptionBudgets listed")
    return {s.name: answer(s) for s in SCENARIOS}


# ------------------------------------------------------------------ the tests


def refused_by_extender(run: Run, namespace: str) -> str | None:
    """kube-scheduler's FailedScheduling message for the preemptor once its extender
    took every preemption candidate away."""
    for event in run.events.of(namespace):
        involved = event.get("involvedObject") or {}
        message = event.get("message") or ""
        if (
            involved.get("name") == PREEMPTOR
            and event.get("reason") == "FailedScheduling"
            and NO_CANDIDATE in message
        ):
            return message
    return None


def story(run: Run, namespace: str) -> str:
    """What happened in the namespace: its pods (where, whether deleted) and Events."""
    deleted, gone = run.pods.deleted(namespace), run.pods.gone(namespace)

    def said(pod: Mapping[str, Any]) -> str:
        name = pod["metadata"]["name"]
        where = f"{name} on {pod['spec'].get('nodeName')}"
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated:
            where += f", nominated to {nominated}"
        return where + (" (gone)" if name in gone else " (terminating)" if name in deleted else "")

    pods = [said(p) for p in run.pods.of(namespace)]
    events = [
        f"{e.get('involvedObject', {}).get('name')}: {e.get('reason')}: {e.get('message')}"
        for e in run.events.of(namespace)
    ]
    return f"Pods: {'; '.join(sorted(pods))}. Events: {' | '.join(events)}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_kube_scheduler_deletes_exactly_the_victims(run: Run, scenario: Scenario) -> None:
    ns = scenario.namespace
    if scenario.lands is None:
        run.events.wait(lambda: refused_by_extender(run, ns), "kube-scheduler's candidates refused")
        assert run.pods.deleted(ns) == frozenset()
        assert not run.pods.get(ns, PREEMPTOR)["spec"].get("nodeName")
        return
    landed = run.pods.wait(
        lambda: run.pods.get(ns, PREEMPTOR)["spec"].get("nodeName"),
        f"{ns}/{PREEMPTOR} bound",
        story=lambda: story(run, ns),
    )
    assert (landed, run.pods.deleted(ns)) == (scenario.lands, scenario.victims)
    freed = {run.pods.get(ns, v)["spec"]["nodeName"] for v in scenario.victims}
    assert freed == {landed}, "the victims were on the node the preemptor landed on"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_stowage_plans_the_same_victims(run: Run, scenario: Scenario) -> None:
    planned, live = run.planned[scenario.name], run.live[scenario.name]
    if scenario.lands is None:
        assert isinstance(planned, Refusal), planned
        assert live.get("refusal") == planned.reason, live
        return
    assert isinstance(planned, Plan), planned
    assert (planned.node, {v.name for v in planned.victims}) == (scenario.lands, scenario.victims)
    plan = live.get("plan") or {}
    names = {v["pod"].split("/", 1)[1] for v in plan.get("victims", ())}
    assert (plan.get("node"), names) == (scenario.lands, scenario.victims), live
