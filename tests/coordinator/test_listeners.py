"""The coordinator's listeners as ``stowage coordinator`` builds them
(:func:`coordinator.main.build_listeners`), over real sockets on 127.0.0.1 (the slowloris
attacks on a coordinator process are in ``test_listeners_attack.py``):

* slow connections are closed at the read deadline (short here; the default is checked
  to be under the minute operators are promised);
* with ``server.extender_listen`` and a client CA, the kube-scheduler extender is served
  only there and only to callers with a client certificate, while agents keep reporting
  to the main listener with their tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
import trustme
import yaml

from cli.main import build_parser
from common import codec, listener
from common.clock import SystemClock
from common.errors import ConfigError
from common.listener import Listener
from coordinator import ingest
from coordinator import main as coordinator_main
from coordinator.auth import StaticTokens
from coordinator.config import (
    CoordinatorSettings,
    IngestSettings,
    PolicySettings,
    ServerSettings,
)
from coordinator.live import LiveCluster
from coordinator.metrics import CoordinatorMetrics
from coordinator.services import Services
from tests.coordinator.extender.kubejson import pod
from tests.kit import build_report

TOKEN = "token-of-gpu-node"
NODE = "gpu-node"
CLIENT_TIMEOUT_S = 2.0
"""Every legitimate call must be answered within this (acceptance: within 2 s)."""
WAIT_S = 10.0


def node_json(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "224", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def settings_with(**server: Any) -> CoordinatorSettings:
    return CoordinatorSettings(
        listen="127.0.0.1:0",
        policy=PolicySettings(name="most-allocated"),
        ingest=IngestSettings(auth="static", static_tokens={TOKEN: NODE}),
        server=ServerSettings(**{"debug_listen": None, **server}),  # on where asked
    )


Start = Callable[[CoordinatorSettings], Awaitable[list[Listener]]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``await start(settings)``: the coordinator's listeners over a cluster of two
    nodes, started; stopped when the test ends."""
    started: list[Listener] = []

    async def start(settings: CoordinatorSettings) -> list[Listener]:
        metrics = CoordinatorMetrics()
        cluster = LiveCluster(settings, SystemClock(), metrics)
        for name in (NODE, "other-node"):
            cluster.upsert_node(node_json(name))
        services = Services(
            settings=settings,
            clock=cluster.clock,
            metrics=metrics,
            cluster=cluster,
            authenticator=StaticTokens(settings.ingest.static_tokens),
        )
        listeners = [site for site, _ in coordinator_main.build_listeners(settings, services, None)]
        for site in listeners:
            await site.start()
            started.append(site)
        return listeners

    yield start
    for site in reversed(started):
        await site.stop()


def session(tls: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S),
        connector=aiohttp.TCPConnector(ssl=tls if tls is not None else True),
    )


async def prioritize(url: str, tls: ssl.SSLContext | None = None) -> tuple[int, Any]:
    args = {"Pod": pod(), "Nodes": None, "NodeNames": [NODE, "other-node"]}
    async with session(tls) as s, s.post(f"{url}/scheduler/prioritize", json=args) as r:
        return r.status, (await r.json() if r.status == 200 else await r.text())


async def report(url: str, tls: ssl.SSLContext | None = None) -> int:
    body = codec.encode(build_report(NODE, seq=1, now=time.time()))
    headers = {"Content-Type": ingest.CONTENT_TYPE, "Authorization": f"Bearer {TOKEN}"}
    async with (
        session(tls) as s,
        s.post(f"{url}{ingest.REPORTS_PATH}", data=body, headers=headers) as r,
    ):
        await r.read()
        return r.status


async def slow_connections(
    port: int, count: int
) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections, each having sent the start of a request it never finishes."""
    opened = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /v1/reports HTTP/1.1\r\nHost: coordinator\r\nX-Slow: ")
        opened.append((reader, writer))
    return opened


async def test_connections_that_never_finish_a_request_are_closed_at_the_read_deadline(
    start: Start,
) -> None:
    assert ServerSettings().read_timeout_s <= 60  # what operators are promised by default
    (site,) = await start(settings_with(read_timeout_s=0.5))
    attack = await slow_connections(site.port, 50)
    for reader, writer in attack:
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
        writer.close()
    assert await report(site.url) == 200


# ------------------------------------------------------------------ the extender listener


class Pki:
    """A CA, the coordinator's certificate and kube-scheduler's client certificate."""

    def __init__(self, tmp: Path) -> None:
        ca = trustme.CA()
        self.ca_file = str(tmp / "ca.pem")
        ca.cert_pem.write_to_path(self.ca_file)
        server = ca.issue_cert("127.0.0.1", "stowage-coordinator.stowage-system.svc")
        self.cert_file, self.key_file = str(tmp / "tls.crt"), str(tmp / "tls.key")
        server.cert_chain_pems[0].write_to_path(self.cert_file)
        server.private_key_pem.write_to_path(self.key_file)
        self.scheduler = ca.issue_cert("kube-scheduler")

    def client(self, with_certificate: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if with_certificate:
            self.scheduler.configure_cert(context)
        return context


def mutual_tls(pki: Pki) -> CoordinatorSettings:
    """The kube-scheduler extender on a listener of its own that asks for client
    certificates signed by ``pki``'s CA; everything else on the main listener."""
    return settings_with(
        extender_listen="127.0.0.1:0",
        tls_cert_file=pki.cert_file,
        tls_key_file=pki.key_file,
        tls_client_ca_file=pki.ca_file,
    )


