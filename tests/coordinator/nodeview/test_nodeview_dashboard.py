"""The Grafana dashboard asks only for what the coordinator exports: every PromQL
expression in ``daemonset/monitoring/grafana-dashboard.json`` is parsed (a real PromQL
parser), and each metric it selects — with the labels its matchers, ``by (…)`` and
``on (…)`` clauses use — must be in the ``/metrics`` of a real coordinator that has seen
reports, throttled a node's best-effort pods and planned a (dry-run) preemption."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser as promql
import pytest

from coordinator.config import ColocationPool, ColocationSettings
from coordinator.metrics import NODE_GAUGES
from hack.kubeapi.resources import PODS
from tests.coordinator.eviction.evictrig import A100, pod
from tests.coordinator.ingest.test_ingest_colocation import colocated
from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start

DASHBOARD = Path(__file__).resolve().parents[3] / "daemonset/monitoring/grafana-dashboard.json"
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$node": ".*"}
"""What Grafana puts in for the variables the dashboard uses (any other is an error)."""
LABEL_VALUES = re.compile(r"label_values\((\w+),\s*(\w+)\)")

Exported = Mapping[str, Mapping[str, frozenset[str]]]
"""Sample name → each label its samples carry → the values they have."""


@dataclass(frozen=True)
class Use:
    """A metric an expression selects, the labels the expression relies on it having, and
    the values its ``label="value"`` matchers want."""

    metric: str
    labels: frozenset[str]
    values: frozenset[tuple[str, str]] = frozenset()


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(within: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for panel in within.get("panels", []):
        yield panel
        yield from panels(panel)  # a row's own panels


def expressions(board: Mapping[str, Any]) -> list[str]:
    """Every target's PromQL, the Grafana variables put in."""
    found = []
    for panel in panels(board):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, f"a Grafana variable this test does not know: {expr}"
            found.append(expr)
    return found


def uses(expr: str) -> list[Use]:
    """The metrics ``expr`` selects and the labels it needs each to have: its matchers'
    and those of every ``by``, ``on`` and ``group_left/right`` above it."""
    found: list[Use] = []

    def visit(node: Any, needed: frozenset[str]) -> None:
        if isinstance(node, promql.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr}"
            matchers = [m for m in node.matchers.matchers if m.name != "__name__"]
            equal = {(m.name, m.value) for m in matchers if m.op == promql.MatchOp.Equal}
            labels = needed | {m.name for m in matchers}
            found.append(Use(node.name, labels, frozenset(equal)))
        elif isinstance(node, promql.MatrixSelector):
            visit(node.vector_selector, needed)
        elif isinstance(node, promql.AggregateExpr):
            modifier = node.modifier
            by = promql.AggModifierType.By
            grouped = set(modifier.labels) if modifier and modifier.type == by else set()
            visit(node.expr, needed | grouped)
        elif isinstance(node, promql.BinaryExpr):
            modifier = node.modifier
            on: set[str] = set()
            extra_left: set[str] = set()
            extra_right: set[str] = set()
            if modifier is not None:
                matching = modifier.matching
                if matching is not None and matching.type == promql.LabelModifierType.Include:
                    on = set(matching.labels)
                group = set(modifier.group_labels or ())
                card = promql.VectorMatchCardinality
                if modifier.card == card.ManyToOne:
                    extra_right = group
                elif modifier.card == card.OneToMany:
                    extra_left = group
            visit(node.lhs, needed | on | extra_left)
            visit(node.rhs, needed | on | extra_right)
        elif isinstance(node, promql.Call):
            for arg in node.args:
                visit(arg, needed)
        elif isinstance(node, promql.ParenExpr | promql.UnaryExpr | promql.SubqueryExpr):
            visit(node.expr, needed)
        elif not isinstance(node, promql.NumberLiteral | promql.StringLiteral):
            raise AssertionError(f"{type(node).__name__} in {expr}: not understood here")

    visit(promql.parse(expr), frozenset())
    return found


def problems(used: list[Use], exported: Exported) -> list[str]:
    """What the dashboard asks for that is not exported."""
    found = []
    for use in used:
        if use.metric not in exported:
            found.append(f"{use.metric}: not exported")
        elif not use.labels <= exported[use.metric].keys():
            missing = sorted(use.labels - exported[use.metric].keys())
            found.append(f"{use.metric}: no label {', '.join(missing)}")
        for label, value in sorted(use.values):
            if value not in exported.get(use.metric, {}).get(label, ()):
                found.append(f'{use.metric}: no series with {label}="{value}"')
    return found


def dashboard_uses() -> list[Use]:
    board = dashboard()
    found = [use for expr in expressions(board) for use in uses(expr)]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            match = LABEL_VALUES.fullmatch(variable["definition"])
            assert match, variable["definition"]
            found.append(Use(match[1], frozenset({match[2]})))
    return found


