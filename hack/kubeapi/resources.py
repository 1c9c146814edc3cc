"""The resource types the emulator serves, in one table that routing and discovery share.

Every fact the apiserver derives from a type's registry strategy and that a client can
observe (scope, verbs, subresources, which fields a field selector accepts, whether a PUT
may create, whether the main endpoint may write ``status``) is a field here, so adding a
type is one entry and the discovery documents cannot drift from what the routes accept.
"""

from __future__ import annotations

from dataclasses import dataclass

READ_WRITE = ("create", "delete", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Resource:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...] = READ_WRITE
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    field_selectors: tuple[str, ...] = ()
    """Besides metadata.name (and metadata.namespace when namespaced), which every type accepts."""
    create_on_update: bool = False
    """``AllowCreateOnUpdate``: a PUT to a missing name creates it (leases and events do)."""
    has_status: bool = False
    """The main endpoint keeps the stored status on update; only ``/status`` writes it."""
    return_deleted: bool = False
    """DELETE answers with the object (pods, namespaces) rather than a Success Status."""
    has_generation: bool = False
    """``metadata.generation`` counts spec changes (the PDB controller's observedGeneration)."""
    stored: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """How error messages name the type: ``nodes``, ``leases.coordination.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def selectable(self) -> tuple[str, ...]:
        scoped = ("metadata.namespace",) if self.namespaced else ()
        return ("metadata.name", *scoped, *self.field_selectors)


NODES = Resource(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    False,
    short_names=("no",),
    subresources=("status",),
    field_selectors=("spec.unschedulable",),
    has_status=True,
)
PODS = Resource(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    True,
    short_names=("po",),
    subresources=("status", "eviction", "binding"),
    return_deleted=True,
    field_selectors=(
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    has_status=True,
)
NAMESPACES = Resource(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    False,
    short_names=("ns",),
    subresources=("status",),
    return_deleted=True,
    field_selectors=("status.phase",),
    has_status=True,
)
EVENTS = Resource(
    "",
    "v1",
    "events",
    "event",
    "Event",
    True,
    short_names=("ev",),
    field_selectors=(
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    create_on_update=True,
)
CONFIGMAPS = Resource("", "v1", "configmaps", "configmap", "ConfigMap", True, short_names=("cm",))
LEASES = Resource(
    "coordination.k8s.io", "v1", "leases", "lease", "Lease", True, create_on_update=True
)
PDBS = Resource(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "poddisruptionbudget",
    "PodDisruptionBudget",
    True,
    short_names=("pdb",),
    subresources=("status",),
    has_status=True,
    has_generation=True,
)
BINDINGS = Resource(
    "", "v1", "bindings", "binding", "Binding", True, verbs=("create",), stored=False
)
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io",
    "v1",
    "tokenreviews",
    "tokenreview",
    "TokenReview",
    False,
    verbs=("create",),
    stored=False,
)

RESOURCES: tuple[Resource, ...] = (
    NODES,
    PODS,
    NAMESPACES,
    EVENTS,
    CONFIGMAPS,
    BINDINGS,
    LEASES,
    PDBS,
    TOKEN_REVIEWS,
)

# The kinds of the create-only subresources (group, version, kind), for discovery and routing.
SUBRESOURCE_KINDS = {"eviction": ("policy", "v1", "Eviction"), "binding": ("", "v1", "Binding")}


def group_versions() -> dict[str, list[str]]:
    """``{group: [version, ...]}`` in table order, core group under ""."""
    out: dict[str, list[str]] = {}
    for res in RESOURCES:
        versions = out.setdefault(res.group, [])
        if res.version not in versions:
            versions.append(res.version)
    return out


def lookup(group: str, version: str, plural: str) -> Resource | None:
    for res in RESOURCES:
        if (res.group, res.version, res.plural) == (group, version, plural):
            return res
    return None
