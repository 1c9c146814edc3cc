"""Approvals of preemption plans: ConfigMaps in the coordinator's own namespace, which
only operators write. Nothing on the pending pod approves anything: the pod's owner
writes its annotations, and would approve its own preemption.

A plan that needs a person's approval (its queue weighs more than
``evictions.approval_weight_above``) is executed only once an approval names it exactly::

    apiVersion: v1
    kind: ConfigMap
    metadata:
      generateName: stowage-approval-3f2a9c01b7de-
      namespace: stowage-system                    # the coordinator's (kube.namespace)
      labels: {stowage.io/approval: 3f2a9c01b7de}  # the plan id: how it is found
    data:
      pod: team-a/train-0                          # the pending pod it is for
      plan: 3f2a9c01b7de                           # the plan id
      digest: 9b1c0d4e5f607182                     # the victims and the node
      expires: "2026-11-29T17:29:05Z"              # RFC 3339

* ``digest``: the first 16 hex digits of SHA-256 over the target node and the victims'
  UIDs, sorted (``node|uid,uid``). A victim replaced, added or dropped makes another
  digest, so an approval given for one set of pods never evicts another.
* ``plan``: the first 12 hex digits of SHA-256 over ``pod|digest``; it binds the digest to
  the pending pod, so one pod's approval does not serve another pod wanting the same room.
* ``expires``: after it the approval approves nothing (on the coordinator's wall clock).

An approval is used once: the leader that executes a plan on it does not execute on it
again (a real run evicts the victims, so their digest cannot come back either).

Why a ConfigMap there: writes in a namespace are granted to whom the cluster's operators
choose (the shipped Role ``stowage-approver`` grants ``create`` on ConfigMaps there and
nothing more, so an approver cannot change an existing one, the coordinator's own
configuration included); a real API server and the emulator both serve it; and the
coordinator only needs ``list`` on ConfigMaps in its own namespace (a Role, not a
ClusterRole) to find them. It never writes one: the party that acts must not be the one
that approves. It reads them fresh, when it decides, rather than from a watch that may
lag behind an approval just given or just withdrawn.

``kubectl stowage approve NS/POD`` (:mod:`cli.approve`) writes an approval from the plan
published on the pod, after checking it against the pods it names; :func:`kubectl_command`
is the same object as a plain ``kubectl`` one-liner, which the plan's Event carries.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from common import annotations as ann
from coordinator.kube.client import metadata, name_of, translate

PLAN_KEY: Final = ann.PREFIX + "preemption-plan"
"""The pending pod's annotation showing the plan that awaits approval, for people and for
``kubectl stowage approve``. It approves nothing and nothing trusts it (the pod's owner
can rewrite it): the command checks it against the pods it names, the coordinator
compares approvals with its own plan."""
LABEL: Final = ann.PREFIX + "approval"
NAME_PREFIX: Final = "stowage-approval-"
KEYS: Final = ("pod", "plan", "digest", "expires")
READ_TIMEOUT_S: Final = 10.0


def victims_digest(node: str, victim_uids: Iterable[str]) -> str:
    """What a plan evicts, and where, in 16 hex digits."""
    text = node + "|" + ",".join(sorted(victim_uids))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_id(pod: str, digest: str) -> str:
    """The plan for pending pod ``ns/name`` that evicts what ``digest`` names."""
    return hashlib.sha256(f"{pod}|{digest}".encode()).hexdigest()[:12]


def unix_s(text: str) -> float:
    """An RFC 3339 time with its offset (``2026-11-29T17:29:05Z``) in Unix seconds;
    ValueError saying what is wrong."""
    try:
        at = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an RFC 3339 time") from None
    if at.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (add Z)")
    return at.timestamp()


def approve_command(pod: str, namespace: str) -> str:
    """How an operator approves the plan published on ``pod``, with the plugin."""
    return f"kubectl stowage approve {pod} --approvals-namespace {namespace}"


@dataclass(frozen=True, slots=True)
class Published:
    """A plan as published on its pending pod (:data:`PLAN_KEY`)::

    id=3f2a9c01b7de,digest=9b1c0d4e5f607182,node=gpu-17,
    victims=team-b/etl-0:6c1e…|team-b/etl-1:0b7f…,expires=2026-11-29T17:29:05Z,
    approve=kubectl stowage approve team-a/train-0 --approvals-namespace stowage-system;
    at=2026-11-29T17:14:05Z
    """

    plan: str
    digest: str
    node: str
    victims: tuple[tuple[str, str], ...]
    """``(ns/name, uid)`` of each victim."""
    expires_at: float
    """Unix seconds: when the coordinator stops waiting for an approval."""

    def annotation(self, pod: str, namespace: str, now: float) -> str:
        return ann.value(
            {
                "id": self.plan,
                "digest": self.digest,
                "node": self.node,
                "victims": "|".join(f"{name}:{uid}" for name, uid in self.victims),
                "expires": ann.timestamp(self.expires_at),
                "approve": approve_command(pod, namespace),
            },
            now,
        )

    @classmethod
    def read(cls, text: str) -> Published:
        """The annotation's value; ValueError naming what is wrong with it."""
        pairs, _ = ann.parse(text)
        missing = [k for k in ("id", "digest", "node", "victims", "expires") if not pairs.get(k)]
        if missing:
            raise ValueError(f"{missing[0]} is missing")
        victims = []
        for entry in pairs["victims"].split("|"):
            name, _, uid = entry.rpartition(":")
            if "/" not in name or not uid:
                raise ValueError(f"victim {entry!r} is not NAMESPACE/NAME:UID")
            victims.append((name, uid))
        try:
            expires_at = unix_s(pairs["expires"])
        except ValueError as e:
            raise ValueError(f"expires: {e}") from None
        return cls(pairs["id"], pairs["digest"], pairs["node"], tuple(victims), expires_at)


