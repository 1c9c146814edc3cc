"""JSON Schemas of ``KubeSchedulerConfiguration``, one per API version, from a table of the
upstream Go types.

No validator on PyPI ships kube-scheduler's component-config schemas. A field the version
does not have is an error at start-up in recent kube-scheduler releases (strict decoding)
and silently dropped in older ones, where the setting is then not in force: either way it
must not be in the file. So each type below lists its JSON fields and the versions that
have them, transcribed from ``k8s.io/kube-scheduler/config/<version>/types.go`` and
``types_pluginargs.go`` (and ``k8s.io/component-base/config/v1alpha1`` for leader election,
client connection and debugging), each version as its first release has it (v1beta1 in
1.19, v1beta2 in 1.22, v1beta3 in 1.23, v1 in 1.25): what is valid there stays valid in
the later releases that serve the version. Every object is closed
(``additionalProperties: false``).

A type is gated where it is reached: ``ScoringStrategy`` lists its fields for every
version, and only the versions whose ``NodeResourcesFitArgs`` has ``scoringStrategy`` can
get there.

Plugin arguments (``pluginConfig[].args``) are a ``runtime.RawExtension`` decoded by
plugin name: the plugins whose arguments a configuration here sets are checked strictly,
and the plugins a version does not have are refused by name. The v1beta1 scoring plugins
(NodeResourcesLeastAllocated, NodeResourcesMostAllocated, RequestedToCapacityRatio)
became ``NodeResourcesFitArgs.scoringStrategy`` in v1beta2.

Two rules of ``validateExtenders`` (``pkg/scheduler/apis/config/validation``) are kept
too: a prioritizing extender needs a positive weight, and at most one extender binds.
"""

from __future__ import annotations

from typing import Any, Final

VERSIONS: Final = ("v1beta1", "v1beta2", "v1beta3", "v1")
"""Oldest first."""
GROUP: Final = "kubescheduler.config.k8s.io"

ALL: Final = frozenset(VERSIONS)


def since(version: str) -> frozenset[str]:
    return frozenset(VERSIONS[VERSIONS.index(version) :])


def until(version: str) -> frozenset[str]:
    return frozenset(VERSIONS[: VERSIONS.index(version) + 1])


INT32: Final = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
INT64: Final = {"type": "integer"}
DURATION: Final = {
    "type": "string",
    "pattern": r"^(0|[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$",
}
"""``metav1.Duration``: Go's ``time.ParseDuration`` syntax (``2s``, ``1m30s``)."""
PRIMITIVES: Final[dict[str, dict[str, Any]]] = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "int32": INT32,
    "int64": INT64,
    "float32": {"type": "number"},
    "Duration": DURATION,
    "bytes": {"type": "string", "contentEncoding": "base64"},
    "object": {"type": "object"},
}

Field = tuple[Any, frozenset[str]]
"""A field's type — a primitive or type name, or ``[name]`` for a list — and the
versions that have it."""

