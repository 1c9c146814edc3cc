"""``stowage sim``: replay node and pod lists under several policies and seeds.

    stowage sim --nodes nodes.csv --pods pods.csv \\
                --policies fgd,stowage,fgd+reserve-gpu-cpu,stowage:reserve_gpu_cpu=true \\
                --policy-arg stowage.coverage=0.9 --admission reserve-gpu-cpu \\
                --seeds 42-51 --out results/

A policy entry is ``NAME[+RULE…][:KEY=VALUE…]``: a policy, admission rules it applies on
top (:mod:`coordinator.scoring.admission`) and its arguments (YAML scalars), so one run
compares a policy with itself under other arguments or rules; the whole entry labels its
results. ``--policy-arg POLICY.KEY=VALUE`` gives an argument to every entry of that policy
(an entry that sets the key itself is an error); ``--admission RULE`` applies a rule to
every entry.

Runs (workload × entry × seed) go to parallel processes; one progress bar counts the pods
they have decided. Writes ``results.csv`` (one row per workload, policy, seed and
arrived-workload point), ``summary.md`` (unallocated GPU at 100 % and 130 % arrived with
the limit no add-only policy can beat, ratios only between entries with the same admission
rules and each with what the rules cost in CPU-only pods — also printed) and
``unallocated.png``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from common.errors import ConfigError
from coordinator.scoring import admission, registry
from coordinator.scoring.base import Policy
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from hack.sim import arrivals, replay, report, trace
from hack.sim.trace import TraceError

MAX_SEEDS = 10_000
"""More runs than anyone waits for; a range of billions would exhaust memory listing it."""


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not _digits(lo) or (sep and not _digits(hi)):
            raise ConfigError(f"--seeds {text!r}: expected numbers and ranges like 42-51")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ConfigError(f"--seeds {text!r}: range {part.strip()} is backwards")
        if len(seeds) + last - first >= MAX_SEEDS:
            raise ConfigError(f"--seeds {text!r}: at most {MAX_SEEDS} seeds")
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {text!r}: a seed is listed twice")
    return seeds


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _yaml_scalar(value: str, where: str) -> Any:
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}: not a YAML value") from e


@dataclass(frozen=True, slots=True)
class Entry:
    """One policy column of a run: the policy, its arguments and the admission rules put
    on it; ``label`` (the entry as written) names its rows."""

    label: str
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    admission: tuple[str, ...] = ()

    def build(self, context: registry.PolicyContext | None = None) -> Policy:
        policy = registry.build_policy(self.name, dict(self.args), context)
        return admission.with_rules(policy, self.admission)


def parse_entry(
    text: str,
    policy_args: Mapping[str, Mapping[str, Any]] | None = None,
    rules: Sequence[str] = (),
) -> Entry:
    """``NAME[+RULE…][:KEY=VALUE…]`` → an :class:`Entry`, with the ``--policy-arg``
    arguments of its policy and the ``--admission`` rules added; the registry then checks
    names and arguments strictly."""
    label = text.strip()
    head, *pairs = (part.strip() for part in label.split(":"))
    name, *own_rules = (part.strip() for part in head.split("+"))
    if not name or not all(own_rules):
        raise ConfigError(f"--policies {label!r}: expected NAME[+RULE…][:KEY=VALUE…]")
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not key or not value:
            raise ConfigError(f"--policies {label!r}: expected NAME:KEY=VALUE, got {pair!r}")
        if key in args:
            raise ConfigError(f"--policies {label!r}: argument {key!r} is given twice")
        args[key] = _yaml_scalar(value, f"--policies {label!r}: {key}")
    for key, value in (policy_args or {}).get(name, {}).items():
        if key in args:
            raise ConfigError(f"--policy-arg {name}.{key}: the entry {label!r} sets {key} itself")
        args[key] = value
    return Entry(label, name, args, tuple(dict.fromkeys([*own_rules, *rules])))


def parse_policy_args(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``POLICY.KEY=VALUE`` items → policy → {key: value}."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, value = (part.strip() for part in item.partition("="))
        policy, dot, key = (part.strip() for part in target.partition("."))
        if not sep or not dot or not policy or not key or not value:
            raise ConfigError(f"--policy-arg {item!r}: expected POLICY.KEY=VALUE")
        if key in out.setdefault(policy, {}):
            raise ConfigError(f"--policy-arg {item!r}: {policy}.{key} is given twice")
        out[policy][key] = _yaml_scalar(value, f"--policy-arg {item!r}")
    return out


def parse_entries(
    policies: str, policy_args: Iterable[str] = (), rules: Iterable[str] = ()
) -> list[Entry]:
    """The ``--policies`` list with ``--policy-arg`` and ``--admission`` applied; every
    policy built once, so an unknown name, argument or rule fails before any work."""
    by_policy = parse_policy_args(policy_args)
    names = [r.strip() for item in rules for r in item.split(",") if r.strip()]
    labels = [p.strip() for p in policies.split(",") if p.strip()]
    if not labels:
        raise ConfigError("--policies is empty")
    if len(set(labels)) != len(labels):
        raise ConfigError(f"--policies {policies!r}: a policy is listed twice")
    entries = [parse_entry(label, by_policy, names) for label in labels]
    for policy in by_policy:
        if all(e.name != policy for e in entries):
            raise ConfigError(f"--policy-arg {policy}.…: no --policies entry is {policy!r}")
    for entry in entries:
        entry.build()
    return entries


def workload_name(path: Path) -> str:
    return path.stem.removeprefix("openb_pod_list_")


@cache
def _nodes(path: Path) -> list[Any]:
    return trace.load_nodes(path)


@cache
def _pods(path: Path) -> list[Any]:
    return trace.load_pods(path)


@cache
def _measure(path: Path) -> Fragmentation:
    return Fragmentation(typical_shapes(_pods(path)))


@cache
def _arrivals(nodes: Path, pods: Path, seed: int) -> arrivals.Arrivals:
    return arrivals.build(_pods(pods), _nodes(nodes), seed)


@dataclass(frozen=True, slots=True)
class Run:
    """One replay: a workload (``pods`` labelled ``workload``) under one entry and seed."""

    nodes: Path
    pods: Path
    workload: str
    entry: Entry
    seed: int

    @property
    def arrivals(self) -> int:
        """Pods it replays."""
        return len(_arrivals(self.nodes, self.pods, self.seed).pods)


_progress_queue: Any = None
"""In a worker process: where :func:`simulate` reports pods decided."""
_progress_here = threading.local()
"""On a Dask worker, per thread (a worker may run several calls at once): the queue of the
sweep whose call the thread is running (:mod:`hack.sim.dasksweep`)."""


def _start_worker(progress: Any) -> None:
    global _progress_queue
    _progress_queue = progress


def _report_progress(pods: int) -> None:
    queue = getattr(_progress_here, "queue", None) or _progress_queue
    if queue is not None:
        queue.put(pods)


def simulate(run: Run) -> tuple[list[dict[str, Any]], float]:
    """One run in a worker process: its binned rows and pods scheduled per second."""
    node_specs = _nodes(run.nodes)
    built = run.entry.build(registry.PolicyContext(_pods(run.pods), run.seed))
    sequence = _arrivals(run.nodes, run.pods, run.seed)
    events = replay.run(node_specs, sequence, built, _measure(run.pods), progress=_report_progress)
    total = sum(n.gpus for n in node_specs) * 1000
    meta = {"workload": run.workload, "policy": run.entry.label, "seed": run.seed}
    rows = [{**meta, **row} for row in replay.binned(events, total)]
    return rows, len(sequence.pods) / events.seconds


def limit(nodes: Path, pods: Path, seed: int) -> float | None:
    """The limit at x = 100 of one workload's arrival sequence for one seed."""
    from hack.sim import bound  # scipy loads only where the limit is asked for

    return bound.limit(_nodes(nodes), _arrivals(nodes, pods, seed).pods)


