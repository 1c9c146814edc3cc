"""Applying the best-effort CPU quota to the node's cgroups, and putting everything back.

What is written, by cgroup version (the v1 files are those of the ``cpu`` controller, which
is also the one that limits on *hybrid* hosts: their cgroup2 tree has no ``cpu`` controller
enabled and only carries PSI files):

=======  =======================================  =========================================
cgroup   quota (while a quota applies)            weight (while a quota applies)
=======  =======================================  =========================================
v1       ``cpu.cfs_quota_us`` = m × period / 1000  ``cpu.shares`` = 2
v2       ``cpu.max`` = ``"<m × period / 1000> <period>"``  ``cpu.weight`` = 1
=======  =======================================  =========================================

The period is the cgroup's own (``cpu.cfs_period_us``, or the second field of ``cpu.max``;
kubelet leaves 100 ms); it is never written. Shares 2 / weight 1 is how kubelet already
runs its BestEffort QoS cgroup (``MinShares``; 1 is the weight runc and crun derive from 2
shares) and how the seed runs BE pods; the enforcer sets it on each cgroup it throttles only
while a quota is applied, so a Burstable BE pod keeps its request-derived weight otherwise.

Where (layout names in :mod:`agent.cgroups`):

- the BestEffort QoS cgroup (``kubepods/besteffort``, ``kubepods-besteffort.slice``) when
  every BE pod is a BestEffort pod *and* every pod cgroup under it is a BE pod's, so the
  quota binds the whole class at once and no pod left out of ``be_pods`` (a system pod) is
  throttled with it;
- else each BE pod's own cgroup, the quota shared in proportion to CPU requests. A pod
  without a request weighs 2 m, the millicore equivalent of kubelet's minimum 2 shares, and
  no pod gets less than the kernel's minimum of 1 ms per period (so the pods' quotas may
  add up to slightly more than the total when many are tiny).

Which pods are BE is :mod:`agent.colocation`'s to decide (by :mod:`common.qos`); the
enforcer itself still touches only BestEffort and Burstable pods, whose cgroups sit in the
besteffort and burstable trees: a Guaranteed pod's (directly under kubepods) is never
written, whoever asks.

Kernel facts relied on:

- A v1 cgroup's quota/period may not exceed its parent's, checked over the whole subtree on
  every write (``tg_cfs_schedulable_down``: ``EINVAL``); v2 takes the minimum instead. So on
  v1 any descendant (a container with a CPU limit) whose limit is above the new quota is
  lowered to it too, writes that lower a quota go bottom-up and writes that raise one go
  top-down, whichever order a previous apply left things in.
- Quota below 1000 µs is refused (``EINVAL``); ``-1`` (v1) or ``max`` (v2) means none.
- Kubelet does not write a quota on QoS cgroups, but re-writes their ``cpu.shares`` about
  once a minute; the enforcer re-applies every call, idempotently (a file already holding
  its value is not written).

Safety: every value overwritten is journalled (:mod:`agent.journal`) before the first write
to its file, each write is read back, and :meth:`Enforcer.restore_all` (TTL lapsed,
SIGTERM) or :meth:`Enforcer.recover` (start-up after a crash) put every original back. No
file is written unless its resolved real path lies below the layout's kubepods directory
and its name is one of the four above; pod UIDs must be hex digits and dashes.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.cgroups import CgroupLayout
from agent.journal import Journal, JournalError
from common.clock import Clock
from common.schema import Enforcement

log = logging.getLogger(__name__)

MIN_QUOTA_US: Final = 1000
"""The kernel's smallest CFS quota (``cpu.cfs_quota_us``/``cpu.max``)."""
BE_SHARES: Final = 2
BE_WEIGHT: Final = 1
ZERO_REQUEST_M: Final = 2
"""What a pod without a CPU request weighs when the quota is shared (kubelet's 2 shares)."""
SOURCES: Final = ("coordinator", "local")
_WRITABLE: Final = frozenset({"cpu.cfs_quota_us", "cpu.shares", "cpu.max", "cpu.weight"})
_QUOTA_FILES: Final = frozenset({"cpu.cfs_quota_us", "cpu.max"})
_MAX_DEPTH: Final = 4
"""How deep below a throttled cgroup descendants are clamped (pod → container is 1)."""
_ERROR_CHARS: Final = 4000
_THROTTLED_CLASSES: Final = frozenset({"BestEffort", "Burstable"})
"""QoS classes whose pods the enforcer may throttle (their cgroups' QoS trees)."""