@dataclass(frozen=True, slots=True)
class Approval:
    """One approval ConfigMap, as read."""

    name: str
    uid: str
    pod: str
    plan: str
    digest: str
    expires_at: float
    """Unix seconds."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """A ConfigMap labelled as an approval that is not one; ``reason`` says why."""

    name: str
    reason: str


def parse(name: str, uid: str, data: Mapping[str, Any] | None) -> Approval | Invalid:
    """An approval ConfigMap's ``data``, checked strictly: every key of :data:`KEYS`, no
    other, strings, and ``expires`` an RFC 3339 time with its offset."""
    data = data or {}
    missing = [k for k in KEYS if k not in data]
    if missing:
        return Invalid(name, f"data.{missing[0]} is missing")
    unknown = sorted(k for k in data if k not in KEYS)
    if unknown:
        return Invalid(name, f"data.{unknown[0]} is not an approval key ({', '.join(KEYS)})")
    if not all(isinstance(data[k], str) for k in KEYS):
        return Invalid(name, "data values must be strings")
    try:
        expires_at = unix_s(data["expires"])
    except ValueError as e:
        return Invalid(name, f"data.expires: {e}")
    return Approval(name, uid, data["pod"], data["plan"], data["digest"], expires_at)


def problem(found: Approval | Invalid, pod: str, digest: str, now: float) -> str | None:
    """Why ``found`` does not approve the plan for ``pod`` that evicts what ``digest``
    names, at Unix time ``now``; None when it does."""
    if isinstance(found, Invalid):
        return f"{found.name}: {found.reason}"
    pid = plan_id(pod, digest)
    if found.pod != pod:
        return f"{found.name} is for pod {found.pod}, not {pod}"
    if found.plan != pid:
        return f"{found.name} is for plan {found.plan}, not {pid}"
    if found.digest != digest:
        return (
            f"{found.name} approves victims {found.digest}; plan {pid} now evicts {digest}"
            " (the victims changed)"
        )
    if not found.expires_at > now:
        return f"{found.name} expired at {ann.timestamp(found.expires_at)}"
    return None


def manifest(pod: str, digest: str, expires_at: float, namespace: str) -> dict[str, Any]:
    """The approval of the plan for ``pod`` that evicts what ``digest`` names, until Unix
    time ``expires_at``, as a ConfigMap in the coordinator's ``namespace``."""
    pid = plan_id(pod, digest)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "generateName": f"{NAME_PREFIX}{pid}-",
            "namespace": namespace,
            "labels": {LABEL: pid},
        },
        "data": {"pod": pod, "plan": pid, "digest": digest, "expires": ann.timestamp(expires_at)},
    }


def kubectl_command(pod: str, digest: str, expires_at: float, namespace: str) -> str:
    """:func:`manifest` as one ``kubectl`` command line, for operators without the plugin.
    Pod names, namespaces and digests hold no quote, so single quotes keep it whole."""
    body = json.dumps(manifest(pod, digest, expires_at, namespace), separators=(",", ":"))
    return f"echo '{body}' | kubectl create -f -"


class ApprovalReader:
    """Finds approvals in the coordinator's namespace with the real ``kubernetes`` client;
    synchronous (run it in a worker thread)."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self.namespace = namespace

    def find(self, plan: str) -> list[Approval | Invalid]:
        """The ConfigMaps labelled as approvals of ``plan``, parsed. Failures raise
        :class:`~coordinator.kube.client.KubeError`."""
        what = f"list approvals of plan {plan} in {self.namespace}"
        try:
            found = self._core.list_namespaced_config_map(
                self.namespace,
                label_selector=f"{LABEL}={plan}",
                _request_timeout=READ_TIMEOUT_S,
            )
        except Exception as e:
            raise translate(what, e) from e
        return [parse(name_of(cm), metadata(cm).uid or "", cm.data) for cm in found.items or ()]
