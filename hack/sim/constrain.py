"""Make a GPU-model-constrained variant of a pod list, with constraints of a chosen structure.

    python -m hack.sim.constrain IN.csv OUT.csv --share 0.33 --seed 7 \
        [--family concentrated] [--param zipf=1.5 ...] [--nodes NODES.csv]

The shared openb pod lists leave ``gpu_spec`` empty, but in production about a third of
the GPU tasks name the GPU models they accept (the upstream trace's README says 33 %).
This writes a copy of ``IN.csv`` in which ``round(share × GPU pods)`` of the GPU pods get a
``gpu_spec`` (models joined by ``|`` in name order). Pods that already carry one keep it
and count towards the share; CPU-only pods are left alone. A spec only ever names models
with a node that could host the pod when empty (enough GPUs, CPU and memory on one node),
so every constraint can be met.

Real constraints are not random, and a policy judged on one structure can learn the wrong
thing, so the structure is a *family* (``--family``), each with parameters (``--param
KEY=VALUE``):

- ``uniform``: pods drawn evenly; one model, or with chance ``pairs`` two, drawn by each
  model's GPU count (the pools' sizes).
- ``concentrated``: pods drawn evenly; one model each, Zipf (exponent ``zipf``) over a rank
  of models — by pod count, not pool size, so a small pool can be the most asked for. The
  rank is ``order`` (comma list) or, if empty, a random order per seed of the models with at
  least ``min_pool`` of the cluster's GPUs.
- ``small-pool``: pods drawn evenly; the pools in ``pools`` (in a random order per seed)
  are filled one after another with constrained demand up to ``overload`` × their GPUs, the
  rest go to the other models by pool size — demand a small pool cannot hold.
- ``alternatives``: pods drawn evenly; each names one of the ``groups`` of similar cards
  (``;``-separated, models ``|``-separated), drawn evenly, cut to the models that can host it.
- ``size-correlated``: pods drawn with weight (GPUs requested)^``bias``; a whole-GPU pod
  names one model with nodes of at least ``big`` GPUs (drawn evenly), a shared-GPU pod one
  model without (by pool size).
- ``mixed``: pods drawn evenly, each given the structure of one of the families above (its
  default parameters), drawn evenly.

Every other column and row is copied unchanged (a missing ``gpu_spec`` column is added
after ``gpu_milli``). The node list defaults to ``openb_node_list_gpu_node.csv`` next to
``IN.csv``. The same input, family, parameters and seed always give the same file. Exit
status 2 with one line on stderr when an input or a parameter is unusable.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from common.errors import ConfigError
from coordinator.state.cluster import MILLI_PER_GPU, NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import trace
from hack.sim.trace import TraceError

DEFAULT_NODES: Final = "openb_node_list_gpu_node.csv"

Params = Mapping[str, float | str]
Rng = np.random.Generator


def hosting_models(pod: PodRequest, nodes: Sequence[NodeSpec]) -> set[str]:
    """GPU models with a node that could run ``pod`` when empty."""
    return {
        n.gpu_model
        for n in nodes
        if n.gpu_model and n.gpus >= pod.gpus and n.cpu_m >= pod.cpu_m and n.mem_b >= pod.mem_b
    }


@dataclass(frozen=True, slots=True)
class Cluster:
    """What the families read of the pods and nodes."""

    pods: Sequence[PodRequest]
    hosts: Mapping[int, list[str]]
    """Row of each GPU pod without a spec that some model can host → those models, sorted."""
    gpus_of: Mapping[str, int]
    """GPUs per model."""
    widest: Mapping[str, int]
    """Most GPUs on one node, per model."""

    @classmethod
    def of(cls, pods: Sequence[PodRequest], nodes: Sequence[NodeSpec]) -> Cluster:
        gpus_of: Counter[str] = Counter()
        widest: dict[str, int] = {}
        for n in nodes:
            if n.gpu_model:
                gpus_of[n.gpu_model] += n.gpus
                widest[n.gpu_model] = max(widest.get(n.gpu_model, 0), n.gpus)
        by_size: dict[tuple[int, int, int], list[str]] = {}
        hosts = {}
        for i, p in enumerate(pods):
            if p.gpus and not p.gpu_models:
                size = (p.gpus, p.cpu_m, p.mem_b)
                if size not in by_size:
                    by_size[size] = sorted(hosting_models(p, nodes))
                if by_size[size]:
                    hosts[i] = by_size[size]
        return cls(pods, hosts, gpus_of, widest)

    def models(self, text: str) -> list[str]:
        """The models of a ``|`` or ``,`` separated list that the node list has (the
        defaults name the openb models; another cluster may lack some)."""
        return [m for m in _names(text) if m in self.gpus_of]

    def check_models(self, text: str, key: str) -> None:
        """Refuse a list given by the user that names a model no node has."""
        unknown = [m for m in _names(text) if m not in self.gpus_of]
        if unknown:
            raise ConfigError(f"{key}: no node has GPU model {unknown[0]!r}")


def _names(text: str) -> list[str]:
    return [m for m in text.replace("|", ",").replace(";", ",").split(",") if m]


Select = Callable[[Rng, Cluster, int, Params], list[int]]
Assign = Callable[[Rng, Cluster, list[int], Params], dict[int, str]]


@dataclass(frozen=True, slots=True)
class Family:
    """One structure of constraints: which pods get one, and what it names."""

    defaults: Params
    select: Select
    assign: Assign
    check: Callable[[Params], None] = lambda params: None


# ------------------------------------------------------------------ shared draws


def _evenly(rng: Rng, cluster: Cluster, wanted: int, params: Params) -> list[int]:
    """``wanted`` of the open GPU pods, each as likely as any other."""
    chosen = rng.choice(list(cluster.hosts), size=wanted, replace=False)
    return sorted(int(c) for c in chosen)


def _by_pool_size(rng: Rng, cluster: Cluster, models: Sequence[str], pairs: float = 0.0) -> str:
    """One model (two with chance ``pairs``) of ``models``, weighted by GPU count."""
    weights = np.array([cluster.gpus_of[m] for m in models], dtype=float)
    count = 2 if len(models) > 1 and rng.random() < pairs else 1
    picked = rng.choice(len(models), size=count, replace=False, p=weights / weights.sum())
    return "|".join(sorted(models[int(k)] for k in picked))


def _fraction(key: str, value: float) -> None:
    if not 0 <= value <= 1:
        raise ConfigError(f"{key} {value:g}: expected a fraction in [0, 1]")


def _at_least(key: str, value: float, low: float) -> None:
    if not value >= low:
        raise ConfigError(f"{key} {value:g}: expected a number >= {low:g}")


# ---------------------------------------------------------------------- families


def _uniform(rng: Rng, cluster: Cluster, chosen: list[int], params: Params) -> dict[int, str]:
    pairs = float(params["pairs"])
    return {i: _by_pool_size(rng, cluster, cluster.hosts[i], pairs) for i in chosen}


def _concentrated(rng: Rng, cluster: Cluster, chosen: list[int], params: Params) -> dict[int, str]:
    rank = cluster.models(str(params["order"]))
    if not rank:
        total = sum(cluster.gpus_of.values())
        big = sorted(
            m for m, g in cluster.gpus_of.items() if g >= float(params["min_pool"]) * total
        )
        rank = [big[int(k)] for k in rng.permutation(len(big))]
    weight = {m: 1.0 / (r + 1) ** float(params["zipf"]) for r, m in enumerate(rank)}
    specs = {}
    for i in chosen:
        ranked = [m for m in cluster.hosts[i] if m in weight]
        if not ranked:  # no ranked model can host it: as uniform would
            specs[i] = _by_pool_size(rng, cluster, cluster.hosts[i])
            continue
        w = np.array([weight[m] for m in ranked])
        specs[i] = ranked[int(rng.choice(len(ranked), p=w / w.sum()))]
    return specs


def _small_pool(rng: Rng, cluster: Cluster, chosen: list[int], params: Params) -> dict[int, str]:
    pools = cluster.models(str(params["pools"]))
    pools = [pools[int(k)] for k in rng.permutation(len(pools))]
    room = {m: float(params["overload"]) * cluster.gpus_of[m] * MILLI_PER_GPU for m in pools}
    specs = {}
    for i in (chosen[int(k)] for k in rng.permutation(len(chosen))):
        demand = cluster.pods[i].gpu_total_milli
        models = cluster.hosts[i]
        pool = next((m for m in pools if m in models and demand <= room[m]), None)
        if pool is not None:
            room[pool] -= demand
            specs[i] = pool
        else:
            others = [m for m in models if m not in room] or models
            specs[i] = _by_pool_size(rng, cluster, others)
    return dict(sorted(specs.items()))


def _alternatives(rng: Rng, cluster: Cluster, chosen: list[int], params: Params) -> dict[int, str]:
    groups = [cluster.models(g) for g in str(params["groups"]).split(";")]
    specs = {}
    for i in chosen:
        cut = [[m for m in g if m in cluster.hosts[i]] for g in groups]
        usable = [c for c in cut if len(c) >= 2] or [c for c in cut if c]
        if usable:
            specs[i] = "|".join(sorted(usable[int(rng.integers(len(usable)))]))
        else:
            specs[i] = _by_pool_size(rng, cluster, cluster.hosts[i])
    return specs


def _by_size(rng: Rng, cluster: Cluster, wanted: int, params: Params) -> list[int]:
    """Pods drawn with weight (GPUs requested)^bias: larger pods are constrained more often."""
    rows = list(cluster.hosts)
    w = np.array([cluster.pods[i].gpu_total_milli / MILLI_PER_GPU for i in rows])
    w **= float(params["bias"])
    chosen = rng.choice(rows, size=wanted, replace=False, p=w / w.sum())
    return sorted(int(c) for c in chosen)


def _size_correlated(
    rng: Rng, cluster: Cluster, chosen: list[int], params: Params
) -> dict[int, str]:
    big = {m for m, g in cluster.widest.items() if g >= float(params["big"])}
    specs = {}
    for i in chosen:
        pod, models = cluster.pods[i], cluster.hosts[i]
        side = [m for m in models if (m in big) != pod.sharing]
        if pod.sharing or not side:
            specs[i] = _by_pool_size(rng, cluster, side or models)
        else:
            specs[i] = side[int(rng.integers(len(side)))]
    return specs


def _mixed(rng: Rng, cluster: Cluster, chosen: list[int], params: Params) -> dict[int, str]:
    parts = [name for name in FAMILIES if name != "mixed"]
    each = rng.integers(len(parts), size=len(chosen))
    specs: dict[int, str] = {}
    for k, name in enumerate(parts):
        family = FAMILIES[name]
        subset = [i for i, e in zip(chosen, each, strict=True) if e == k]
        specs.update(family.assign(rng, cluster, subset, family.defaults))
    return dict(sorted(specs.items()))


def _check_uniform(p: Params) -> None:
    _fraction("pairs", float(p["pairs"]))


def _check_concentrated(p: Params) -> None:
    _at_least("zipf", float(p["zipf"]), 0)
    _fraction("min_pool", float(p["min_pool"]))


def _check_small_pool(p: Params) -> None:
    _at_least("overload", float(p["overload"]), 0)
    if not _names(str(p["pools"])):
        raise ConfigError("pools: expected at least one GPU model")


def _check_alternatives(p: Params) -> None:
    if not _names(str(p["groups"])):
        raise ConfigError("groups: expected at least one group of GPU models")


def _check_size_correlated(p: Params) -> None:
    _at_least("bias", float(p["bias"]), 0)
    _at_least("big", float(p["big"]), 1)


FAMILIES: Final[dict[str, Family]] = {
    "uniform": Family({"pairs": 0.5}, _evenly, _uniform, _check_uniform),
    "concentrated": Family(
        {"zipf": 1.5, "order": "", "min_pool": 0.02}, _evenly, _concentrated, _check_concentrated
    ),
    "small-pool": Family(
        {"pools": "P100,T4,V100M16,V100M32", "overload": 2.0},
        _evenly,
        _small_pool,
        _check_small_pool,
    ),
    "alternatives": Family(
        {"groups": "V100M16|V100M32;P100|T4|V100M16|V100M32;P100|T4;G2|G3"},
        _evenly,
        _alternatives,
        _check_alternatives,
    ),
    "size-correlated": Family(
        {"bias": 1.0, "big": 8}, _by_size, _size_correlated, _check_size_correlated
    ),
    "mixed": Family({}, _evenly, _mixed),
}
"""Each family by name (``--family``), with its default parameters."""


def family_params(name: str, given: Mapping[str, float | str]) -> dict[str, float | str]:
    """The family's defaults overridden by ``given`` (strings from the command line are
    read as the default's type); an unknown family or parameter is a :class:`ConfigError`."""
    family = FAMILIES.get(name)
    if family is None:
        raise ConfigError(f"--family {name}: unknown; known: {', '.join(FAMILIES)}")
    params = dict(family.defaults)
    for key, value in given.items():
        if key not in params:
            known = ", ".join(family.defaults) or "none"
            raise ConfigError(f"--param {key}: family {name} has no such parameter; known: {known}")
        if isinstance(params[key], str):
            params[key] = str(value)
            continue
        try:
            params[key] = float(value)
        except ValueError:
            raise ConfigError(f"--param {key}={value}: expected a number") from None
    return params


