"""``make run``: Stowage placing a real trace's pods, side by side with kube-scheduler's
default scoring, on this machine alone.

Starts the Kubernetes API emulator holding a sample of the openb trace's GPU nodes (the
mix of GPU models kept) and this machine, the coordinator against it, and this machine's
agent reporting to it. Then replays the trace's pods, shuffled by the seed, until they
ask for 130 % of the sample's GPUs: each is created through the API, filtered and
prioritized by the coordinator's extender exactly as kube-scheduler calls it, scored as
kube-scheduler combines its own plugins with the extender, and bound through the API.
The same pods are then placed in process by kube-scheduler's default scoring alone. It
prints both clusters side by side (nodes and GPUs used, pods pending, GPU fragmentation,
unallocated GPU), what the coordinator decided about throttling and evictions, writes a
plot of unallocated GPU against GPU arrived, and stops — or, with ``--keep``, stays up
(scheduling pods created with ``kubectl``) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from common.clock import Clock, SystemClock
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.demo import pending, summary
from hack.demo.httpjson import DemoError, JsonClient
from hack.demo.schedcache import SchedulerCache
from hack.demo.scheduler import DefaultScoring, WithExtender
from hack.demo.stack import Refused, running
from hack.demo.summary import Tally
from hack.demo.workload import pod_object, sample_nodes
from hack.sim import arrivals, trace
from hack.sim.trace import TraceError
from hack.thismachine import this_machine

TRACE: Final = trace.OPENB
NODE_FILE: Final = trace.OPENB_GPU_NODES
POD_FILE: Final = "openb_pod_list_default.csv"
NODE_LIST: Final = TRACE / NODE_FILE
POD_LIST: Final = TRACE / POD_FILE
ARRIVED_PCT: Final = 130
NAMESPACE: Final = "default"
MAX_PORT: Final = 65535
SETTLE_S: Final = 30.0
"""Longest wait for the coordinator to list every node before the replay starts."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hack.demo",
        description=__doc__.split("\n\n")[0].replace("\n", " ").replace("``", ""),
    )
    parser.add_argument(
        "--nodes", type=int, default=120, help="trace GPU nodes to sample (default: %(default)s)"
    )
    parser.add_argument(
        "--pods",
        type=int,
        default=0,
        help=f"pods to replay (default: 0, as many as ask for {ARRIVED_PCT} %% of the"
        " sample's GPUs)",
    )
    parser.add_argument(
        "--seed", type=int, default=42, help="node sample and pod order (default: %(default)s)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=75.0,
        help="longest replay through the extender, in seconds (default: %(default)s); both"
        " columns then compare the pods placed so far",
    )
    parser.add_argument(
        "--keep", action="store_true", help="stay up after the summary until Ctrl-C"
    )
    parser.add_argument(
        "--port", type=int, default=8080, help="the coordinator's port (default: %(default)s)"
    )
    parser.add_argument(
        "--debug-port",
        type=int,
        default=8081,
        help="the coordinator's debug port, /debug and /ui (default: %(default)s)",
    )
    parser.add_argument(
        "--api-port", type=int, default=6443, help="the API emulator's port (default: %(default)s)"
    )
    parser.add_argument(
        "--trace",
        type=Path,
        default=TRACE,
        help=f"the openb trace's directory, with {NODE_FILE} and {POD_FILE}"
        " (default: the files shipped in hack/sim/traces/openb/)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write files (default: a new temp dir)"
    )
    parser.add_argument(
        "--cluster",
        choices=("emulator", "real"),
        default="emulator",
        help="emulator (default): the API emulator, nothing to build; real: a real control"
        " plane and the real kube-scheduler, built from source on first use (minutes)",
    )
    args = parser.parse_args(argv)
    if not args.nodes > 0:
        parser.error(f"--nodes {args.nodes}: must be positive")
    for name in ("pods", "seed"):
        if getattr(args, name) < 0:
            parser.error(f"--{name} {getattr(args, name)}: must be 0 or more")
    for name in ("port", "api_port"):
        if not 0 < getattr(args, name) <= MAX_PORT:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be 1..{MAX_PORT}")
    if not args.seconds > 0:
        parser.error(f"--seconds {args.seconds}: must be positive")
    return args


