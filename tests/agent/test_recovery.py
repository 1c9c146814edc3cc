"""Every agent start restores what a killed predecessor left, on the real cgroup v1 cpu
controller (tests/realcgroup.py): with or without ``--enforce``, in loop mode and with
``--once``, and never over a journal another live agent holds."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent import recovery
from agent.enforcer import BePod, Enforcer
from agent.hostpaths import HostPaths
from agent.settings import AgentSettings, EnforcerSettings
from tests.clirun import REPO, stowage
from tests.hosts import FakeClock
from tests.kit import free_port
from tests.realcgroup import RealCgroupTree

BE_UID = "bebebebe-0000-4000-8000-000000000001"
RESTORED = "enforcer: restored"


def _cut_and_killed(tree: RealCgroupTree, journal: Path) -> tuple[Path, str]:
    """A predecessor that throttled BE and died without restoring (as SIGKILL leaves it:
    the quota cut, the journal on disk). The quota file and its original value."""
    tree.pod(BE_UID, "BestEffort")
    quota = tree.layout.pods_dir("besteffort", "cpu") / "cpu.cfs_quota_us"
    original = quota.read_text().strip()
    killed = Enforcer(tree.layout, journal, FakeClock())
    assert killed.apply(400, [BePod(BE_UID, "BestEffort", 0)]).error is None
    assert quota.read_text().strip() != original and journal.exists()
    return quota, original


def _settings(tree: RealCgroupTree, journal: Path, *, enforce: bool) -> AgentSettings:
    return AgentSettings(
        paths=HostPaths(proc=Path("/proc"), sys=Path("/sys"), cgroup=tree.root),
        node_name="node-a",
        enforcer=EnforcerSettings(enabled=enforce, journal=str(journal)),
    )


def _agent_args(tree: RealCgroupTree, journal: Path) -> list[str]:
    return [
        "agent",
        "--node-name",
        "node-a",
        "--cgroup-root",
        str(tree.root),
        "--enforcer-journal",
        str(journal),
        "--pods-source",
        "none",
        "--collectors",
        "psi",
    ]


def _wait_for_line(proc: subprocess.Popen[str], text: str, limit_s: float = 60.0) -> str:
    """Read the process's stderr until a line holds ``text``; fail if it exits or
    ``limit_s`` passes first."""
    assert proc.stderr is not None
    deadline = time.monotonic() + limit_s
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stderr], [], [], left)
        if not ready:
            break
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return line
    pytest.fail(f"no {text!r} from the agent within {limit_s} s; it said: {''.join(seen)}")


def test_a_loop_agent_started_without_enforce_restores_and_clears_the_journal(
    real_cgroup_tree: RealCgroupTree,
):
    tree = real_cgroup_tree
    journal = tree.root.parent / "state" / "enforcer.json"
    quota, original = _cut_and_killed(tree, journal)
    coordinator = f"http://127.0.0.1:{free_port()}"
    agent = subprocess.Popen(
        [sys.executable, "-m", "cli.main", *_agent_args(tree, journal)]
        + ["--coordinator", coordinator, "--interval", "60"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert "restored 2 cgroup values" in _wait_for_line(agent, RESTORED)
        assert quota.read_text().strip() == original
        assert not journal.exists()
        assert agent.poll() is None  # and it carries on, reporting, without enforcing
    finally:
        agent.kill()
        agent.wait()
        if agent.stderr is not None:
            agent.stderr.close()


def test_once_restores_too(real_cgroup_tree: RealCgroupTree):
    tree = real_cgroup_tree
    journal = tree.root.parent / "state" / "enforcer.json"
    quota, original = _cut_and_killed(tree, journal)
    result = stowage(*_agent_args(tree, journal), "--once", "--sample-window", "0")
    assert result.returncode == 0, result.stderr
    assert RESTORED in result.stderr
    assert quota.read_text().strip() == original
    assert not journal.exists()


def test_with_enforce_the_restored_enforcer_stays_and_holds_the_journal(
    real_cgroup_tree: RealCgroupTree,
):
    tree = real_cgroup_tree
    journal = tree.root.parent / "state" / "enforcer.json"
    quota, original = _cut_and_killed(tree, journal)
    enforcer = recovery.restore_at_start(
        _settings(tree, journal, enforce=True), FakeClock(), enforce=True
    )
    assert enforcer is not None
    try:
        assert quota.read_text().strip() == original
        assert enforcer.current().be_cpu_quota_m is None
        second = recovery.restore_at_start(
            _settings(tree, journal, enforce=True), FakeClock(), enforce=True
        )
        assert second is None  # one enforcer per node
    finally:
        enforcer.close()


def test_a_journal_a_live_agent_holds_is_left_to_it(real_cgroup_tree: RealCgroupTree):
    """A hand-run agent beside the DaemonSet's must not undo the live agent's throttle."""
    tree = real_cgroup_tree
    journal = tree.root.parent / "state" / "enforcer.json"
    tree.pod(BE_UID, "BestEffort")
    quota = tree.layout.pods_dir("besteffort", "cpu") / "cpu.cfs_quota_us"
    original = quota.read_text().strip()
    live = Enforcer(tree.layout, journal, FakeClock(), exclusive=True)
    try:
        live.apply(400, [BePod(BE_UID, "BestEffort", 0)])
        cut = quota.read_text().strip()
        settings = _settings(tree, journal, enforce=False)
        assert recovery.restore_at_start(settings, FakeClock(), enforce=False) is None
        assert quota.read_text().strip() == cut != original
        assert journal.exists() and live.pending()
    finally:
        live.close()
    assert recovery.restore_at_start(settings, FakeClock(), enforce=False) is None
    assert quota.read_text().strip() == original  # once it is gone, the next start restores
    enforcing = recovery.restore_at_start(settings, FakeClock(), enforce=True)
    assert enforcing is not None  # and gives the journal up again, not enforcing
    enforcing.close()


def test_without_a_journal_or_enforce_a_start_creates_nothing(real_cgroup_tree: RealCgroupTree):
    tree = real_cgroup_tree
    journal = tree.root.parent / "state" / "enforcer.json"
    settings = _settings(tree, journal, enforce=False)
    assert recovery.restore_at_start(settings, FakeClock(), enforce=False) is None
    assert not journal.parent.exists()
