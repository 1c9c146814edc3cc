"""Bearer tokens: the TokenReview endpoint and the optional authentication of API calls.

A token maps to the identity the apiserver would report for it. Tokens bound to a pod
carry the ``authentication.kubernetes.io/{pod,node}-{name,uid}`` extras (KEP-4193), which
is how a receiver ties a caller to a node. Audiences follow the apiserver: a token is
valid only for the audiences it was issued for, and a token issued without any is bound
to the apiserver's own audience, so reviewing it for another audience fails as in a
cluster (an agent's projected token must name the receiver's audience).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
NODE_NAME = "authentication.kubernetes.io/node-name"
NODE_UID = "authentication.kubernetes.io/node-uid"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@dataclass(frozen=True, slots=True)
class Identity:
    username: str
    uid: str
    groups: tuple[str, ...]
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    audiences: tuple[str, ...] = (API_AUDIENCE,)

    def user_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "username": self.username,
            "uid": self.uid,
            "groups": list(self.groups),
        }
        if self.extra:
            info["extra"] = {k: list(v) for k, v in self.extra.items()}
        return info


class TokenBook:
    """token -> Identity; safe to add to from a test thread while the server runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, Identity] = {}

    def add(
        self,
        token: str,
        *,
        node: str | None = None,
        node_uid: str | None = None,
        pod: str | None = None,
        pod_uid: str | None = None,
        namespace: str = "default",
        service_account: str = "default",
        audiences: Sequence[str] | None = None,
        username: str | None = None,
        groups: Sequence[str] | None = None,
    ) -> Identity:
        """A service-account token, pod-bound when ``node`` or ``pod`` is given (a node-bound
        token is always pod-bound: the pod defaults to ``<service_account>-<node>``).
        ``username`` (with ``groups``) instead makes a plain user token, e.g. an admin's."""
        extra: dict[str, tuple[str, ...]] = {}
        if username is None:
            username = f"system:serviceaccount:{namespace}:{service_account}"
            default_groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
            extra[CREDENTIAL_ID] = (f"JTI={uuid.uuid4()}",)
            if node and not pod:
                pod = f"{service_account}-{node}"
            if pod:
                extra[POD_NAME] = (pod,)
                extra[POD_UID] = (
                    pod_uid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{pod}")),
                )
            if node:
                extra[NODE_NAME] = (node,)
                extra[NODE_UID] = (node_uid or str(uuid.uuid5(uuid.NAMESPACE_DNS, node)),)
        else:
            default_groups = []
        identity = Identity(
            username=username,
            uid=str(uuid.uuid4()),
            groups=(*(groups if groups is not None else default_groups), "system:authenticated"),
            extra=extra,
            audiences=tuple(audiences) if audiences else (API_AUDIENCE,),
        )
        with self._lock:
            self._tokens[token] = identity
        return identity

    def remove(self, token: str) -> None:
        with self._lock:
            self._tokens.pop(token, None)

    def authenticate(
        self, token: str, audiences: Sequence[str] = ()
    ) -> tuple[Identity | None, list[str], str]:
        """(identity, granted audiences, error) for ``token`` presented to ``audiences``."""
        with self._lock:
            identity = self._tokens.get(token)
        if identity is None:
            return None, [], "[invalid bearer token, token lookup failed]"
        wanted = list(audiences) or [API_AUDIENCE]
        granted = [a for a in wanted if a in identity.audiences]
        if not granted:
            issued, target = json.dumps(list(identity.audiences)), json.dumps(wanted)
            error = f"token audiences {issued} is invalid for the target audiences {target}"
            return None, [], f"[invalid bearer token, {error}]"
        return identity, granted, ""


def review(book: TokenBook, body: Mapping[str, Any]) -> dict[str, Any]:
    """``POST tokenreviews``: the request echoed with its status filled in. A rejected
    token has no ``authenticated`` key at all (``omitempty`` on a false bool)."""
    spec = dict(body.get("spec") or {})
    identity, granted, error = book.authenticate(
        str(spec.get("token", "")), spec.get("audiences") or []
    )
    status: dict[str, Any] = {"user": {}}
    if identity is None:
        status["error"] = error
    else:
        status = {"authenticated": True, "user": identity.user_info(), "audiences": granted}
    metadata = dict(body.get("metadata") or {})
    metadata.setdefault("creationTimestamp", None)
    return {
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