def main(argv: Sequence[str] | None = None, clock: Clock | None = None) -> int:
    args = parse_args(argv)
    try:
        nodes = sample_nodes(trace.load_nodes(args.trace / NODE_FILE), args.nodes, args.seed)
        workload = trace.load_pods(args.trace / POD_FILE)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
    except (TraceError, OSError) as e:
        print(f"stowage demo: error: {e}", file=sys.stderr)
        return 2
    if args.cluster == "real":
        from hack.cluster.build import BuildError
        from hack.cluster.controlplane import ControlPlaneError
        from hack.demo import realcluster

        try:
            return realcluster.run(args, nodes, workload, ARRIVED_PCT)
        except (BuildError, ControlPlaneError, TimeoutError) as e:
            print(f"stowage demo: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
            return 0
    try:
        return _run(args, nodes, workload, clock or SystemClock())
    except Refused as e:
        if str(e):  # else the part that did not start said why
            print(f"stowage demo: error: {e}", file=sys.stderr)
        return 2
    except DemoError as e:
        print(f"stowage demo: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 0


def _run(
    args: argparse.Namespace, nodes: list[NodeSpec], workload: list[PodRequest], clock: Clock
) -> int:
    sequence = arrivals.build(workload, nodes, args.seed, ARRIVED_PCT / 100).pods
    pods = sequence[: args.pods] if args.pods else sequence
    specs = [*nodes, this_machine()]
    out = args.out or Path(tempfile.mkdtemp(prefix="stowage-demo-"))
    measure = Fragmentation(typical_shapes(workload))
    with running(specs, out, args.api_port, args.port, args.debug_port) as stack:
        api = JsonClient(stack.api.url)
        coordinator = JsonClient(stack.coordinator_url)
        _settle(coordinator, len(specs), clock)
        print(
            f"{len(nodes)} GPU nodes of the openb trace ({sum(n.gpus for n in nodes)} GPUs)"
            f" and this machine ({stack.node}) in an emulated cluster;"
            f" {len(pods)} trace pods to place (seed {args.seed})",
            flush=True,
        )
        cache = SchedulerCache(specs)
        extender = WithExtender(cache, args.seed, api, coordinator)
        stowage = Tally("with Stowage", cache.state, measure)

        waiting: list[str] = []  # uids of the pods no node could take

        def place(pod: PodRequest) -> int | None:
            created = api.post(f"/api/v1/namespaces/{NAMESPACE}/pods", pod_object(pod, NAMESPACE))
            node = extender.place(created, pod)
            if node is None:
                waiting.append(created["metadata"]["uid"])
            return node

        done = replay(pods, place, stowage, clock, args.seconds)
        baseline = _default_scoring(specs, pods[:done], args.seed, measure)
        debug = JsonClient(stack.debug_url)
        _report(pods, done, [baseline, stowage], coordinator, debug, stack.node, out)
        kubectl = f"kubectl --kubeconfig {stack.kubeconfig}"
        if not args.keep:
            print(
                "\nto keep it running (and have pods you create scheduled): make run ARGS=--keep"
                f"\n(python -m hack.demo --keep), then {kubectl} get nodes"
            )
            return 0
        print(
            f"\n--keep: the API emulator, the coordinator and this machine's agent stay up,"
            f" and pods you create are scheduled as the trace's were:\n  {kubectl} get nodes"
            f"\n  {kubectl} get pods -o wide\nCtrl-C stops them.",
            flush=True,
        )
        pending.schedule_until_interrupted(extender, api, waiting)
    return 0


def _default_scoring(
    specs: list[NodeSpec], pods: Sequence[PodRequest], seed: int, measure: Fragmentation
) -> Tally:
    """The same pods placed in process by kube-scheduler's default scoring alone."""
    cache = SchedulerCache(specs)
    tally = Tally("default scoring", cache.state, measure)
    default = DefaultScoring(cache, seed)
    for pod in pods:
        tally.record(pod, default.place(pod.name, pod))
    return tally


def replay(
    pods: Sequence[PodRequest],
    place: Callable[[PodRequest], int | None],
    tally: Tally,
    clock: Clock,
    seconds: float,
) -> int:
    """Schedule ``pods`` in order with ``place`` (the node's index, or None: pending)
    until ``seconds`` pass; how many were. The progress bar is drawn only on a terminal
    (tqdm's ``disable=None``): into a pipe or a file it would write hundreds
    of carriage-return lines."""
    from tqdm import tqdm

    deadline = clock.monotonic() + seconds
    with tqdm(
        total=len(pods), unit="pod", desc="placing through the extender", disable=None
    ) as bar:
        for k, pod in enumerate(pods):
            if clock.monotonic() >= deadline:
                bar.write(f"--seconds {seconds:g} reached: comparing the first {k} pods")
                return k
            tally.record(pod, place(pod))
            bar.update()
            bar.set_postfix(placed=k + 1 - tally.pending, pending=tally.pending, refresh=False)
    return len(pods)


def _settle(coordinator: JsonClient, nodes: int, clock: Clock) -> None:
    """Wait until the coordinator lists every node (its Node watch caught up) and has
    this machine's first report."""
    deadline = clock.monotonic() + SETTLE_S
    wait = threading.Event()
    while True:
        metrics = coordinator.text("/metrics")
        listed = sum(_by_label(metrics, "stowage_nodes").values())
        reports = _by_label(metrics, "stowage_reports_total", "outcome").get("accepted", 0.0)
        if listed >= nodes and reports:
            return
        if clock.monotonic() > deadline:
            raise DemoError(
                f"after {SETTLE_S:g} s the coordinator lists {listed:.0f} of {nodes} nodes"
                f" and has {reports:.0f} reports from this machine's agent"
            )
        wait.wait(0.2)


def _report(
    pods: Sequence[PodRequest],
    done: int,
    columns: list[Tally],
    coordinator: JsonClient,
    debug: JsonClient,
    node: str,
    out: Path,
) -> None:
    """The summary: the table, the coordinator's decisions, the plot."""
    print(
        f"\n{done} of {len(pods)} pods arrived, each scheduled once in arrival order"
        " (no retries):\n"
    )
    print(summary.table(columns))
    print()
    print(_decisions(coordinator, debug, node))
    png = out / "unallocated-gpu.png"
    summary.plot(png, columns, f"openb trace, {len(columns[0].state) - 1} GPU nodes + this one")
    print(f"\nplot: {png}\nlogs: {out / 'coordinator.log'}, {out / 'agent.log'}")


def _decisions(coordinator: JsonClient, debug: JsonClient, node: str) -> str:
    """What the coordinator decided besides placements, from its metrics and (on its
    debug listener) /debug."""
    metrics = coordinator.text("/metrics")
    throttled = debug.get("/debug/colocation").get("throttled", [])
    changes = sum(_by_label(metrics, "stowage_be_throttle_changes_total").values())
    decisions = debug.text("/debug/evictions").splitlines()
    plans = _by_label(metrics, "stowage_eviction_plans_total", "decision")
    evicted = _by_label(metrics, "stowage_evictions_total", "outcome")
    reports = _by_label(metrics, "stowage_reports_total", "outcome").get("accepted", 0.0)
    lines = [
        f"throttling: {changes:.0f} best-effort CPU quota changes, {len(throttled)} nodes"
        " throttled now (GET /debug/colocation)"
        + ("" if changes else ": no latency-sensitive pod stalled"),
        f"evictions: {sum(plans.values()):.0f} planner decisions ({_counts(plans)}),"
        f" {sum(evicted.values()):.0f} pods acted on ({_counts(evicted)}) (GET /debug/evictions)",
    ]
    if decisions:
        lines.append(f"  latest: {decisions[-1]}")
    lines.append(f"this machine's agent ({node}): {reports:.0f} reports accepted")
    return "\n".join(lines)


def _by_label(text: str, name: str, label: str = "") -> dict[str, float]:
    """A metric's samples in a /metrics page summed by one label's values (all under
    ``""`` without a label)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "")
                out[key] = out.get(key, 0.0) + sample.value
    return out


def _counts(counts: dict[str, float]) -> str:
    return ", ".join(f"{v:.0f} {k}" for k, v in sorted(counts.items())) or "none"
