"""No use of the trace's future: replaying the first K arrivals of a sequence gives the
same first K decisions as replaying all of it, for fgd and for stowage with and without
the admission rule (whose ρ is learnt online); and the limit's module, which reads every
arrival by x = 100 at once, never reaches a policy."""

from __future__ import annotations

import subprocess
import sys
from functools import cache

import pytest

from coordinator.scoring import registry
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from hack.sim import arrivals, bound, replay, trace
from hack.sim.main import parse_entry
from tests.sim.simfiles import OPENB, REPO, need

NODES = 200
"""A slice of the openb cluster (~1,000 GPUs): the whole trace's behaviour, small runs."""


@cache
def small_run():
    nodes = trace.load_nodes(need(OPENB / "openb_node_list_gpu_node.csv"))[:NODES]
    pods = trace.load_pods(need(OPENB / "openb_pod_list_default.csv"))
    return nodes, pods, arrivals.build(pods, nodes, 42), Fragmentation(typical_shapes(pods))


def decisions(entry: str, k: int | None, context_pods=None):
    nodes, pods, sequence, measure = small_run()
    prefix = arrivals.Arrivals(sequence.pods[:k], sequence.rank)
    context = registry.PolicyContext(pods if context_pods is None else context_pods, 42)
    events = replay.run(nodes, prefix, parse_entry(entry).build(context), measure, True)
    return [(p.node, p.devices) if p else None for p in events.placements]


@pytest.mark.parametrize(
    "entry", ["fgd", "stowage", "stowage:reserve_gpu_cpu=true", "fgd+reserve-gpu-cpu"]
)
def test_a_truncated_sequence_decides_its_pods_as_the_full_one(entry):
    full = decisions(entry, None)
    k = len(full) // 2
    assert len(full) > 1_000
    assert decisions(entry, k) == full[:k]
    assert sum(d is None for d in full[:k]) < sum(d is None for d in full)  # later pods fail


def test_stowage_needs_no_workload_at_all():
    """stowage learns the workload from the pods it is told of; FGD's M is the trace's
    shapes by design (the published baseline), so only stowage is checked this way."""
    full = decisions("stowage:reserve_gpu_cpu=true", None)
    assert decisions("stowage:reserve_gpu_cpu=true", None, context_pods=()) == full


def test_the_limit_is_below_fgd_and_stowage_on_a_real_run():
    nodes, _, sequence, _ = small_run()
    total = sum(n.gpus for n in nodes) * 1000
    limit = bound.limit(nodes, sequence.pods)
    for entry in ("fgd", "stowage", "stowage:reserve_gpu_cpu=true"):
        nodes, pods, sequence, measure = small_run()
        built = parse_entry(entry).build(registry.PolicyContext(pods, 42))
        rows = replay.binned(replay.run(nodes, sequence, built, measure), total)
        u100 = next(r["unalloc_pct"] for r in rows if r["x"] == 100)
        assert 0 < limit <= u100, entry


def test_no_policy_imports_the_limit_or_scipy():
    code = (
        "import sys\n"
        "from coordinator.scoring import admission, registry\n"
        "for name in registry.POLICIES:\n"
        "    admission.with_rules(registry.build_policy(name), ['reserve-gpu-cpu'])\n"
        "import hack.sim.main, hack.sim.replay\n"
        "leaked = [m for m in ('hack.sim.bound', 'scipy') if m in sys.modules]\n"
        "print(leaked)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]"