class RefusedPath(Exception):
    """A write the enforcer will not make: outside the kubepods tree, or not a CPU file."""


@dataclass(frozen=True, slots=True)
class BePod:
    """A best-effort pod of this node, as the directive names it and the pods section knows it."""

    uid: str
    qos_class: str
    """Kubernetes QoS class: where kubelet put its cgroup (Guaranteed, Burstable, BestEffort)."""
    cpu_request_m: int


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome of one apply or restore."""

    quota_m: int | None
    """The quota in force after the call (None: node defaults)."""
    mode: str
    """``parent`` (the BestEffort QoS cgroup), ``pods`` (each BE pod's cgroup) or ``none``."""
    targets: tuple[str, ...]
    """The throttled cgroups, relative to the kubepods directory."""
    written: int
    """Files written by this call (0 when everything already held its value)."""
    missing: tuple[str, ...] = ()
    """UIDs of BE pods with no cgroup on this node (not started yet, or gone)."""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Write:
    path: Path
    value: str


class Enforcer:
    """Applies, verifies, journals and restores the BE CPU quota on one node.

    Thread-safe: the agent's report loop and its fast path may call it concurrently.
    ``exclusive`` claims the journal first (:meth:`agent.journal.Journal.claim`; raising
    JournalBusyError or JournalError) and holds it until :meth:`close`: what the agent
    does; tests of the enforcer alone leave it off.
    """

    def __init__(
        self, layout: CgroupLayout, journal_path: Path, clock: Clock, *, exclusive: bool = False
    ) -> None:
        self.layout = layout
        """The pods tree it writes in."""
        self._tree = layout.pods_dir(None, "cpu")
        self._v2 = layout.version == 2
        self._journal = Journal(journal_path)
        if exclusive:
            self._journal.claim()
        self._clock = clock
        self._lock = threading.Lock()
        self._quota_m: int | None = None
        self._source = "default"
        self._applied_at: float | None = None
        self._local_actions = 0
        self._error: str | None = None
        try:
            self._journal.load()
        except JournalError as e:
            aside = self._journal.set_aside()
            self._error = f"{e}; moved to {aside.name}, its values cannot be restored"
            log.error("enforcer: %s", self._error)

    def apply(
        self, quota_m: int | None, be_pods: Sequence[BePod], source: str = "coordinator"
    ) -> Applied:
        """Throttle the BE pods to ``quota_m`` millicores in all (None: restore defaults).

        Idempotent; failures are returned (and kept for :meth:`current`), not raised, so a
        pod that vanished mid-write cannot stop the agent's loop.
        """
        if source not in SOURCES:
            raise ValueError(f"source {source!r}: not one of {SOURCES}")
        if quota_m is None:
            return self.restore_all()
        if isinstance(quota_m, bool) or not isinstance(quota_m, int) or quota_m <= 0:
            raise ValueError(f"quota_m {quota_m!r}: must be a positive number of millicores")
        with self._lock:
            mode, targets, missing, problems = self._targets(be_pods)
            plan = self._plan(quota_m, targets, problems) if targets else {}
            written = self._converge(plan, problems)
            if targets:
                if (quota_m, source) != (self._quota_m, self._source):
                    self._applied_at = self._clock.wall()
                    if source == "local" and (self._quota_m is None or quota_m < self._quota_m):
                        self._local_actions += 1
                self._quota_m, self._source = quota_m, source
            else:
                self._quota_m, self._source, self._applied_at = None, "default", None
            error = self._note(problems)
            return Applied(
                self._quota_m if targets else None,
                mode if targets else "none",
                tuple(str(t.relative_to(self._tree)) for t, _ in targets),
                written,
                tuple(missing),
                error,
            )

    def restore_all(self) -> Applied:
        """Put back every value this enforcer (or a crashed predecessor) changed."""
        with self._lock:
            problems: list[str] = []
            written = self._converge({}, problems)
            self._quota_m, self._source, self._applied_at = None, "default", None
            return Applied(None, "none", (), written, (), self._note(problems))

    def recover(self) -> Applied:
        """At start-up: restore whatever the journal says a previous run left changed."""
        left = len(self._journal.originals())
        if left:
            log.warning("enforcer: restoring %d cgroup values left by a previous run", left)
        return self.restore_all()

    def close(self) -> None:
        """Give the journal up (the values stay as they are: restore first)."""
        self._journal.release()

    def current(self) -> Enforcement:
        """What is applied now, for the report."""
        with self._lock:
            return Enforcement(
                be_cpu_quota_m=self._quota_m,
                source=self._source,
                applied_at=self._applied_at,
                local_actions=self._local_actions,
                error=self._error,
            )

    def pending(self) -> dict[str, str]:
        """The journal: original values of files changed and not yet restored, by path."""
        return self._journal.originals()

    # -- planning ---------------------------------------------------------------------

    def _targets(
        self, be_pods: Sequence[BePod]
    ) -> tuple[str, list[tuple[Path, int]], list[str], list[str]]:
        """``(mode, [(cgroup, weight_m)], missing uids, problems)`` for these BE pods."""
        problems: list[str] = []
        found: list[tuple[BePod, Path]] = []
        missing: list[str] = []
        for pod in be_pods:
            path = self.layout.pod_dir(pod.qos_class, pod.uid, "cpu")
            if pod.qos_class not in _THROTTLED_CLASSES:
                problems.append(
                    f"pod uid {pod.uid[:80]!r}: QoS class {pod.qos_class[:40]!r} is not"
                    " BestEffort or Burstable, not touched"
                )
            elif path is None:
                problems.append(f"pod uid {pod.uid[:80]!r}: not a Kubernetes UID, not touched")
            elif path.is_dir():
                found.append((pod, path))
            else:
                missing.append(pod.uid)
        if not found:
            return "none", [], missing, problems
        parent = self.layout.pods_dir("besteffort", "cpu")
        if all(p.qos_class == "BestEffort" for p, _ in found) and _only_these_pods(
            parent, {path.name for _, path in found}
        ):
            return "parent", [(parent, 1)], missing, problems
        weights = [(path, max(p.cpu_request_m, ZERO_REQUEST_M)) for p, path in found]
        return "pods", weights, missing, problems

    def _plan(
        self, quota_m: int, targets: list[tuple[Path, int]], problems: list[str]
    ) -> dict[Path, str]:
        """The value every file must hold: quota and weight of each target, clamped children."""
        total = sum(w for _, w in targets)
        plan: dict[Path, str] = {}
        for directory, weight in targets:
            try:
                period = self._period(directory)
                quota_us = max(MIN_QUOTA_US, quota_m * weight * period // (1000 * total))
                if self._v2:
                    plan[directory / "cpu.max"] = f"{quota_us} {period}"
                    plan[directory / "cpu.weight"] = str(BE_WEIGHT)
                else:
                    plan[directory / "cpu.cfs_quota_us"] = str(quota_us)
                    plan[directory / "cpu.shares"] = str(BE_SHARES)
                    for child in _descendants(directory):
                        self._clamp(child, quota_us, period, plan)
            except (OSError, ValueError) as e:
                problems.append(f"{directory}: {_reason(e)}")
        return plan

    def _clamp(self, child: Path, quota_us: int, period: int, plan: dict[Path, str]) -> None:
        """Lower a v1 descendant whose own limit is above the new quota (else EINVAL).

        An unlimited descendant (-1) is fine: v1 reads it as its parent's quota.
        """
        path = child / "cpu.cfs_quota_us"
        original = self._journal.original(str(path)) or _read(path)
        child_period = self._period(child)
        own = int(original)
        if own >= 0 and own * period > quota_us * child_period:
            plan[path] = str(max(MIN_QUOTA_US, quota_us * child_period // period))

    def _period(self, directory: Path) -> int:
        if self._v2:
            fields = _read(directory / "cpu.max").split()
            return int(fields[1]) if len(fields) > 1 else 100_000
        return int(_read(directory / "cpu.cfs_period_us"))

    # -- writing ----------------------------------------------------------------------

    def _converge(self, plan: dict[Path, str], problems: list[str]) -> int:
        """Make every planned file hold its value and every other journalled file its original."""
        wanted = dict(plan)
        for name, original in self._journal.originals().items():
            wanted.setdefault(Path(name), original)
        writes: list[tuple[_Write, str]] = []
        for path, value in wanted.items():
            try:
                self._check(path)
                current = _read(path)
            except FileNotFoundError:
                self._journal.forget([str(path)])  # its cgroup is gone, nothing to restore
                continue
            except RefusedPath as e:
                problems.append(f"{path}: {e}")
                if path not in plan:
                    self._journal.forget([str(path)])  # a damaged journal: never retried
                continue
            except OSError as e:
                problems.append(f"{path}: {_reason(e)}")
                continue
            if _same(current, value):
                if path not in plan:
                    self._journal.forget([str(path)])
                continue
            writes.append((_Write(path, value), current))
        written = 0
        for write, current in _ordered(writes, self._v2):
            try:
                self._journal.record(str(write.path), current)
                self._write(write)
                written += 1
            except FileNotFoundError:
                self._journal.forget([str(write.path)])
            except (OSError, RefusedPath) as e:
                problems.append(f"{write.path}: {_reason(e)}")
                continue
            if write.path not in plan:
                self._journal.forget([str(write.path)])
        return written

    def _check(self, path: Path) -> Path:
        """The real path of ``path`` if the enforcer may write it; else RefusedPath."""
        if path.name not in _WRITABLE:
            raise RefusedPath(f"refused: {path.name} is not a CPU quota or weight file")
        tree = Path(os.path.realpath(self._tree))
        real = Path(os.path.realpath(path))
        if real.parent == tree or tree not in real.parents:
            raise RefusedPath(f"refused: resolves to {real}, outside the kubepods tree {tree}")
        return real

    def _write(self, write: _Write) -> None:
        real = self._check(write.path)
        _write_file(real, write.value)
        back = _read(real)
        if not _same(back, write.value):
            raise OSError(f"wrote {write.value!r}, read back {back.strip()!r}")

    def _note(self, problems: list[str]) -> str | None:
        """Keep the latest failure for the report (cleared by a clean call)."""
        error = "; ".join(problems)[:_ERROR_CHARS] if problems else None
        if error:
            log.warning("enforcer: %s", error)
        self._error = error
        return error


def _only_these_pods(parent: Path, names: set[str]) -> bool:
    """Whether every pod cgroup under ``parent`` is one of ``names`` (so a quota there
    throttles BE pods only)."""
    try:
        children = [e.name for e in os.scandir(parent) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return False
    return all(name in names for name in children if "pod" in name)


def _descendants(directory: Path) -> Iterator[Path]:
    """Cgroups below ``directory`` (not following links), at most _MAX_DEPTH down."""
    stack = [(directory, 0)]
    while stack:
        current, depth = stack.pop()
        if depth == _MAX_DEPTH:
            continue
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    yield Path(entry.path)
                    stack.append((Path(entry.path), depth + 1))


def _ordered(writes: list[tuple[_Write, str]], v2: bool) -> list[tuple[_Write, str]]:
    """Weights first, then quotas that rise (top-down), then those that fall (bottom-up).

    v1 checks a quota against its parent's and its children's on each write; with this
    order every intermediate state is valid whenever the final one is.
    """
    if v2:
        return writes
    weights = [w for w in writes if w[0].path.name not in _QUOTA_FILES]
    rising = [w for w in writes if w[0].path.name in _QUOTA_FILES and _rises(w[1], w[0].value)]
    falling = [w for w in writes if w[0].path.name in _QUOTA_FILES and w not in rising]
    rising.sort(key=lambda w: len(w[0].path.parts))
    falling.sort(key=lambda w: -len(w[0].path.parts))
    return weights + rising + falling


def _rises(current: str, value: str) -> bool:
    old, new = int(current), int(value)
    return new < 0 or (old >= 0 and new > old)


def _write_file(real: Path, value: str) -> None:
    """One write(2) of ``value`` (cgroup files take a value per write), never creating."""
    fd = os.open(real, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    with open(path, encoding="ascii") as f:
        return f.read(256)


def _same(current: str, value: str) -> bool:
    return current.split() == value.split()


def _reason(e: Exception) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e)
