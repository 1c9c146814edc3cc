"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-controller-manager
and kwok (the kubelets of API-only nodes), with kube-scheduler started on demand.

Everything it makes lives in one directory: a throwaway certificate authority and the API
server's certificate, the service-account signing key pair, a token file, kubeconfigs, etcd's
data and every program's log. Authorization is RBAC, as in a cluster, so what a component
may do is what its ClusterRoles grant: the admin is in ``system:masters``; the controller
manager and the scheduler run as their own users with the bootstrap roles the API server
creates for them; kwok (standing in for every kubelet) acts as the admin.

Stopping takes everything down in the reverse order of starting (the API server before etcd,
or it waits on SIGTERM for a store that is gone), and every program is started so that it
dies with this process if that is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import secrets
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trustme
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from hack.cluster.build import ensure_built
from hack.ports import free_port

STARTUP_S: Final = 90.0
"""Longest wait for one program to become ready (the API server's first start on a busy
two-core machine takes seconds; the controller manager's first ServiceAccount a few more)."""
STOP_S: Final = 15.0
SERVICE_ACCOUNT_ISSUER: Final = "https://kubernetes.default.svc.cluster.local"
_PR_SET_PDEATHSIG: Final = 1


PATHS: Final = {
    "Namespace": "/api/v1/namespaces/{name}",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts/{name}",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}",
}
"""Where :meth:`ControlPlane.apply` writes each kind it knows (what the shipped RBAC has)."""


class ControlPlaneError(RuntimeError):
    """A program of the control plane did not start; the message carries its log's tail."""


