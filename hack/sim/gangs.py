"""Gang locality in the simulator: openb pods grouped into gangs, replayed with and
without the gang term, the gangs' spread and the GPU left unallocated compared.

    python -m hack.sim.gangs --policy fgd --seeds 42-44 --out gangs/

**Gangs** (the openb trace has none). In each seed's arrival sequence
(:func:`hack.sim.arrivals.build`: shuffled and inflated to 130 % of the cluster's GPUs),
the whole-GPU pods (``gpu_milli`` 1000) are grouped by shape (CPU, memory, GPUs, models
accepted) in arrival order: a pod joins the open gang of its shape, or opens one whose
size is drawn from :data:`GANG_SIZES` with the seed's own generator; a gang closes when
full (the last of a shape may stay short, and is a gang of the members it has). Each
gang's members then arrive one after another where its first member arrived, as Volcano
binds a gang's tasks within one session; every other pod keeps its place. Shared-GPU and
CPU-only pods are in no gang.

**Racks** (the trace names none): the node list in its own order (nodes of one model
together, as a cluster buys them) cut into racks of :data:`RACK_NODES` nodes, the
``example.com/rack`` label of :data:`RACK`.

**One engine**: every pod is placed on the node the policy scores highest (the node rank
breaking ties, as :mod:`hack.sim.replay`), a gang member's scores first given the gang
term by :mod:`coordinator.scoring.ganglocality` — the code prioritize runs — over where
its gang's members already are. ``weight`` 0 is the policy alone, on the same arrivals.

**Measured**: gang spread, the mean over gangs placed whole of the nodes and the racks
their members are on; and the GPU left unallocated (%) when the arrived GPU request is
100 % of the cluster's (the FGD paper's point, :func:`hack.sim.replay.events_at`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from coordinator.scoring import ganglocality, registry
from coordinator.scoring.base import Policy
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState, NodeSpec, Placement
from coordinator.state.podrequest import PodRequest
from hack.sim import arrivals, replay, trace
from hack.sim.main import parse_seeds

GANG_SIZES: Final = (2, 4, 8)
"""Members per gang, drawn uniformly: data-parallel jobs of 2 to 8 workers."""
RACK: Final = "example.com/rack"
RACK_NODES: Final = 8
"""Nodes per rack: eight 8-GPU servers, 64 GPUs, a rack's usual power budget."""
WEIGHT: Final = 2.0
"""The gang term's weight with it on: ``gang.weight``'s default."""


@dataclass(frozen=True, slots=True)
class Member:
    """A pod of the sequence and its gang (None: in none)."""

    pod: PodRequest
    gang: str | None = None
    size: int = 0


def with_gangs(sequence: Sequence[PodRequest], seed: int) -> list[Member]:
    """``sequence`` with its whole-GPU pods grouped into gangs (see the module)."""
    rng = np.random.default_rng([seed, 0x6A6E])  # not the arrivals' own stream
    open_gang: dict[tuple[object, ...], tuple[str, int, list[int]]] = {}
    gangs: list[tuple[str, int, list[int]]] = []
    for k, pod in enumerate(sequence):
        if not pod.gpus or pod.gpu_milli < MILLI_PER_GPU:
            continue
        shape = (pod.cpu_m, pod.mem_b, pod.gpus, pod.gpu_models)
        found = open_gang.get(shape)
        if found is None:
            size = int(GANG_SIZES[int(rng.integers(len(GANG_SIZES)))])
            found = open_gang[shape] = (f"gang-{len(gangs)}", size, [])
            gangs.append(found)
        found[2].append(k)
        if len(found[2]) == found[1]:
            del open_gang[shape]
    first_of: dict[int, tuple[str, list[int]]] = {}
    in_gang: set[int] = set()
    for name, _, members in gangs:
        first_of[members[0]] = (name, members)
        in_gang.update(members)
    out: list[Member] = []
    for k, pod in enumerate(sequence):
        if k in first_of:
            name, members = first_of[k]
            out += [Member(sequence[m], name, len(members)) for m in members]
        elif k not in in_gang:
            out.append(Member(pod))
    return out


def rack_domains(nodes: Sequence[NodeSpec]) -> ganglocality.Domains:
    """Racks of :data:`RACK_NODES` nodes in node-list order."""
    labels = [{RACK: f"rack-{i // RACK_NODES}"} for i in range(len(nodes))]
    return ganglocality.domains_of(labels, [RACK])


@dataclass(frozen=True, slots=True)
class Outcome:
    nodes_per_gang: float
    racks_per_gang: float
    gangs_whole: int
    """Gangs every member of which was placed."""
    unalloc_pct: float
    """GPU left unallocated at 100 % arrived (NaN: the arrivals never reach 100 %)."""


