"""Slowloris attacks on a real ``stowage coordinator --standalone`` process (uvloop, the
real serving path, default settings).

* In the default suite: the coordinator starts with a soft open-file limit of 512, well
  under the attack, and 1,000 connections each hold the start of a request; a
  kube-scheduler prioritize call and an agent's report are still answered 200 within
  their clients' 2 s timeouts — the coordinator raised its limit to fit its connection
  cap rather than run out of descriptors (which reset agents' connections before).
* Opt-in (``pytest -m slow``, about 50 s): a sustained attack. 1,000 connections each send
  the start of a request and then one more header byte every few seconds, reconnecting
  whenever the coordinator closes them, for longer than three default read deadlines.
  Twice a second a prioritize call and a report must be answered within 2 s, and every
  attacking connection must be closed by the coordinator before a 60 s read on it gives
  up. The figures (latencies under attack, how long attackers held a connection) are
  printed (``-s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from common import codec
from coordinator import ingest
from tests.coordinator.extender.kubejson import pod
from tests.coordinator.integration.test_integration_standalone import free_port
from tests.kit import build_report

ROOT = Path(__file__).resolve().parents[2]
NODE = "soak-node"
ATTACK = 1000
TRICKLE_S = 3.0
"""An attacker sends one more header byte this often (well inside any idle timer)."""
ATTACK_S = 35.0
"""How long the attack lasts: three default read deadlines and then some."""
CLOSED_WITHIN_S = 60.0
CLIENT_TIMEOUT_S = 2.0


SOFT_NOFILE = 512
"""The soft open-file limit the coordinator starts with: fewer descriptors than the attack
has connections (the commonest default, 1,024, is about as many)."""


def low_soft_limit() -> None:
    """Run in the child before exec: a soft open-file limit of :data:`SOFT_NOFILE`."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_NOFILE, hard))


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A standalone coordinator with default settings, started with a soft open-file
    limit of :data:`SOFT_NOFILE`: its URL and an agent token."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    needed = 4096 + 512  # the default cap and the reserve beside it (common.listener)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"needs a hard RLIMIT_NOFILE of {needed} (it is {hard})")
    listen = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "coordinator", "--standalone", "--listen", listen,
         "--debug-listen", "127.0.0.1:0"],
        cwd=ROOT, env={**os.environ, "NODE_NAME": NODE, "TMPDIR": str(tmp_path)},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=low_soft_limit,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if found := re.search(r"--token-file (\S+)", line):
                break
        else:
            raise AssertionError("the coordinator printed no agent token")
        # Keep reading what it logs, so that a full pipe never stalls it.
        drain = threading.Thread(target=proc.stderr.read, daemon=True)
        drain.start()
        yield f"http://{listen}", Path(found[1]).read_text().strip()
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()


async def attacker(port: int, stop: asyncio.Event, lifetimes: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        began = loop.time()
        writer.write(b"POST /v1/reports HTTP/1.1\r\nHost: coordinator\r\nX-Slow: ")

        async def drip(w: asyncio.StreamWriter = writer) -> None:
            while not w.is_closing():
                await asyncio.sleep(TRICKLE_S)
                w.write(b"X")

        dripping = asyncio.create_task(drip())
        try:
            assert await asyncio.wait_for(reader.read(), CLOSED_WITHIN_S) == b""
        finally:
            dripping.cancel()
            writer.close()
        lifetimes.append(loop.time() - began)


@pytest.fixture
def room_for_the_attack() -> Iterator[None]:
    """Descriptors for the attackers' ends of the connections in this process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * ATTACK:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4 * ATTACK), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def ready(url: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        for _ in range(300):
            with contextlib.suppress(aiohttp.ClientError):
                async with s.get(f"{url}/readyz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} not ready within 30 s")


async def call(url: str, token: str, verb: str, seq: int) -> float:
    """One prioritize call or report on a new connection, answered 200 within the 2 s
    client timeout; how long it took."""
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        began = time.perf_counter()
        if verb == "prioritize":
            args = {"Pod": pod(), "Nodes": None, "NodeNames": [NODE]}
            response = await s.post(f"{url}/scheduler/prioritize", json=args)
        else:
            body = codec.encode(build_report(NODE, seq=seq, now=time.time()))
            headers = {"Content-Type": ingest.CONTENT_TYPE, "Authorization": f"Bearer {token}"}
            response = await s.post(f"{url}{ingest.REPORTS_PATH}", data=body, headers=headers)
        await response.read()
        took = time.perf_counter() - began
        assert response.status == 200, (verb, await response.text())
        return took


async def test_1000_slowloris_connections_on_a_coordinator_started_with_512_open_files(
    coordinator: tuple[str, str], room_for_the_attack: None
) -> None:
    url, token = coordinator
    await ready(url)
    port = int(url.rpartition(":")[2])
    attack = []
    try:
        for _ in range(ATTACK):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/reports HTTP/1.1\r\nHost: coordinator\r\nX-Slow: ")
            attack.append(writer)
        await call(url, token, "prioritize", 1)
        await call(url, token, "report", 1)
    finally:
        for writer in attack:
            writer.close()


@pytest.mark.slow
async def test_a_sustained_slowloris_attack_on_the_real_coordinator(
    coordinator: tuple[str, str], room_for_the_attack: None
) -> None:
    url, token = coordinator
    await ready(url)

    stop = asyncio.Event()
    lifetimes: list[float] = []
    port = int(url.rpartition(":")[2])
    attackers = [asyncio.create_task(attacker(port, stop, lifetimes)) for _ in range(ATTACK)]
    took: dict[str, list[float]] = {"prioritize": [], "report": []}
    loop = asyncio.get_running_loop()
    try:
        end = loop.time() + ATTACK_S
        seq = 0
        while loop.time() < end:
            seq += 1
            for verb, seconds in took.items():
                seconds.append(await call(url, token, verb, seq))
            await asyncio.sleep(0.5)
        stop.set()
        # Every attacker's current connection must still be closed by the coordinator.
        await asyncio.wait_for(asyncio.gather(*attackers), CLOSED_WITHIN_S + 5)
    finally:
        for task in attackers:
            task.cancel()
        await asyncio.gather(*attackers, return_exceptions=True)

    assert len(lifetimes) >= 2 * ATTACK  # the attack outlived several read deadlines
    for verb, seconds in took.items():
        print(
            f"{verb} under attack: {len(seconds)} calls, median {statistics.median(seconds):.3f}"
            f" s, max {max(seconds):.3f} s"
        )
    print(
        f"attacking connections closed by the coordinator: {len(lifetimes)},"
        f" held at most {max(lifetimes):.1f} s (median {statistics.median(lifetimes):.1f} s)"
    )
