"""``pods/binding`` and ``bindings``: how a scheduler places a pod (``BindingREST`` in
``pkg/registry/core/pod/storage/storage.go``).

A ``v1 Binding`` names the pod (``metadata.name``, optionally ``uid`` and
``resourceVersion`` as preconditions) and a ``target`` node. The apiserver sets
``spec.nodeName``, copies the binding's annotations onto the pod and sets the
``PodScheduled`` condition True, all in one write (a watcher sees one MODIFIED), and answers
201 with a Success Status. The failures a scheduler is written against:

* 404 for a pod that is not there;
* 409 Conflict on ``pods/binding`` when the pod is already on a node, is being deleted, or
  has scheduling gates; 409 on ``pods`` when a precondition is stale;
* 400 when the body is not a Binding or its name differs from the URL's;
* an invalid target (a kind other than Node, no name) is a plain error in the apiserver
  (``ValidatePodBinding(...).ToAggregate()``, not a ``StatusError``), which its handler turns
  into 500 with no reason (``errors.internal``); the emulator answers the same.

Then, unless turned off, the emulated kubelet of an existing node starts the pod
(:func:`hack.kubeapi.kubelet.start_pod`), so ``kubectl get pods`` reads Running.

Against this (and a real apiserver) the ``kubernetes`` Python client's
``create_namespaced_binding`` / ``create_namespaced_pod_binding`` bind the pod and then
raise while reading the Success Status as a ``V1Binding`` (whose ``target`` is required);
call them with ``_preload_content=False`` and read the HTTP status instead.
"""

from __future__ import annotations

from typing import Any

from hack.kubeapi import errors, kubelet, objects
from hack.kubeapi.cluster import Cluster
from hack.kubeapi.resources import PODS
from hack.kubeapi.store import Obj


def _target_problems(target: Any) -> list[str]:
    """``ValidatePodBinding`` as ``field.ErrorList`` messages."""
    target = target if isinstance(target, dict) else {}
    problems = []
    kind = target.get("kind") or ""
    if kind and kind != "Node":
        problems.append(
            f'target.kind: Unsupported value: "{kind}": supported values: "Node", "<empty>"'
        )
    if not target.get("name"):
        problems.append("target.name: Required value")
    return problems


def bind(
    cluster: Cluster, namespace: str, url_name: str | None, body: Obj, *, dry_run: bool = False
) -> Obj:
    """Bind the pod ``body`` names (``url_name`` on ``pods/{name}/binding``, None on the
    ``bindings`` collection) and return the Success Status; ``dry_run`` checks only."""
    md = body.get("metadata") or {}
    name = md.get("name") or ""
    if url_name is not None and name != url_name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    problems = _target_problems(body.get("target"))
    if problems:
        shown = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
        raise errors.internal(shown)
    if not name:
        raise errors.bad_request("Name parameter required.")
    node = body["target"]["name"]
    annotations = md.get("annotations") or {}

    def assign(pod: Obj) -> Obj:
        pmd = pod["metadata"]
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if md.get(field) and md[field] != pmd[field]:
                raise errors.conflict(
                    "pods",
                    name,
                    f"Precondition failed: {label} in precondition: {md[field]}, "
                    f"{label} in object meta: {pmd[field]}",
                )
        if pmd.get("deletionTimestamp"):
            why = f"pod {name} is being deleted, cannot be assigned to a host"
        elif pod["spec"].get("nodeName"):
            why = f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
        elif pod["spec"].get("schedulingGates"):
            why = f"pod {name} has non-empty .spec.schedulingGates"
        else:
            why = ""
        if why:
            raise errors.conflict("pods/binding", name, why)
        pod["spec"]["nodeName"] = node
        if annotations:
            pmd["annotations"] = {**(pmd.get("annotations") or {}), **annotations}
        set_condition(pod, "PodScheduled", "True")
        pmd["resourceVersion"] = ""
        return pod

    if dry_run:
        assign(cluster.store.get(PODS, namespace, name))
    else:
        cluster.store.update(PODS, namespace, name, assign)
        if cluster.kubelet:
            kubelet.start_pod(cluster, namespace, name)
    return errors.status(201, "", "", success=True)


def set_condition(pod: Obj, kind: str, status: str, **extra: Any) -> None:
    """``podutil.UpdatePodCondition``: replace the condition of this type, keeping its
    ``lastTransitionTime`` unless its status changes."""
    st = pod.setdefault("status", {})
    conditions = st.setdefault("conditions", [])
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") != status:
                c["lastTransitionTime"] = objects.now()
            c.update(status=status, **extra)
            return
    conditions.append(
        {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": objects.now(),
            **extra,
        }
    )