def run_in_pool(
    calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]],
    jobs: int,
    total_pods: int,
    show: bool | None,
) -> tuple[list[Any], int]:
    """Each ``fn(*args)`` in ``jobs`` processes, results in order, and the pods the
    workers reported deciding; one bar counts them against ``total_pods`` (``show``
    None: only on a terminal)."""
    reports: Any = multiprocessing.get_context().Queue()
    counted = 0
    with (
        _bar(total_pods, show) as bar,
        ProcessPoolExecutor(max(1, jobs), initializer=_start_worker, initargs=(reports,)) as pool,
    ):
        futures: list[Future[Any]] = [pool.submit(fn, *args) for fn, args in calls]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            counted += _drain(reports, bar)
        results = [f.result() for f in futures]
        pool.shutdown()  # the workers have exited, their reports are all in the queue
        counted += _drain(reports, bar)
    return results, counted


def _drain(reports: Any, bar: Any) -> int:
    got = 0
    while True:
        try:
            got += reports.get_nowait()
        except queue.Empty:
            bar.update(got)
            return got


def _bar(total: int, show: bool | None) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(
        total=total, unit="pod", file=sys.stderr, disable=None if show is None else not show
    )


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def main(args: argparse.Namespace) -> int:
    args.pods = args.pods or [trace.DEFAULT_PODS]
    try:
        entries = parse_entries(args.policies, args.policy_arg or (), args.admission or ())
        seeds = parse_seeds(args.seeds)
        if not sum(n.gpus for n in _nodes(args.nodes)):
            raise TraceError(f"{args.nodes}: no node has a GPU")
        names = [workload_name(p) for p in args.pods]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"--pods: two pod lists give the workload name {twice[0]!r}")
        for pods in args.pods:
            _pods(pods)
        if not args.no_limit:
            _need_scipy()
        if args.scheduler is not None:
            _check_scheduler(args.scheduler)
        args.out.mkdir(parents=True, exist_ok=True)
    except (ConfigError, TraceError, OSError) as e:
        print(f"stowage sim: error: {e}", file=sys.stderr)
        return 2
    workloads = [(workload_name(p), p) for p in args.pods]
    runs = [Run(args.nodes, p, w, e, s) for w, p in workloads for e in entries for s in seeds]
    try:
        outcome = execute(
            runs, args.jobs, args.progress, limits=not args.no_limit, scheduler=args.scheduler
        )
    except ConfigError as e:  # a --scheduler address with no Dask scheduler behind it
        print(f"stowage sim: error: {e}", file=sys.stderr)
        return 2
    report.write_csv(args.out / "results.csv", outcome.rows)
    text = report.summary(
        outcome.rows,
        [report.Column(e.label, e.name, admission.in_force(e.build())) for e in entries],
        [w for w, _ in workloads],
        None if args.no_limit else outcome.limits,
        args.policy_arg or (),
    )
    text += report.speed(outcome.speed)
    (args.out / "summary.md").write_text(text)
    print(text)
    if not args.no_plot:
        report.plot(args.out / "unallocated.png", outcome.rows, [w for w, _ in workloads])
    return 0


