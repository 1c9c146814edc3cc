"""``stowage approve NAMESPACE/POD`` (``kubectl stowage approve``): approve the preemption
plan the coordinator published on a pending pod, by writing the approval ConfigMap into the
coordinator's namespace (:mod:`coordinator.kube.approvals`).

    kubectl stowage approve team-a/train-0
    kubectl stowage approve team-a/train-0 --approvals-namespace stowage-system --ttl 600

The plan is read from the pod's ``stowage.io/preemption-plan`` annotation, which the pod's
owner can write as well, so nothing in it is taken on trust: the digest is recomputed from
the node and the victims' UIDs, the plan id from the pod and the digest, and every victim
is read back from the API server and must still be that pod, on that node. The victims
printed are the pods the API server has. Whatever the annotation says, the coordinator
executes only the plan it makes itself, and only if that plan's digest is the approved one.

The approval expires with the plan, and at the latest ``--ttl`` seconds from now. The
command needs ``get`` on pods (the pending pod and its victims) and ``create`` on
ConfigMaps in the coordinator's namespace (the shipped Role ``stowage-approver``). It exits
0 when approved; 1 when there is nothing that may be approved (no plan, one that does not
add up, a victim gone or replaced, a plan expired); 2 when the API server cannot be asked
or refuses the approval.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from common import annotations as ann
from common.clock import Clock, SystemClock
from coordinator.kube import approvals
from coordinator.kube.client import KubeError, name_of, translate

DEFAULT_NAMESPACE = "stowage-system"
"""The coordinator's namespace as shipped (``kube.namespace``)."""
TIMEOUT_S = 10.0


class NotApprovable(Exception):
    """There is no plan that may be approved; the message says why (exit 1)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pod", type=_pod_key, help="NAMESPACE/NAME of the pending pod")
    parser.add_argument(
        "--approvals-namespace",
        default=DEFAULT_NAMESPACE,
        help="the coordinator's namespace (its kube.namespace), where approvals live",
    )
    parser.add_argument(
        "--ttl",
        type=_positive_s,
        default=900.0,
        help="seconds the approval holds at most (it ends with the plan anyway)",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")


def main(args: argparse.Namespace, out: TextIO | None = None, clock: Clock | None = None) -> int:
    out = out or sys.stdout
    try:
        api = _connect(args)
    except Exception as e:  # the kubeconfig loader raises whatever it meets
        print(f"stowage approve: cannot load the kubeconfig: {e}", file=sys.stderr)
        return 2
    try:
        out.write(
            approve(api, args.pod, args.approvals_namespace, args.ttl, clock or SystemClock())
        )
    except NotApprovable as e:
        print(f"stowage approve: {e}", file=sys.stderr)
        return 1
    except KubeError as e:
        print(f"stowage approve: {e}", file=sys.stderr)
        return 2
    finally:
        api.close()
    return 0


def approve(api: Any, pod: str, namespace: str, ttl_s: float, clock: Clock) -> str:
    """Check the plan published on ``pod`` and write its approval; what was approved, in
    words. :class:`NotApprovable` when there is nothing to approve, ``KubeError`` when
    the API server cannot be asked or refuses."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    pod_ns, _, pod_name = pod.partition("/")
    found = _read_pod(core, pod_ns, pod_name)
    if found is None:
        raise NotApprovable(f"pod {pod} not found")
    text = (found.metadata.annotations or {}).get(approvals.PLAN_KEY)
    if text is None:
        raise NotApprovable(f"no preemption plan awaits approval on {pod}")
    try:
        plan = approvals.Published.read(text)
    except ValueError as e:
        raise NotApprovable(f"the plan published on {pod} is malformed: {e}") from None
    digest = approvals.victims_digest(plan.node, (uid for _, uid in plan.victims))
    if plan.digest != digest or plan.plan != approvals.plan_id(pod, digest):
        raise NotApprovable(
            f"the plan published on {pod} does not add up (it says plan {plan.plan} digest"
            f" {plan.digest}; its victims make plan {approvals.plan_id(pod, digest)} digest"
            f" {digest}): not approved"
        )
    now = clock.wall()
    if plan.expires_at <= now:
        raise NotApprovable(
            f"the plan published on {pod} expired at {ann.timestamp(plan.expires_at)}"
        )
    lines = [_checked_victim(core, name, uid, plan.node) for name, uid in plan.victims]
    expires_at = min(plan.expires_at, now + ttl_s)
    body = approvals.manifest(pod, digest, expires_at, namespace)
    what = f"create an approval in {namespace}"
    try:
        # The client sends a plain dict body as it is; its annotation names only the model.
        made = core.create_namespaced_config_map(namespace, body, _request_timeout=TIMEOUT_S)  # type: ignore[arg-type]
    except Exception as e:
        raise translate(what, e) from e
    head = (
        f"approved plan {plan.plan} for {pod} until {ann.timestamp(expires_at)}"
        f" (configmap {namespace}/{name_of(made)}):"
    )
    return "\n".join([head, *lines]) + "\n"


def _checked_victim(core: Any, name: str, uid: str, node: str) -> str:
    """The victim ``name`` as the API server has it, if it is still pod ``uid`` on
    ``node``: one line saying so."""
    namespace, _, pod_name = name.partition("/")
    found = _read_pod(core, namespace, pod_name)
    if found is None:
        raise NotApprovable(f"victim {name} is gone: the plan will change, approve the next one")
    if found.metadata.uid != uid:
        raise NotApprovable(
            f"victim {name} is another pod now (UID {found.metadata.uid}, the plan names {uid})"
        )
    if found.spec.node_name != node:
        raise NotApprovable(f"victim {name} is on {found.spec.node_name}, not the plan's {node}")
    return f"  evict {name} (UID {uid}) on {node}"


def _read_pod(core: Any, namespace: str, name: str) -> Any | None:
    """Pod ``namespace/name``; None when there is none."""
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_namespaced_pod(name, namespace, _request_timeout=TIMEOUT_S)
    except ApiException as e:
        if e.status == 404:
            return None
        raise translate(f"read pod {namespace}/{name}", e) from e
    except Exception as e:
        raise translate(f"read pod {namespace}/{name}", e) from e


def _connect(args: argparse.Namespace) -> Any:
    from kubernetes import client, config

    cfg = client.Configuration()
    cfg.retries = False
    return config.new_client_from_config(
        config_file=args.kubeconfig,
        context=args.context,
        client_configuration=cfg,
        persist_config=False,
    )


def _pod_key(text: str) -> str:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAMESPACE/NAME")
    return text


def _positive_s(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number of seconds")
    return value