def test_the_checker_finds_a_wrong_label_and_an_unknown_metric() -> None:
    exported = {"stowage_node_fullness": {"node": frozenset({"gpu-a"})}}
    assert problems(uses("max by (node) (stowage_node_fullness)"), exported) == []
    assert problems(uses("max by (nodes) (stowage_node_fullness)"), exported) == [
        "stowage_node_fullness: no label nodes"
    ]
    assert problems(uses('stowage_node_fullness{instance="x"}'), exported) == [
        "stowage_node_fullness: no label instance",
        'stowage_node_fullness: no series with instance="x"',
    ]
    assert problems(uses('stowage_node_fullness{node="gpu-b"}'), exported) == [
        'stowage_node_fullness: no series with node="gpu-b"'
    ]
    assert problems(uses("a / on (node) group_left (zone) stowage_node_fullness"), exported) == [
        "a: not exported",
        "stowage_node_fullness: no label zone",
    ]


def test_the_dashboard_covers_every_per_node_signal_and_the_colocation_and_eviction_counters():
    queried = {use.metric for use in dashboard_uses()}
    wanted = {metric for metric, _, _ in NODE_GAUGES} | {
        "stowage_node_psi_some_percent",
        "stowage_be_throttle_changes_total",
        "stowage_be_throttled_nodes",
        "stowage_evictions_total",
        "stowage_eviction_plans_total",
        "stowage_eviction_approvals_pending",
    }
    assert wanted <= queried, sorted(wanted - queried)


async def exercised(api: rig.RecordingKubeApi, start: Start) -> rig.Coordinator:
    """A coordinator that received two reports of gpu-a (8 A100s) in which its LS pod
    stalls: with a dwell of a microsecond the second throttles the node's best-effort pods.
    One report of cpu-b with CPU and memory stall (gpu-a's reports carry CPU PSI only).
    A pending high-priority pod that fits only where a low one runs: the leader's first
    eviction cycle plans its preemption (dry run)."""
    api.add_node(
        "gpu-a",
        capacity={"cpu": "224", "memory": "2Ti", "nvidia.com/gpu": "8"},
        labels={"nvidia.com/gpu.product": A100},
    )
    api.add_node("cpu-b", capacity={"cpu": "16", "memory": "64Gi"})
    api.add_namespace("ns")
    api.store.create(PODS, pod("low", node="gpu-a", gpus=8))
    api.store.create(PODS, pod("want", gpus=8, priority=10_000))
    base = rig.settings()
    quick = ColocationPool(tighten_after_s=1e-6)
    c = await start(
        dataclasses.replace(base, colocation=ColocationSettings(default=quick)), name="leader"
    )
    await rig.eventually(lambda: c.services.synced.is_set() and c.leading, "synced, leading")
    token = api.agent_token("gpu-a")
    for seq, stall in ((1, 45.0), (2, 47.5)):
        status, _ = await c.report(colocated("gpu-a", stall, seq=seq), token)
        assert status == 200
    psi = rig.node_report("cpu-b", free_2mib_b=rig.GIB, cpu_pressure_pct=5.0)
    assert (await c.report(psi, api.agent_token("cpu-b")))[0] == 200
    throttled = ("stowage_be_throttle_changes_total", {"change": "tightened"})
    dry_run = ("stowage_evictions_total", {"trigger": "preemption", "outcome": "dry-run"})
    await rig.eventually(lambda: c.metric(*throttled) == 1, "the throttle counted")
    planned = ("stowage_eviction_plans_total", {"trigger": "preemption", "decision": "dry-run"})
    await rig.eventually(lambda: c.metric(*dry_run) == 1, "the dry-run eviction counted")
    await rig.eventually(lambda: c.metric(*planned) == 1, "the dry-run plan counted")
    return c


async def test_every_metric_and_label_the_dashboard_queries_is_exported(
    api: rig.RecordingKubeApi, start: Start
) -> None:
    c = await exercised(api, start)
    samples = await c.scrape()
    exported: dict[str, dict[str, set[str]]] = {}
    for name, series in samples.items():
        labels = exported.setdefault(name, {})
        for pairs in series:
            for label, value in pairs:
                labels.setdefault(label, set()).add(value)
    assert samples["stowage_node_throttled"] == {
        (("node", "cpu-b"),): 0.0,
        (("node", "gpu-a"),): 1.0,
    }
    frozen = {n: {k: frozenset(v) for k, v in ls.items()} for n, ls in exported.items()}
    assert problems(dashboard_uses(), frozen) == []


@pytest.mark.parametrize(
    "panel", [p for p in panels(dashboard()) if p["type"] != "row"], ids=lambda p: p["title"]
)
def test_each_panel_has_a_title_a_place_and_a_prometheus_query(panel: Mapping[str, Any]) -> None:
    assert panel["title"] and panel["targets"]
    assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
    assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