def _need_scipy() -> None:
    try:
        import scipy  # noqa: F401
    except ImportError as e:
        raise ConfigError("the limit needs scipy (pip install '.[sim]'); or pass --no-limit") from e


def _check_scheduler(address: str) -> None:
    """Dask is installed and ``address`` is ``local`` or one it can dial."""
    try:
        from distributed.comm import parse_address
        from distributed.comm.registry import get_backend
    except ImportError as e:
        raise ConfigError("--scheduler needs Dask (pip install '.[sim]')") from e
    if address != "local":
        try:
            get_backend(parse_address(address, strict=True)[0])
        except ValueError as e:
            raise ConfigError(f"--scheduler {address!r}: {e}") from e


@dataclass
class Outcome:
    rows: list[dict[str, Any]]
    speed: dict[str, list[float]]
    """Entry label → pods/s of each of its runs."""
    limits: dict[str, list[float]]
    """Workload → the limit at x = 100 for each seed."""
    pods: int
    """Pods the workers reported deciding (every run's arrivals)."""


def execute(
    runs: Sequence[Run],
    jobs: int,
    show: bool | None,
    limits: bool = True,
    scheduler: str | None = None,
) -> Outcome:
    """Every run, and the limit of every (workload, seed) they cover, in parallel: in
    ``jobs`` local processes, or on the Dask cluster at ``scheduler`` (``local``: a
    ``LocalCluster`` of ``jobs`` workers). Each call is deterministic in its arguments and
    results are kept in call order, so every way gives the rows and limits a serial run
    gives."""
    sequences = sorted({(r.nodes, r.pods, r.workload, r.seed) for r in runs}, key=str)
    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [(simulate, (r,)) for r in runs]
    if limits:
        calls += [(limit, (nodes, pods, seed)) for nodes, pods, _, seed in sequences]
    total = sum(r.arrivals for r in runs)
    if scheduler is None:
        results, counted = run_in_pool(calls, jobs, total, show)
    else:
        from hack.sim import dasksweep  # Dask loads only for a sweep on it

        results, counted = dasksweep.run(calls, scheduler, jobs, total, show)
    outcome = Outcome([], {}, {}, counted)
    labels = list(dict.fromkeys(r.entry.label for r in runs))
    for run, (rows, pods_per_s) in zip(runs, results, strict=False):
        outcome.rows.extend(rows)
        outcome.speed.setdefault(run.entry.label, []).append(pods_per_s)
    for (_, _, workload, _), value in zip(sequences, results[len(runs) :], strict=False):
        if value is not None:  # None: no event at x = 100 in that sequence
            outcome.limits.setdefault(workload, []).append(value)
    outcome.rows.sort(key=lambda r: (r["workload"], labels.index(r["policy"]), r["seed"], r["x"]))
    return outcome
