"""Pod deletion and ``pods/eviction`` (``pkg/registry/core/pod/storage/eviction.go``).

Eviction is the one place where the apiserver enforces PodDisruptionBudgets, and the
status codes are the contract a drain loop is written against: 201 when the pod goes,
429 when a budget forbids it (or has not been observed yet, with Retry-After), 500 when two
budgets select the pod, 403 for a corrupt budget. Pods that are Pending, Succeeded, Failed
or already terminating skip the budget check, as they are not counted as healthy.

Nothing computes PDB status (there is no disruption controller): a budget allows what its
``status.disruptionsAllowed`` says, and each eviction decrements it and records the pod in
``status.disruptedPods``, as the apiserver does before the controller catches up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multidict import MultiMapping

from hack.kubeapi import errors, objects, selectors
from hack.kubeapi.resources import PDBS, PODS
from hack.kubeapi.store import Obj, Store

MAX_DISRUPTED_PODS = 2000
DENIED = "Cannot evict pod as it would violate the pod's disruption budget."


def delete_pod(
    store: Store,
    ns: str,
    name: str,
    pre: Mapping[str, Any],
    grace: int | None,
) -> Obj:
    """A pod on a node with a grace period is first marked terminating (MODIFIED with
    ``deletionTimestamp``) and then removed at once, as if its kubelet confirmed at once;
    a pod on no node or in a terminal phase is removed in one step, as in the apiserver."""
    pod = store.get(PODS, ns, name)
    _check_preconditions(pod, pre)
    if grace is None:
        grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
    phase = (pod.get("status") or {}).get("phase")
    graceful = grace > 0 and pod["spec"].get("nodeName") and phase not in ("Succeeded", "Failed")
    if graceful and "deletionTimestamp" not in pod["metadata"]:

        def mark(obj: Obj) -> Obj:
            _check_preconditions(obj, pre)
            obj["metadata"]["deletionTimestamp"] = objects.now(after_s=grace)
            obj["metadata"]["deletionGracePeriodSeconds"] = grace
            obj["metadata"]["resourceVersion"] = ""
            return obj

        pod = store.update(PODS, ns, name, mark)
        pre = (
            {**pre, "resourceVersion": pod["metadata"]["resourceVersion"]}
            if pre.get("resourceVersion")
            else pre
        )

    def last(obj: Obj) -> None:
        obj["metadata"].setdefault("deletionTimestamp", objects.now())
        obj["metadata"]["deletionGracePeriodSeconds"] = 0

    store.delete(
        PODS, ns, name, uid=pre.get("uid"), resource_version=pre.get("resourceVersion"), last=last
    )
    return pod


def _check_preconditions(pod: Obj, pre: Mapping[str, Any]) -> None:
    md = pod["metadata"]
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        if pre.get(field) and pre[field] != md[field]:
            raise errors.conflict(
                "pods",
                md["name"],
                f"Precondition failed: {label} in precondition: {pre[field]}, "
                f"{label} in object meta: {md[field]}",
            )


def _dry_run(body: Obj, query: MultiMapping[str]) -> tuple[Obj, bool]:
    """``propagateDryRun``: the query's ``dryRun`` and ``deleteOptions.dryRun`` must agree."""
    options = dict(body.get("deleteOptions") or {})
    from_query = list(query.getall("dryRun", []))
    from_body = list(options.get("dryRun") or [])
    if from_query and from_body and from_query != from_body:
        raise errors.internal(
            f"Non-matching dry-run options in request and content: {from_query} and {from_body}"
        )
    options["dryRun"] = from_body or from_query
    return options, "All" in options["dryRun"]


def evict(store: Store, ns: str, name: str, body: Any, query: MultiMapping[str]) -> Obj:
    if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
        raise errors.bad_request("the body of the request is not an Eviction")
    if (body.get("metadata") or {}).get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options, dry_run = _dry_run(body, query)
    pre = options.get("preconditions") or {}
    grace = options.get("gracePeriodSeconds")
    pod = store.get(PODS, ns, name)
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
        _disrupt(store, pod, pre, grace, dry_run)
        return errors.status(201, "", "", success=True)

    matching = []
    for pdb in store.list(PDBS, ns)[0]:
        matches = selectors.label_selector((pdb.get("spec") or {}).get("selector"))
        if matches is not None and matches(pod):
            matching.append(pdb)
    if len(matching) > 1:
        raise errors.ApiError(
            errors.status(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.",
            )
        )
    if matching:
        pdb = matching[0]
        status = pdb.get("status") or {}
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        healthy_budget = status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0
        unready_may_go = policy == "AlwaysAllow" or healthy_budget
        if objects.pod_is_ready(pod) or not unready_may_go:
            _check_and_decrement(store, pdb, name, dry_run)
    _disrupt(store, pod, pre, grace, dry_run)
    return errors.status(201, "", "", success=True)


def _check_and_decrement(store: Store, pdb: Obj, pod_name: str, dry_run: bool) -> None:
    name = pdb["metadata"]["name"]
    status = pdb.get("status") or {}
    if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 0):
        raise errors.too_many_requests(
            DENIED, f"The disruption budget {name} is still being processed by the server.", 10
        )
    allowed = status.get("disruptionsAllowed", 0)
    if allowed < 0:
        raise errors.forbidden(
            "poddisruptionbudget.policy", name, "pdb disruptions allowed is negative"
        )
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(
            "poddisruptionbudget.policy",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise errors.too_many_requests(
            DENIED,
            f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
            f"and has {status.get('currentHealthy', 0)} currently",
        )
    if dry_run:
        return

    def decrement(obj: Obj) -> Obj:
        st = obj.setdefault("status", {})
        st["disruptionsAllowed"] = st.get("disruptionsAllowed", 0) - 1
        if st["disruptionsAllowed"] == 0:
            generation = obj["metadata"].get("generation", 1)
            conditions = [
                c for c in st.get("conditions") or [] if c.get("type") != "DisruptionAllowed"
            ]
            st["conditions"] = [*conditions, objects.disruption_condition(False, generation)]
        st.setdefault("disruptedPods", {})[pod_name] = objects.now()
        obj["metadata"]["resourceVersion"] = pdb["metadata"]["resourceVersion"]
        return obj

    store.update(PDBS, pdb["metadata"]["namespace"], name, decrement)


def _disrupt(
    store: Store, pod: Obj, pre: Mapping[str, Any], grace: int | None, dry_run: bool
) -> None:
    """``addConditionAndDeletePod``: a DisruptionTarget condition, then the delete."""
    md = pod["metadata"]
    if dry_run:
        _check_preconditions(pod, pre)
        return

    def condition(obj: Obj) -> Obj:
        _check_preconditions(obj, pre)
        st = obj.setdefault("status", {})
        others = [c for c in st.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        st["conditions"] = [
            *others,
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": objects.now(),
            },
        ]
        obj["metadata"]["resourceVersion"] = ""
        return obj

    updated = store.update(PODS, md["namespace"], md["name"], condition)
    if pre.get("resourceVersion"):
        pre = {**pre, "resourceVersion": updated["metadata"]["resourceVersion"]}
    delete_pod(store, md["namespace"], md["name"], pre, grace)