async def test_mutual_tls_guards_the_kube_scheduler_extender_on_its_own_listener(
    start: Start, tmp_path: Path
) -> None:
    pki = Pki(tmp_path)
    main, extender = await start(mutual_tls(pki))
    scheduler, anyone = pki.client(True), pki.client(False)
    main_url = f"http://127.0.0.1:{main.port}"
    extender_url = f"https://127.0.0.1:{extender.port}"

    status, scores = await prioritize(extender_url, scheduler)
    assert status == 200
    assert {entry["Host"] for entry in scores} == {NODE, "other-node"}
    with pytest.raises(aiohttp.ClientError):  # the handshake is refused
        await prioritize(extender_url, anyone)

    # Agents need no certificate: they report to the main listener (plain HTTP, token).
    assert await report(main_url) == 200
    assert (await prioritize(main_url))[0] == 404
    assert await report(extender_url, scheduler) == 404


async def test_volcano_calls_on_the_plain_listener_cannot_fill_a_node_for_kube_scheduler(
    start: Start, tmp_path: Path
) -> None:
    """The attack: anyone who reaches the main listener asks Volcano's prioritize about a
    made-up 8-GPU task offering only gpu-node, which would then count as assumed there.
    kube-scheduler, behind mutual TLS, must still be told that gpu-node takes a real
    8-GPU pod."""
    pki = Pki(tmp_path)
    main, extender = await start(mutual_tls(pki))
    made_up = {
        "task": {
            "UID": "made-up",
            "Pod": pod("1", "1Gi", gpus=8, name="made-up", uid="made-up"),
        },
        "nodes": [{"Name": NODE}],
    }
    async with session() as s, s.post(f"http://127.0.0.1:{main.port}/volcano/prioritize",
                                      json=made_up) as r:  # fmt: skip
        assert (r.status, (await r.json())["nodeScore"]) == (200, {NODE: 100})
    real = {"Pod": pod("1", "1Gi", gpus=8, name="real", uid="real"), "NodeNames": [NODE]}
    async with (
        session(pki.client(True)) as s,
        s.post(f"https://127.0.0.1:{extender.port}/scheduler/filter", json=real) as r,
    ):
        assert r.status == 200
        reply = await r.json()
    assert (reply["NodeNames"], reply["FailedNodes"]) == ([NODE], {})


async def test_without_an_extender_listener_one_listener_serves_everything(
    start: Start,
) -> None:
    (site,) = await start(settings_with())
    assert (await prioritize(site.url))[0] == 200
    assert await report(site.url) == 200


async def test_without_an_extender_listener_the_main_one_serves_tls(
    start: Start, tmp_path: Path
) -> None:
    pki = Pki(tmp_path)
    (site,) = await start(settings_with(tls_cert_file=pki.cert_file, tls_key_file=pki.key_file))
    url = f"https://127.0.0.1:{site.port}"
    assert (await prioritize(url, pki.client(False)))[0] == 200
    assert await report(url, pki.client(False)) == 200