def run(
    nodes: Sequence[NodeSpec],
    sequence: arrivals.Arrivals,
    members: Sequence[Member],
    policy: Policy,
    weight: float,
) -> Outcome:
    """Place every member in order, each once (add-only, as :func:`hack.sim.replay.run`)."""
    state = ClusterState(nodes)
    engine = Engine(state, policy, sequence.rank)
    domains = rack_domains(nodes)
    where: dict[str, list[int]] = {}
    arrived = np.zeros(len(members), dtype=np.int64)
    used = np.zeros(len(members), dtype=np.int64)
    arrived_sum = used_sum = 0
    for k, member in enumerate(members):
        pod = member.pod
        arrived_sum += pod.gpu_total_milli
        placement = choose(engine, member, where, domains, weight)
        if placement is not None:
            engine.commit(pod, placement)
            used_sum += pod.gpu_total_milli
            if member.gang is not None:
                where.setdefault(member.gang, []).append(placement.node)
        policy.observe(state, pod, placement)
        arrived[k], used[k] = arrived_sum, used_sum
    state.check()
    total = state.gpu_total_milli
    at = replay.events_at(replay.x_of(arrived, total), 100)
    sizes = {m.gang: m.size for m in members if m.gang is not None}
    whole = [rows for gang, rows in where.items() if len(rows) == sizes[gang]]
    racks = domains.ids[0]
    return Outcome(
        nodes_per_gang=statistics.fmean(len(set(rows)) for rows in whole),
        racks_per_gang=statistics.fmean(len({int(racks[r]) for r in rows}) for rows in whole),
        gangs_whole=len(whole),
        unalloc_pct=float(100 - 100 * used[at].mean() / total) if len(at) else math.nan,
    )


def choose(
    engine: Engine,
    member: Member,
    where: dict[str, list[int]],
    domains: ganglocality.Domains,
    weight: float,
) -> Placement | None:
    """The node the policy scores highest for the member, its gang's term added (at
    ``weight``), the first in node rank among equals."""
    pod = member.pod
    feasible = engine.policy.admit(engine.state, pod, engine.feasible(pod))
    if not feasible.any():
        return None
    scores = engine.scores(pod, feasible)
    if member.gang is not None and weight:
        landed = np.array(where.get(member.gang, ()), dtype=np.int64)
        gang = ganglocality.Gang(member.gang, member.size, landed)
        term = ganglocality.locality(engine.state, pod, gang, domains).term
        scores = ganglocality.ranked(scores, term, weight)
    tied = np.flatnonzero(scores == np.nanmax(scores))
    i = int(tied[np.argmin(engine.rank[tied])])
    return Placement(i, engine.policy.devices(engine.state, i, pod))


def table(results: dict[tuple[int, float], Outcome], seeds: Sequence[int], policy: str) -> str:
    """Markdown: per seed and in the mean, without and with the term."""
    lines = [
        "| seed | policy | gang term | nodes per gang | racks per gang | gangs placed whole "
        "| unallocated GPU % at 100 % arrived |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for seed in [*seeds, None]:
        for weight in (0.0, WEIGHT):
            runs = seeds if seed is None else [seed]
            picked = [results[s, weight] for s in runs]
            lines.append(
                f"| {'mean' if seed is None else seed} | {policy} "
                f"| {'on (weight ' + format(weight, 'g') + ')' if weight else 'off'} "
                f"| {statistics.fmean(o.nodes_per_gang for o in picked):.2f} "
                f"| {statistics.fmean(o.racks_per_gang for o in picked):.2f} "
                f"| {statistics.fmean(o.gangs_whole for o in picked):.0f} "
                f"| {statistics.fmean(o.unalloc_pct for o in picked):.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hack.sim.gangs", description=__doc__)
    parser.add_argument("--nodes", type=Path, default=trace.DEFAULT_NODES)
    parser.add_argument("--pods", type=Path, default=trace.DEFAULT_PODS)
    parser.add_argument("--policy", default="fgd", help="a policy by name (default fgd)")
    parser.add_argument("--seeds", default="42-44", help="seeds: 42-44, or 42,43,50")
    parser.add_argument("--out", type=Path, help="write summary.md here too")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
        nodes, pods = trace.load_nodes(args.nodes), trace.load_pods(args.pods)
        registry.build_policy(args.policy)
    except (ValueError, OSError) as e:  # ConfigError and TraceError are ValueErrors
        print(f"python -m hack.sim.gangs: error: {e}", file=sys.stderr)
        return 2
    results: dict[tuple[int, float], Outcome] = {}
    for seed in seeds:
        sequence = arrivals.build(pods, nodes, seed)
        members = with_gangs(sequence.pods, seed)
        for weight in (0.0, WEIGHT):
            policy = registry.build_policy(args.policy, context=registry.PolicyContext(pods, seed))
            results[seed, weight] = run(nodes, sequence, members, policy, weight)
    command = f"python -m hack.sim.gangs --policy {args.policy} --seeds {args.seeds}"
    text = f"`{command}`\n\n" + table(results, seeds, args.policy)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
