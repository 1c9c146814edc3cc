"""The enforcer's record of the values it overwrote, kept on disk so a crash loses none.

One JSON object ``{"version": 1, "originals": {path: value}}``. A value is recorded before
the first write to its file and dropped once the file holds it again, so a restart after a
SIGKILL knows exactly what to put back. Each save is atomic (a temporary file, fsync,
rename, fsync of the directory): a crash leaves either the old or the new journal, never
half of one. An empty journal is removed rather than saved.

One agent at a time: the agent that restores or enforces first *claims* the journal, an
exclusive ``flock(2)`` on ``.<name>.lock`` beside it that the kernel releases when the
process ends, however it ends (SIGKILL included). A second agent on the node (a hand-run
``--once`` beside the DaemonSet's) finds it held and leaves the values to their owner.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Final

_VERSION: Final = 1
_MAX_BYTES: Final = 4 << 20
"""Far above any real journal (a few files per BE pod); bounds what a damaged one costs."""


class JournalError(Exception):
    """The journal on disk cannot be read or claimed; its originals are unknown."""


class JournalBusyError(JournalError):
    """Another live process (agent) holds the journal."""


class Journal:
    """Original values of cgroup files, by path, persisted on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._originals: dict[str, str] = {}
        self._claim: int | None = None
        """The descriptor holding the lock while this process claims the journal."""

    def claim(self) -> None:
        """Hold the journal for this process until :meth:`release` or its end.

        Raises JournalBusyError when another process holds it, JournalError when the lock
        file cannot be made (a read-only directory).
        """
        lock = self.path.with_name(f".{self.path.name}.lock")
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise JournalError(f"journal {self.path}: cannot lock: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise JournalBusyError(f"journal {self.path}: held by another agent") from e
        self._claim = fd

    def release(self) -> None:
        """Give the journal up (the lock goes with the descriptor)."""
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None

    def load(self) -> None:
        """Read the journal left on disk (none: empty). Raises JournalError when damaged."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            self._originals = {}
            return
        except OSError as e:
            raise JournalError(f"journal {self.path}: {e.strerror}") from e
        if len(data) > _MAX_BYTES:
            raise JournalError(f"journal {self.path}: over {_MAX_BYTES} bytes")
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise JournalError(f"journal {self.path}: not JSON ({e})") from e
        originals = doc.get("originals") if isinstance(doc, dict) else None
        if (
            doc.get("version") != _VERSION
            or not isinstance(originals, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in originals.items())
        ):
            raise JournalError(f"journal {self.path}: not a version {_VERSION} journal")
        self._originals = dict(originals)

    def set_aside(self) -> Path:
        """Move a damaged journal out of the way (kept for a person to read); its new name."""
        aside = self.path.with_name(self.path.name + ".damaged")
        os.replace(self.path, aside)
        self._originals = {}
        return aside

    def originals(self) -> dict[str, str]:
        """A copy of the recorded originals, by path."""
        return dict(self._originals)

    def original(self, path: str) -> str | None:
        return self._originals.get(path)

    def record(self, path: str, value: str) -> None:
        """Record ``value`` as the original of ``path`` (first record wins) and persist."""
        if path in self._originals:
            return
        self._originals[path] = value
        self._save()

    def forget(self, paths: list[str]) -> None:
        """Drop entries whose files hold their original again, and persist."""
        if not any(p in self._originals for p in paths):
            return
        for path in paths:
            self._originals.pop(path, None)
        self._save()

    def _save(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        if not self._originals:
            try:
                self.path.unlink()
            except FileNotFoundError:
                return
            _fsync_dir(directory)
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        body = json.dumps({"version": _VERSION, "originals": self._originals}, indent=1)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(directory)


def _fsync_dir(directory: Path) -> None:
    """Make a rename or unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