# ------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"read_timeout_s": 0}, "server.read_timeout_s"),
        ({"keepalive_timeout_s": -1}, "server.keepalive_timeout_s"),
        ({"max_connections": 0}, "server.max_connections"),
        ({"extender_listen": "8443"}, "server.extender_listen"),
        ({"tls_cert_file": "tls.crt"}, "server.tls_cert_file and server.tls_key_file"),
        ({"tls_key_file": "tls.key"}, "server.tls_cert_file and server.tls_key_file"),
        (
            {"tls_cert_file": "c", "tls_key_file": "k", "tls_client_ca_file": "ca"},
            "server.tls_client_ca_file: needs server.extender_listen",
        ),
        (
            {"extender_listen": "0.0.0.0:8443", "tls_client_ca_file": "ca"},
            "server.tls_client_ca_file: needs server.extender_listen and server.tls_cert_file",
        ),
    ],
)
def test_server_settings_that_cannot_work_name_the_key(
    server: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ServerSettings(**server)


def test_command_line_flags_set_the_listeners() -> None:
    args = build_parser().parse_args(
        [
            "coordinator",
            "--listen=127.0.0.1:9000",
            "--extender-listen=0.0.0.0:8443",
            "--tls-cert-file=/tls/tls.crt",
            "--tls-key-file=/tls/tls.key",
            "--tls-client-ca-file=/tls/ca.crt",
        ]
    )
    settings = coordinator_main.settings_from(args)
    assert settings.listen == "127.0.0.1:9000"
    assert dataclasses.asdict(settings.server) == {
        **dataclasses.asdict(ServerSettings()),
        "extender_listen": "0.0.0.0:8443",
        "tls_cert_file": "/tls/tls.crt",
        "tls_key_file": "/tls/tls.key",
        "tls_client_ca_file": "/tls/ca.crt",
    }
    bare = coordinator_main.settings_from(
        argparse.Namespace(config=None, listen=None, kubeconfig=None)
    )
    assert bare.server == ServerSettings()


def test_a_client_ca_without_an_extender_listener_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(
        ["coordinator", "--tls-cert-file=c", "--tls-key-file=k", "--tls-client-ca-file=ca"]
    )
    assert coordinator_main.main(args) == 2
    assert "server.tls_client_ca_file" in capsys.readouterr().err


@pytest.mark.parametrize(("extender_listen", "each"), [(None, 300), ("127.0.0.1:0", 150)])
def test_the_cap_is_lowered_to_what_the_open_file_limit_fits(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    extender_listen: str | None,
    each: int,
) -> None:
    """With a hard open-file limit that fits only 300 connections, the listeners share
    them, with a warning, rather than run out of descriptors for the API server."""
    asked: list[int] = []

    def fits(wanted: int) -> int:
        asked.append(wanted)
        return 300

    monkeypatch.setattr(listener, "fit_connections", fits)
    settings = settings_with(max_connections=4096, extender_listen=extender_listen)
    cluster = LiveCluster(settings, SystemClock(), CoordinatorMetrics())
    services = Services(
        settings=settings,
        clock=cluster.clock,
        metrics=cluster.metrics,
        cluster=cluster,
        authenticator=StaticTokens({}),
    )
    built = coordinator_main.build_listeners(settings, services, None)
    assert asked == [4096 * len(built)]
    assert [site.limits.max_connections for site, _ in built] == [each] * len(built)
    assert f"fits {each} connections per listener, not max_connections=4096" in caplog.text


# ------------------------------------------------------------------ the manifests

REPO = Path(__file__).resolve().parents[2]


def test_the_scheduler_sample_calls_the_extender_listener_of_the_mtls_overlay(
    tmp_path: Path,
) -> None:
    """kube-scheduler's sample configuration presents a client certificate to the port
    and name the overlay's coordinator serves mutual TLS on, with files from its Secret."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("needs kubectl (kustomize) to build the overlay")
    sample = yaml.safe_load((REPO / "daemonset/scheduler/kube-scheduler-config.yaml").read_text())
    (extender,) = sample["extenders"]
    url = urlsplit(extender["urlPrefix"])
    assert (url.scheme, extender["enableHTTPS"]) == ("https", True)
    tls = extender["tlsConfig"]
    assert {"caFile", "certFile", "keyFile"} <= set(tls)
    assert tls["serverName"] == url.hostname

    built = subprocess.run(
        [kubectl, "kustomize", str(REPO / "daemonset/overlays/extender-mtls")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    objects = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(built)}
    service = objects[("Service", "stowage-coordinator")]
    assert url.hostname == f"stowage-coordinator.{service['metadata']['namespace']}.svc"
    (port,) = [p for p in service["spec"]["ports"] if p["port"] == url.port]

    pod = objects[("Deployment", "stowage-coordinator")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (named,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    config = tmp_path / "config.yaml"  # the ConfigMap's file, where the args expect it
    config.write_text(objects[("ConfigMap", "stowage-coordinator")]["data"]["config.yaml"])
    args = [f"--config={config}" if a.startswith("--config=") else a for a in container["args"]]
    settings = coordinator_main.settings_from(build_parser().parse_args(args))
    assert settings.server.extender_listen == f"0.0.0.0:{named['containerPort']}"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tls"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["optional"] is False
    for path in (
        settings.server.tls_cert_file,
        settings.server.tls_key_file,
        settings.server.tls_client_ca_file,
    ):
        assert path is not None
        assert path.startswith(mount["mountPath"] + "/")