TYPES: Final[dict[str, dict[str, Field]]] = {
    "KubeSchedulerConfiguration": {
        "apiVersion": ("string", ALL),
        "kind": ("string", ALL),
        "parallelism": ("int32", since("v1beta2")),
        "leaderElection": ("LeaderElectionConfiguration", ALL),
        "clientConnection": ("ClientConnectionConfiguration", ALL),
        "healthzBindAddress": ("string", until("v1beta2")),
        "metricsBindAddress": ("string", until("v1beta2")),
        # componentbaseconfigv1alpha1.DebuggingConfiguration, inlined
        "enableProfiling": ("bool", ALL),
        "enableContentionProfiling": ("bool", ALL),
        "percentageOfNodesToScore": ("int32", ALL),
        "podInitialBackoffSeconds": ("int64", ALL),
        "podMaxBackoffSeconds": ("int64", ALL),
        "profiles": (["KubeSchedulerProfile"], ALL),
        "extenders": (["Extender"], ALL),
    },
    "LeaderElectionConfiguration": {
        "leaderElect": ("bool", ALL),
        "leaseDuration": ("Duration", ALL),
        "renewDeadline": ("Duration", ALL),
        "retryPeriod": ("Duration", ALL),
        "resourceLock": ("string", ALL),
        "resourceName": ("string", ALL),
        "resourceNamespace": ("string", ALL),
    },
    "ClientConnectionConfiguration": {
        "kubeconfig": ("string", ALL),
        "acceptContentTypes": ("string", ALL),
        "contentType": ("string", ALL),
        "qps": ("float32", ALL),
        "burst": ("int32", ALL),
    },
    "KubeSchedulerProfile": {
        "schedulerName": ("string", ALL),
        "percentageOfNodesToScore": ("int32", since("v1")),
        "plugins": ("Plugins", ALL),
        "pluginConfig": (["PluginConfig"], ALL),
    },
    "Plugins": {
        "multiPoint": ("PluginSet", since("v1beta3")),
        "queueSort": ("PluginSet", ALL),
        "preFilter": ("PluginSet", ALL),
        "filter": ("PluginSet", ALL),
        "postFilter": ("PluginSet", ALL),
        "preScore": ("PluginSet", ALL),
        "score": ("PluginSet", ALL),
        "reserve": ("PluginSet", ALL),
        "permit": ("PluginSet", ALL),
        "preBind": ("PluginSet", ALL),
        "bind": ("PluginSet", ALL),
        "postBind": ("PluginSet", ALL),
    },
    "PluginSet": {
        "enabled": (["Plugin"], ALL),
        "disabled": (["Plugin"], ALL),
    },
    "Plugin": {
        "name": ("string", ALL),
        "weight": ("int32", ALL),
    },
    "PluginConfig": {
        "name": ("string", ALL),
        "args": ("object", ALL),
    },
    "Extender": {
        "urlPrefix": ("string", ALL),
        "filterVerb": ("string", ALL),
        "preemptVerb": ("string", ALL),
        "prioritizeVerb": ("string", ALL),
        "weight": ("int64", ALL),
        "bindVerb": ("string", ALL),
        "enableHTTPS": ("bool", ALL),
        "tlsConfig": ("ExtenderTLSConfig", ALL),
        "httpTimeout": ("Duration", ALL),
        "nodeCacheCapable": ("bool", ALL),
        "managedResources": (["ExtenderManagedResource"], ALL),
        "ignorable": ("bool", ALL),
    },
    "ExtenderTLSConfig": {
        "insecure": ("bool", ALL),
        "serverName": ("string", ALL),
        "certFile": ("string", ALL),
        "keyFile": ("string", ALL),
        "caFile": ("string", ALL),
        "certData": ("bytes", ALL),
        "keyData": ("bytes", ALL),
        "caData": ("bytes", ALL),
    },
    "ExtenderManagedResource": {
        "name": ("string", ALL),
        "ignoredByScheduler": ("bool", ALL),
    },
    # types_pluginargs.go
    "NodeResourcesFitArgs": {
        "ignoredResources": (["string"], ALL),
        "ignoredResourceGroups": (["string"], ALL),
        "scoringStrategy": ("ScoringStrategy", since("v1beta2")),
    },
    "ScoringStrategy": {
        "type": ("ScoringStrategyType", ALL),
        "resources": (["ResourceSpec"], ALL),
        "requestedToCapacityRatio": ("RequestedToCapacityRatioParam", ALL),
    },
    "RequestedToCapacityRatioParam": {
        "shape": (["UtilizationShapePoint"], ALL),
    },
    "NodeResourcesLeastAllocatedArgs": {
        "resources": (["ResourceSpec"], ALL),
    },
    "NodeResourcesMostAllocatedArgs": {
        "resources": (["ResourceSpec"], ALL),
    },
    "RequestedToCapacityRatioArgs": {
        "shape": (["UtilizationShapePoint"], ALL),
        "resources": (["ResourceSpec"], ALL),
    },
    "ResourceSpec": {
        "name": ("string", ALL),
        "weight": ("int64", ALL),
    },
    "UtilizationShapePoint": {
        "utilization": ("int32", ALL),
        "score": ("int32", ALL),
    },
    "DefaultPreemptionArgs": {
        "minCandidateNodesPercentage": ("int32", ALL),
        "minCandidateNodesAbsolute": ("int32", ALL),
    },
}

REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "KubeSchedulerConfiguration": ("apiVersion", "kind"),
    "Extender": ("urlPrefix",),
    "ExtenderManagedResource": ("name",),
    "Plugin": ("name",),
    "PluginConfig": ("name",),
    "ResourceSpec": ("name",),
}

ENUMS: Final[dict[str, tuple[str, ...]]] = {
    "ScoringStrategyType": ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"),
}

PLUGIN_ARGS: Final[dict[str, tuple[str, frozenset[str]]]] = {
    "NodeResourcesFit": ("NodeResourcesFitArgs", ALL),
    "NodeResourcesLeastAllocated": ("NodeResourcesLeastAllocatedArgs", until("v1beta1")),
    "NodeResourcesMostAllocated": ("NodeResourcesMostAllocatedArgs", until("v1beta1")),
    "RequestedToCapacityRatio": ("RequestedToCapacityRatioArgs", until("v1beta1")),
    "DefaultPreemption": ("DefaultPreemptionArgs", ALL),
}
"""Plugin name → its arguments' type, and the versions that have the plugin."""


def schema(version: str) -> dict[str, Any]:
    """The JSON Schema (2020-12) of ``KubeSchedulerConfiguration`` in ``version``."""
    if version not in VERSIONS:
        raise ValueError(f"unknown version {version!r}; known: {', '.join(VERSIONS)}")
    defs = {name: _object(name, version) for name in TYPES}
    defs.update({name: {"enum": list(values)} for name, values in ENUMS.items()})
    gone = sorted(name for name, (_, present) in PLUGIN_ARGS.items() if version not in present)
    name_here: dict[str, Any] = {"type": "string"}
    if gone:
        name_here["not"] = {"enum": gone}
    defs["Plugin"]["properties"]["name"] = name_here
    defs["PluginConfig"]["properties"]["name"] = name_here
    defs["PluginConfig"]["allOf"] = [
        {
            "if": {"properties": {"name": {"const": plugin}}, "required": ["name"]},
            "then": {"properties": {"args": {"$ref": f"#/$defs/{args}"}}},
        }
        for plugin, (args, present) in PLUGIN_ARGS.items()
        if version in present
    ]
    defs["Extender"]["allOf"] = [
        {
            "if": {
                "required": ["prioritizeVerb"],
                "properties": {"prioritizeVerb": {"minLength": 1}},
            },
            "then": {"required": ["weight"], "properties": {"weight": {"minimum": 1}}},
        }
    ]
    top = defs.pop("KubeSchedulerConfiguration")
    top["properties"]["apiVersion"] = {"const": f"{GROUP}/{version}"}
    top["properties"]["kind"] = {"const": "KubeSchedulerConfiguration"}
    top["properties"]["extenders"]["contains"] = {"required": ["bindVerb"]}
    top["properties"]["extenders"]["maxContains"] = 1
    top["properties"]["extenders"]["minContains"] = 0
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **top, "$defs": defs}


def _object(name: str, version: str) -> dict[str, Any]:
    fields = {k: kind for k, (kind, present) in TYPES[name].items() if version in present}
    out: dict[str, Any] = {
        "type": "object",
        "properties": {k: _type(kind) for k, kind in fields.items()},
        "additionalProperties": False,
    }
    if name in REQUIRED:
        out["required"] = list(REQUIRED[name])
    return out


def _type(kind: Any) -> dict[str, Any]:
    if isinstance(kind, list):
        (item,) = kind
        return {"type": "array", "items": _type(item)}
    if kind in PRIMITIVES:
        return dict(PRIMITIVES[kind])
    return {"$ref": f"#/$defs/{kind}"}