def choose_specs(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeSpec],
    share: float,
    seed: int,
    *,
    family: str = "uniform",
    **params: float | str,
) -> dict[int, str]:
    """Row index → new ``gpu_spec`` for the pods to constrain."""
    _fraction("--share", share)
    chosen_params = family_params(family, params)
    cluster = Cluster.of(pods, nodes)
    FAMILIES[family].check(chosen_params)
    for key, value in params.items():
        if isinstance(chosen_params[key], str):
            cluster.check_models(str(value), key)
    gpu_pods = sum(1 for p in pods if p.gpus)
    wanted = round(share * gpu_pods) - sum(1 for p in pods if p.gpus and p.gpu_models)
    if wanted > len(cluster.hosts):
        raise ConfigError(
            f"--share {share}: {wanted} pods to constrain, only {len(cluster.hosts)} GPU pods "
            "without a gpu_spec fit a node of some model"
        )
    rng = np.random.default_rng(seed)
    chosen = FAMILIES[family].select(rng, cluster, max(wanted, 0), chosen_params)
    return FAMILIES[family].assign(rng, cluster, chosen, chosen_params)


def write_constrained(src: Path, dst: Path, specs: dict[int, str]) -> None:
    """Copy ``src`` to ``dst`` with ``gpu_spec`` of row ``i`` (0-based data row) replaced."""
    with src.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        columns = list(reader.fieldnames or [])
        rows = list(reader)
    if "gpu_spec" not in columns:
        columns.insert(columns.index("gpu_milli") + 1, "gpu_spec")
    for i, spec in specs.items():
        rows[i]["gpu_spec"] = spec
    with dst.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def parse_params(texts: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings → a mapping; a malformed or repeated one is a ConfigError."""
    params: dict[str, str] = {}
    for text in texts:
        key, sep, value = (part.strip() for part in text.partition("="))
        if not sep or not key:
            raise ConfigError(f"--param {text!r}: expected KEY=VALUE")
        if key in params:
            raise ConfigError(f"--param {key}: given twice")
        params[key] = value
    return params


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hack.sim.constrain",
        description="Copy a pod list, giving a share of its GPU pods a gpu_spec.",
    )
    parser.add_argument("src", type=Path, metavar="IN.csv", help="pod list to copy")
    parser.add_argument("dst", type=Path, metavar="OUT.csv", help="where to write the copy")
    parser.add_argument("--share", type=float, default=0.33, help="share of GPU pods to constrain")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws")
    parser.add_argument(
        "--family", default="uniform", help=f"structure of the constraints: {', '.join(FAMILIES)}"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the family (repeatable)",
    )
    parser.add_argument("--nodes", type=Path, help=f"node list (default: {DEFAULT_NODES} by IN)")
    args = parser.parse_args(argv)
    nodes_path = args.nodes or args.src.parent / DEFAULT_NODES
    try:
        if args.seed < 0:
            raise ConfigError(f"--seed {args.seed}: expected a number >= 0")
        given = parse_params(args.param)
        family_params(args.family, given)  # before reading any file
        if args.dst.resolve() == args.src.resolve():
            raise ConfigError(f"{args.dst}: would overwrite the input")
        pods = trace.load_pods(args.src)
        nodes = trace.load_nodes(nodes_path)
        if not any(n.gpus and n.gpu_model for n in nodes):
            raise TraceError(f"{nodes_path}: no node has a GPU with a model name")
        specs = choose_specs(pods, nodes, args.share, args.seed, family=args.family, **given)
        write_constrained(args.src, args.dst, specs)
    except (ConfigError, TraceError, OSError) as e:
        print(f"constrain: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
