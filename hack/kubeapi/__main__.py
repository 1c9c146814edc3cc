"""``python -m hack.kubeapi``: the emulator as a process, for running the coordinator standalone.

    python -m hack.kubeapi --listen 127.0.0.1:6443 --seed-nodes 3 \
        --token agent-1-token=worker-1 --audience stowage --admin-token T --kubeconfig kubeconfig
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from hack.kubeapi.server import KubeApi

COORDINATOR_NAMESPACE = "stowage-system"
"""The coordinator's default ``kube.namespace``: a coordinator pointed at this emulator
leads (its Lease needs the namespace) without anyone creating it by hand."""
MAX_SEED_NODES = 254
"""The seeded nodes' addresses are 10.0.0.1 .. 10.0.0.254."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m hack.kubeapi", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--listen",
        default="127.0.0.1:0",
        type=listen_address,
        help="HOST:PORT (port 0: any free port; 6443 is the apiserver's)",
    )
    parser.add_argument(
        "--seed-nodes",
        type=int,
        default=0,
        metavar="N",
        help=f"add Ready nodes worker-1..worker-N (at most {MAX_SEED_NODES})",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN=NODE",
        help="a pod-bound service-account token whose TokenReview names NODE (repeatable)",
    )
    parser.add_argument(
        "--audience",
        action="append",
        default=[],
        help="audience the --token tokens are issued for (repeatable; default: the API server's)",
    )
    parser.add_argument("--admin-token", help="a token for an admin user (system:masters)")
    parser.add_argument(
        "--require-auth", action="store_true", help="refuse API calls without a valid token"
    )
    parser.add_argument(
        "--history", type=int, default=1000, help="watch events kept before 410 Expired"
    )
    parser.add_argument(
        "--kubeconfig",
        help="write a kubeconfig for this server here (YAML; its user holds --admin-token)",
    )
    parser.add_argument(
        "--no-kubelet",
        dest="kubelet",
        action="store_false",
        help="leave bound pods Pending (by default an emulated kubelet starts them)",
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=None,
        metavar="NAME",
        help="a namespace to create besides the defaults (repeatable; default: "
        f"{COORDINATOR_NAMESPACE}, where the coordinator keeps its Lease)",
    )
    args = parser.parse_args(argv)
    for spec in args.token:
        token, sep, node = spec.partition("=")
        if not sep or not token or not node:
            parser.error(f"--token wants TOKEN=NODE, got {spec!r}")
    if not 0 <= args.seed_nodes <= MAX_SEED_NODES:
        parser.error(f"--seed-nodes {args.seed_nodes}: expected 0..{MAX_SEED_NODES}")
    if args.history < 1:
        parser.error(f"--history {args.history}: expected at least 1")
    return args


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); argparse turns the ValueError into a usage error."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(text)
    return host or "127.0.0.1", int(port)


listen_address.__name__ = "HOST:PORT"  # how argparse names the type in its error


async def serve(args: argparse.Namespace) -> None:
    host, port = args.listen
    api = KubeApi(
        host=host,
        port=port,
        history=args.history,
        require_auth=args.require_auth,
        kubelet=args.kubelet,
    )
    for namespace in args.namespace or [COORDINATOR_NAMESPACE]:
        api.add_namespace(namespace)
    for i in range(1, args.seed_nodes + 1):
        api.add_node(f"worker-{i}", address=f"10.0.0.{i}")
    for spec in args.token:
        token, _, node = spec.partition("=")
        api.add_token(token, node=node, audiences=args.audience or None)
    if args.admin_token:
        api.add_token(args.admin_token, username="admin", groups=["system:masters"])
    try:
        await api.start()
    except OSError as e:
        print(
            f"python -m hack.kubeapi: error: cannot listen on {host}:{port}: {e.strerror or e}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    if args.kubeconfig:
        try:
            api.kubeconfig(args.kubeconfig, token=args.admin_token)
        except OSError as e:
            await api.stop()
            print(
                f"python -m hack.kubeapi: error: --kubeconfig {args.kubeconfig}: {e.strerror or e}",
                file=sys.stderr,
            )
            raise SystemExit(2) from None
    print(f"kubeapi serving on {api.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await api.stop()


def main(argv: list[str] | None = None) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