@dataclass
class Program:
    """One running program of the control plane and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str = ""
    """Where it serves (a kube-scheduler's secure port), when it does."""

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout_s: float = STOP_S) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; a stopped
        (SIGSTOP) process is continued first so it can act on the SIGTERM."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class ControlPlane:
    """A started control plane: where its API is, how to authenticate, what runs."""

    root: Path
    bin_dir: Path
    server: str
    ca_file: Path
    ca: trustme.CA
    admin_token: str
    kubeconfig: Path
    etcd_url: str = ""
    _programs: list[Program] = field(default_factory=list)

    # -- clients ------------------------------------------------------------------------

    def write_kubeconfig(self, path: Path, token: str, user: str = "user") -> Path:
        """A kubeconfig for this API server that authenticates with ``token`` (the API
        server's certificate is checked against the throwaway CA)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "stowage-real",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {"name": "stowage-real", "context": {"cluster": "stowage-real", "user": user}}
            ],
            "current-context": "stowage-real",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        timeout_s: float = 30.0,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        """One call to the API server (admin unless ``token``): the status and the body,
        decoded from JSON where it is JSON (``/readyz`` answers plain text)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {token or self.admin_token}",
                "Content-Type": content_type,
            },
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, context=context, timeout=timeout_s) as response:
                return response.status, _decoded(response.read())
        except urllib.error.HTTPError as e:
            return e.code, _decoded(e.read())

    def apply(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Server-side apply (``kubectl apply --server-side``) of objects of the kinds in
        :data:`PATHS`; :class:`ControlPlaneError` naming the object the server refused."""
        for obj in objects:
            meta = obj["metadata"]
            path = PATHS[obj["kind"]].format(ns=meta.get("namespace", ""), name=meta["name"])
            status, answer = self.request(
                "PATCH",
                f"{path}?fieldManager=stowage&force=true",
                obj,
                content_type="application/apply-patch+yaml",
            )
            if status >= 300:
                raise ControlPlaneError(f"apply {obj['kind']} {meta['name']}: {status} {answer}")

    def token(
        self,
        service_account: str,
        namespace: str,
        audiences: Sequence[str] = (),
        bound_pod: Mapping[str, Any] | None = None,
        seconds: int = 3600,
    ) -> str:
        """A ServiceAccount token from the TokenRequest API (``kubectl create token``),
        bound to ``bound_pod`` (a Pod object) if given: the API server then names the
        pod's node in it."""
        spec: dict[str, Any] = {"audiences": list(audiences), "expirationSeconds": seconds}
        if bound_pod is not None:
            meta = bound_pod["metadata"]
            spec["boundObjectRef"] = {
                "apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]
            }  # fmt: skip
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
        status, answer = self.request("POST", path, {"spec": spec})
        if status >= 300:
            raise ControlPlaneError(
                f"TokenRequest for {namespace}/{service_account}: {status} {answer}"
            )
        return str(answer["status"]["token"])

    def kubeconfig_for(self, service_account: str, namespace: str, path: Path) -> Path:
        """A kubeconfig authenticating as the ServiceAccount (a TokenRequest token with the
        API server's own audience, as its pod's projected token would be)."""
        token = self.token(service_account, namespace)
        return self.write_kubeconfig(
            path, token, f"system:serviceaccount:{namespace}:{service_account}"
        )

    # -- programs -----------------------------------------------------------------------

    def start(
        self,
        name: str,
        argv: Sequence[str],
        ready: Callable[[], bool] | None = None,
        what: str = "",
        cwd: Path | None = None,
    ) -> Program:
        """Start one program (a binary of :attr:`bin_dir` or any command) with its log in
        ``root/logs``, run in ``cwd`` (default ``root``); with ``ready``, wait until it returns
        true. Stopped with the rest."""
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        log = logs / f"{name}.log"
        command = list(argv)
        if (self.bin_dir / command[0]).is_file():
            command[0] = str(self.bin_dir / command[0])
        with log.open("ab") as sink:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                cwd=cwd or self.root,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        program = Program(name, process, log)
        self._programs.append(program)
        if ready is not None:
            wait_until(ready, what or f"{name} ready", program)
        return program

    def start_scheduler(
        self,
        config: Mapping[str, Any],
        name: str = "kube-scheduler",
        kubeconfig: Path | None = None,
    ) -> Program:
        """Start kube-scheduler with ``config`` (a KubeSchedulerConfiguration as a mapping)
        and wait until it serves ``/readyz``. It runs as ``kubeconfig``'s identity (default:
        the ``system:kube-scheduler`` user), set as its ``clientConnection.kubeconfig``."""
        config = dict(config)
        kubeconfig = kubeconfig or self.root / "kube-scheduler.kubeconfig"
        config["clientConnection"] = {
            **config.get("clientConnection", {}),
            "kubeconfig": str(kubeconfig),
        }
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        path = self.root / f"{name}-{port}.yaml"
        path.write_text(yaml.safe_dump(config))
        program = self.start(
            f"{name}-{port}",
            [
                "kube-scheduler",
                f"--config={path}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
            ],
            ready=lambda: _https_ok(url + "/readyz"),
        )
        program.url = url
        return program

    def stop(self) -> None:
        """Stop every program, the last started first (the API server before etcd)."""
        while self._programs:
            self._programs.pop().stop()


def wait_until(
    check: Callable[[], bool],
    what: str,
    program: Program | None = None,
    timeout_s: float = STARTUP_S,
) -> None:
    """Poll ``check`` until it is true; :class:`ControlPlaneError` (with ``program``'s log)
    if ``program`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if program is not None and program.process.poll() is not None:
            raise ControlPlaneError(
                f"{program.name} exited ({program.process.returncode}) before {what}:\n"
                + program.tail()
            )
        try:
            if check():
                return
        except (OSError, ValueError):
            pass  # not listening yet, or a partial answer: try again
        if time.monotonic() > deadline:
            tail = f":\n{program.tail()}" if program else ""
            raise ControlPlaneError(f"not within {timeout_s:g} s: {what}{tail}")
        time.sleep(0.1)


@contextlib.contextmanager
def running(root: Path, bin_dir: Path | None = None, kwok: bool = True) -> Iterator[ControlPlane]:
    """Start etcd, kube-apiserver, kube-controller-manager and (with ``kwok``) kwok with all
    their files under ``root``; yield the :class:`ControlPlane` once a new namespace gets its
    ``default`` ServiceAccount; stop everything on the way out."""
    bin_dir = bin_dir or ensure_built()
    root.mkdir(parents=True, exist_ok=True)
    tokens = {
        user: secrets.token_hex(16)
        for user in ("admin", "kube-controller-manager", "kube-scheduler")
    }
    ca = trustme.CA(organization_name="stowage throwaway CA")
    files = _write_credentials(root, ca, tokens)
    api_port = free_port()
    plane = ControlPlane(
        root=root,
        bin_dir=bin_dir,
        server=f"https://127.0.0.1:{api_port}",
        ca_file=files["ca"],
        ca=ca,
        admin_token=tokens["admin"],
        kubeconfig=root / "admin.kubeconfig",
    )
    plane.write_kubeconfig(plane.kubeconfig, tokens["admin"], "admin")
    for user in ("kube-controller-manager", "kube-scheduler"):
        plane.write_kubeconfig(root / f"{user}.kubeconfig", tokens[user], f"system:{user}")
    try:
        _start_etcd(plane)
        _start_apiserver(plane, api_port, files)
        _start_controller_manager(plane, files)
        if kwok:
            _start_kwok(plane)
        yield plane
    finally:
        plane.stop()


def _write_credentials(root: Path, ca: trustme.CA, tokens: Mapping[str, str]) -> dict[str, Path]:
    files = {
        name: root / name
        for name in ("ca.crt", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub", "tokens.csv")
    }
    ca.cert_pem.write_to_path(str(files["ca.crt"]))
    serving = ca.issue_cert("127.0.0.1", "localhost", "kubernetes", "kubernetes.default.svc")
    serving.cert_chain_pems[0].write_to_path(str(files["apiserver.crt"]))
    serving.private_key_pem.write_to_path(str(files["apiserver.key"]))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files["sa.key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    files["sa.pub"].write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    # token,user,uid,"groups": the admin in system:masters, the components as the users
    # their bootstrap ClusterRoles are bound to.
    lines = []
    for user, token in tokens.items():
        name, groups = ("admin", "system:masters") if user == "admin" else (f"system:{user}", "")
        lines.append(f'{token},{name},uid-{user},"{groups}"\n')
    files["tokens.csv"].write_text("".join(lines))
    for path in files.values():
        path.chmod(0o600)
    files["ca"] = files["ca.crt"]
    return files


def _start_etcd(plane: ControlPlane) -> None:
    client, peer = free_port(), free_port()
    plane.etcd_url = f"http://127.0.0.1:{client}"
    plane.start(
        "etcd",
        [
            "etcd",
            "--name=default",
            f"--data-dir={plane.root / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            "--log-level=warn",
            # A test cluster lost with its directory: no fsync per write keeps a small disk fast.
            "--unsafe-no-fsync",
        ],
        ready=lambda: _http_ok(f"http://127.0.0.1:{client}/health"),
    )


def _start_apiserver(plane: ControlPlane, port: int, files: Mapping[str, Path]) -> None:
    cert_dir = plane.root / "apiserver"
    cert_dir.mkdir(exist_ok=True)
    plane.start(
        "kube-apiserver",
        [
            "kube-apiserver",
            f"--etcd-servers={plane.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # No Endpoints for the kubernetes Service: it would need a routable address,
            # and nothing here reaches the API server through a Service.
            "--endpoint-reconciler-type=none",
            f"--secure-port={port}",
            f"--cert-dir={cert_dir}",
            f"--tls-cert-file={files['apiserver.crt']}",
            f"--tls-private-key-file={files['apiserver.key']}",
            f"--client-ca-file={files['ca.crt']}",
            f"--token-auth-file={files['tokens.csv']}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={files['sa.pub']}",
            f"--service-account-signing-key-file={files['sa.key']}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--profiling=false",
        ],
        ready=lambda: plane.request("GET", "/readyz", timeout_s=2)[0] == 200,
        what="kube-apiserver /readyz",
    )


def _start_controller_manager(plane: ControlPlane, files: Mapping[str, Path]) -> None:
    kubeconfig = plane.root / "kube-controller-manager.kubeconfig"
    plane.start(
        "kube-controller-manager",
        [
            "kube-controller-manager",
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            # Each controller with its own ServiceAccount's token, as kubeadm runs it: the
            # controller manager's own user may only mint those.
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            f"--service-account-private-key-file={files['sa.key']}",
            f"--root-ca-file={files['ca.crt']}",
            "--controllers=*,-nodeipam",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
        ],
        ready=lambda: (
            plane.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200
        ),
        what="the default ServiceAccount (the controller manager's ServiceAccount controller)",
    )


def _start_kwok(plane: ControlPlane) -> None:
    stages = plane.bin_dir / "kwok-stages.yaml"
    port = free_port()
    plane.start(
        "kwok",
        [
            "kwok",
            f"--kubeconfig={plane.kubeconfig}",
            "--manage-all-nodes=true",
            f"--config={stages}",
            f"--server-address=127.0.0.1:{port}",
            "--cidr=10.128.0.0/10",
            "--node-ip=127.0.0.1",
            # Node Leases renewed as a kubelet does (its default, 40 s): without them the
            # node lifecycle controller would mark the nodes NotReady and evict their pods.
            "--node-lease-duration-seconds=40",
        ],
        ready=lambda: _http_ok(f"http://127.0.0.1:{port}/healthz"),
    )


def _decoded(payload: bytes) -> Any:
    try:
        return json.loads(payload or b"null")
    except ValueError:
        return payload.decode(errors="replace")


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def scrape(self_signed_url: str, token: str) -> str:
    """A component's ``/metrics`` (its certificate is its own, self-signed; the token's
    user must be allowed ``get`` on ``/metrics``)."""
    request = urllib.request.Request(
        self_signed_url + "/metrics", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(request, timeout=10, context=_self_signed()) as response:
        return str(response.read().decode())


def _https_ok(url: str) -> bool:
    """A component's own self-signed /readyz: only whether it answers 200 matters."""
    with urllib.request.urlopen(url, timeout=2, context=_self_signed()) as response:
        return bool(response.status == 200)


def _self_signed() -> ssl.SSLContext:
    """TLS to a component's own certificate, which it made for itself at start and no CA
    signed: encrypted, not verified (what is read is its readiness and its metrics)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies, so a killed test run leaves
    no control plane behind. (Linux ties this to the thread that started the child: start
    programs from a thread that outlives them, as the fixture and the CLI do.)"""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
