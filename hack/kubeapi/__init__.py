"""A Kubernetes API emulator over real HTTP, for tests and for running the coordinator
without a cluster (no kube-apiserver can be installed where Stowage is developed).

It serves the endpoints Stowage uses, faithfully enough that the code path under test is the
one that runs in a cluster, with the official ``kubernetes`` client and ``kubectl`` as clients:

* discovery (``/version``, ``/api``, ``/apis``...), OpenAPI v3 (and v2 as JSON) generated
  from the ``kubernetes`` client's models, and Table output for ``kubectl get`` with the
  apiserver printers' columns (READY, STATUS, AGE, ``-o wide``), so plain ``kubectl apply``
  (validation on), ``kubectl explain`` and ``kubectl get`` read as against a cluster;
* ``fieldValidation`` (Ignore, Warn by default, Strict) on every write: unknown fields are
  dropped, warned about or refused as the apiserver's decoder does; bodies in JSON, YAML,
  or protobuf for what kubectl's typed clients create (namespaces, PDBs);
* nodes, pods, namespaces, events, ConfigMaps, leases and PodDisruptionBudgets: list
  (label and field selectors, pagination), watch, get, create, PUT, PATCH (merge,
  strategic merge, JSON patch), delete, with one global resourceVersion counter, 409 on
  stale resourceVersions and ``/status`` subresources;
* watches replaying a bounded change history, with 410 Expired once it has moved on;
* ``pods/eviction`` with the PodDisruptionBudget rules (201, 429, 500, dry run);
* ``pods/binding`` and ``bindings`` as a scheduler binds (201, 409 when already bound), and
  an emulated kubelet that starts a bound pod on an existing node (Running, Ready, pod IP);
* ``tokenreviews`` with pod-bound tokens, node-name extras and audiences;
* optional bearer-token authentication of the API itself;
* injected faults (``api.faults``): error Status answers (409, 429 with Retry-After, 5xx),
  slow answers, watches cut mid-stream or ended by an in-band 410.

Why our own and not ``kmock``: kmock's ``KubernetesEmulator`` is a generic object store
(``resourceVersion: '...'``, no 410, no subresources), so what we need from an apiserver
(one ordered resourceVersion, preconditions and conflicts, compaction, strategic merge
rules, eviction and token review) would all be added on top of it as scripted handlers
reaching into its internals. That code is most of this package anyway; owning the store
too keeps the semantics in one place and costs no dependency.

Known differences from a real apiserver (each a choice, not an accident): no controllers
(PDB status is what was written, nothing is garbage collected, finalizers do not hold a
delete), so deletes are immediate (a pod on a node is first marked terminating); the
emulated kubelet runs nothing, so a started pod stays Running; no RBAC or admission beyond
namespace existence; validation of metadata only; no server-side apply or managedFields
(``dryRun=All`` is honoured on every write); legacy discovery only; OpenAPI documents without
the ``x-kubernetes-list-*`` extensions and with int-or-string fields as free-form (the
client's models do not carry them); continue tokens do not pin a snapshot.

Layout: ``store`` (objects, resourceVersion, history), ``crud`` (routing and the generic
verbs), ``watch``, ``patch``, ``selectors``, ``eviction``, ``tokens``, ``discovery``,
``binding``, ``kubelet``, ``table``, ``printers``, ``validation``, ``fields``, ``models``,
``openapi``, ``protobuf``, ``kubeconfig``, ``faults``, ``objects`` (builders), ``server``
(``KubeApi``), ``__main__``.
"""

from hack.kubeapi.kubeconfig import write_kubeconfig
from hack.kubeapi.server import KubeApi
from hack.kubeapi.store import Store
from hack.kubeapi.tokens import Identity, TokenBook

__all__ = ["Identity", "KubeApi", "Store", "TokenBook", "write_kubeconfig"]
