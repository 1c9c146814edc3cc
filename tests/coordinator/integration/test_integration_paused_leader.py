"""A leader process frozen (SIGSTOP) past its lease and thawed (SIGCONT) after another
replica took over writes nothing more: its lease fence stops every patch before its
elector has even run to notice. Replica a is a real ``stowage coordinator`` process with
a kubeconfig for the emulator; replica b runs in the test. Who wrote what comes from the
emulator's request log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.coordinator.integration import integration_rig as rig
from tests.coordinator.integration.conftest import Start
from tests.kit import free_port

ROOT = Path(__file__).resolve().parents[3]
NODES = ("worker-1", "worker-2")
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{rig.NAMESPACE}/leases"
TIMINGS = rig.SHORT_LEADER  # lease 2 s, renew deadline 1.5 s, retry 0.3 s


@pytest.fixture
def process() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The coordinator process a test starts: continued and killed if still there."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(10)


def launch(api: rig.RecordingKubeApi, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """``stowage coordinator`` as a user runs it, publishing every node every second
    (a heartbeat shorter than its 1 s tick), so a patch is due whenever it wakes up."""
    config = {
        "listen": f"127.0.0.1:{free_port()}",
        "kube": {"namespace": rig.NAMESPACE},
        "publisher": {"heartbeat_s": 0.5},
        "leader": {
            "lease_name": rig.LEASE,
            "lease_duration_s": TIMINGS.lease_duration_s,
            "renew_deadline_s": TIMINGS.renew_deadline_s,
            "retry_period_s": TIMINGS.retry_period_s,
        },
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    log = tmp_path / "coordinator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "coordinator", "--config",
             str(tmp_path / "config.yaml"), "--kubeconfig", str(kubeconfig),
             "--debug-listen", "127.0.0.1:0"],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
    return proc, log


def writes_by(api: rig.RecordingKubeApi, agent: str) -> list[rig.Seen]:
    """Writes by ``agent`` to anything but the Lease (and TokenReviews, which are reads)."""
    return [
        s
        for s in api.seen
        if s.agent == agent
        and s.method in ("PATCH", "PUT", "POST", "DELETE")
        and not s.path.startswith(LEASE_PATH)
        and "tokenreviews" not in s.path
    ]


async def test_a_leader_paused_past_its_lease_writes_nothing_when_it_wakes(
    api: rig.RecordingKubeApi, start: Start, tmp_path: Path, process: list[subprocess.Popen[bytes]]
) -> None:
    for node in NODES:
        api.add_node(node, capacity={"cpu": "16", "memory": "64Gi"})
    a, log = launch(api, tmp_path)
    process.append(a)

    def a_patched_twice() -> str | None:
        assert a.poll() is None, log.read_text()
        patches = [p for n in NODES for p in api.patches(n)]
        return patches[0].agent if len(patches) >= 2 * len(NODES) else None

    a_agent = await rig.eventually(a_patched_twice, "a leads and publishes", timeout_s=30.0)
    b = await start(rig.settings(leader=TIMINGS), name="b")
    await rig.eventually(lambda: b.services.synced.is_set(), "b's caches synced")
    assert not b.leading

    os.kill(a.pid, signal.SIGSTOP)
    await rig.eventually(lambda: b.leading, "b takes the lease", timeout_s=10.0)
    handover = next(
        s
        for s in api.seen
        if s.agent == b.agent and s.method == "PUT" and s.path.startswith(LEASE_PATH)
    )
    assert handover.status == 200
    before = writes_by(api, a_agent)
    assert before and all(s.at < handover.at for s in before)  # a did publish while leading

    # a wakes up with its publisher's heartbeat long due, and leading as far as it knew.
    os.kill(a.pid, signal.SIGCONT)
    await rig.eventually(
        lambda: "lost the lease: stopped leading" in log.read_text(),
        "a noticed it lost the lease",
        timeout_s=10.0,
    )
    assert [s for s in writes_by(api, a_agent) if s.at > handover.at] == []
    assert api.lease_holder() != "" and b.leading

    a.send_signal(signal.SIGTERM)
    assert a.wait(20) == 0, log.read_text()
    assert "Traceback" not in log.read_text()
