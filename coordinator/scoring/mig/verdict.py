"""One pod's MIG verdict on one node, as ``/debug/explain`` shows it.

What the device plugin offers is the Node's ``status.allocatable`` (the kubelet writes it
from the plugin's devices: neither the pod's owner nor the agent can change it); what is
in use is what the pods bound there request; the agent's report adds each GPU's instances
by profile, which is what tells a single-strategy node that the plugin refuses (mixed
profiles, or GPUs with MIG both on and off) from one that offers nothing yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from common.podspec import GPU, MIG_PREFIX
from coordinator.scoring.mig.advertised import (
    SINGLE,
    Advertised,
    MigGpu,
    MigRefusal,
    advertised,
    asks_of,
    profile_of,
    refusal,
    strategy_of,
)


def in_use(bound: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """What the pods bound to a node request together, per resource."""
    total: dict[str, int] = {}
    for requests in bound:
        for resource, count in requests.items():
            total[resource] = total.get(resource, 0) + count
    return total


def refusal_on(
    requests: Mapping[str, int],
    allocatable: Mapping[str, int],
    used: Mapping[str, int],
    gpus: Sequence[MigGpu],
) -> MigRefusal | None:
    """Why the node cannot give the pod its MIG instances; None when it can (or the pod
    asks for none): the filter's verdict, the one :func:`explain` shows."""
    asks = asks_of(requests, strategy_of(allocatable), gpus)
    return refusal(asks, _offered(allocatable, gpus), used) if asks else None


def _offered(allocatable: Mapping[str, int], gpus: Sequence[MigGpu]) -> Advertised:
    """What the plugin offers on the node: its allocatable's GPUs and MIG instances, none
    at all on a single-strategy node whose report shows GPUs the plugin refuses."""
    single_mig = strategy_of(allocatable) == SINGLE and has_mig(allocatable, gpus)
    return Advertised(
        {r: n for r, n in allocatable.items() if r == GPU or r.startswith(MIG_PREFIX)},
        advertised(gpus, SINGLE).invalid if single_mig else None,
    )


def has_mig(allocatable: Mapping[str, int], gpus: Sequence[MigGpu]) -> bool:
    """A node with MIG instances: MIG resources in its allocatable (the mixed strategy) or
    MIG-enabled GPUs in its report (the single strategy shows no other sign)."""
    return strategy_of(allocatable) != SINGLE or any(g.mig_enabled for g in gpus)


def explain(
    requests: Mapping[str, int],
    allocatable: Mapping[str, int],
    used: Mapping[str, int],
    gpus: Sequence[MigGpu],
) -> dict[str, Any] | None:
    """The verdict and the node's instances per profile (on the node, in use, free); None
    where MIG plays no part: the pod asks for none and the node has no MIG GPU."""
    strategy = strategy_of(allocatable)
    asks = asks_of(requests, strategy, gpus)
    mig_node = has_mig(allocatable, gpus)
    if not asks and not mig_node:
        return None
    offered = _offered(allocatable, gpus)
    refused = refusal(asks, offered, used)
    return {
        "strategy": strategy,
        "asks": [{"resource": a.resource, "profile": a.profile, "count": a.count} for a in asks],
        "instances": {
            resource: {
                "profile": profile_of(resource),
                "on_node": total,
                "in_use": used.get(resource, 0),
                "free": max(total - used.get(resource, 0), 0),
            }
            for resource, total in sorted(offered.resources.items())
        },
        "gpus": [
            {"index": k, "mig_enabled": g.mig_enabled, "instances": list(g.instances)}
            for k, g in enumerate(gpus)
        ],
        "verdict": "fits" if refused is None else refused.reason,
        "unresolvable": refused is not None and refused.unresolvable,
    }


def free_text(shown: Mapping[str, Any]) -> str:
    """An :func:`explain` answer's instances in a line: free of those on the node, per
    profile (per resource where none names one), ``3g.40gb 1/2, 1g.10gb 7/7``."""
    return ", ".join(
        f"{i['profile'] or resource} {i['free']}/{i['on_node']}"
        for resource, i in shown["instances"].items()
    )
