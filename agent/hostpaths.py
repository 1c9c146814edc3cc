"""Where the agent reads the host from.

On a node the agent runs in a DaemonSet pod with the host's ``/proc`` and ``/sys`` mounted
at ``/host/proc`` and ``/host/sys``; in tests the roots point at recorded fixture trees.
Every collector reads only through :class:`HostPaths`, never through absolute paths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from common.errors import HostPathError


@dataclass(frozen=True, slots=True)
class HostPaths:
    """Roots of the host's kernel interfaces as this process sees them."""

    proc: Path
    sys: Path
    cgroup: Path
    kubelet_config: Path | None = None

    @classmethod
    def under(
        cls,
        proc: str | Path = "/proc",
        sys: str | Path = "/sys",
        cgroup: str | Path | None = None,
        kubelet_config: str | Path | None = None,
    ) -> HostPaths:
        """Build and check the roots; the cgroup root defaults to ``<sys>/fs/cgroup``."""
        proc_p, sys_p = Path(proc), Path(sys)
        cgroup_p = Path(cgroup) if cgroup is not None else sys_p / "fs" / "cgroup"
        for label, path in (("proc root", proc_p), ("sys root", sys_p)):
            _check_dir(label, path)
        return cls(
            proc=proc_p,
            sys=sys_p,
            cgroup=cgroup_p,
            kubelet_config=Path(kubelet_config) if kubelet_config is not None else None,
        )


def _check_dir(label: str, path: Path) -> None:
    try:
        if not path.is_dir():
            raise HostPathError(f"{label} {path}: not a directory")
        os.listdir(path)
    except HostPathError:
        raise
    except OSError as e:
        raise HostPathError(f"{label} {path}: {e.strerror or e}") from e
