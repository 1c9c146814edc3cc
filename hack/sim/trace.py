"""Reading node and pod lists (the Alibaba openb trace format) into engine types.

Nodes: ``sn,cpu_milli,memory_mib,gpu,model``. Pods: ``name,cpu_milli,memory_mib,num_gpu,
gpu_milli[,gpu_spec,…]`` (extra columns are ignored; ``gpu_spec`` lists accepted GPU
models separated by ``|``). Anything else is a :class:`TraceError` naming the file, line
and column: a simulation over a silently misread trace is worse than none.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from common.errors import StowageError
from coordinator.state.cluster import MILLI_PER_GPU, NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim.shipped import DEFAULT_NODES, DEFAULT_PODS, OPENB, OPENB_GPU_NODES

MIB: Final = 2**20
NODE_COLUMNS: Final = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS: Final = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")

__all__ = [
    "DEFAULT_NODES",
    "DEFAULT_PODS",
    "MIB",
    "NODE_COLUMNS",
    "OPENB",
    "OPENB_GPU_NODES",
    "POD_COLUMNS",
    "TraceError",
    "load_nodes",
    "load_pods",
]

T = TypeVar("T")


class TraceError(StowageError, ValueError):
    """A node or pod list cannot be used; the message names where."""


def load_nodes(path: Path) -> list[NodeSpec]:
    def node(row: dict[str, str], where: str) -> NodeSpec:
        return NodeSpec(
            name=row["sn"],
            cpu_m=_count(row, "cpu_milli", where),
            mem_b=_count(row, "memory_mib", where) * MIB,
            gpus=_count(row, "gpu", where),
            gpu_model=row["model"] or "",
        )

    nodes = _read(path, NODE_COLUMNS, node)
    if len({n.name for n in nodes}) != len(nodes):
        raise TraceError(f"{path}: node names are not unique")
    return nodes


def load_pods(path: Path) -> list[PodRequest]:
    def pod(row: dict[str, str], where: str) -> PodRequest:
        gpus = _count(row, "num_gpu", where)
        milli = min(max(_count(row, "gpu_milli", where), 0), MILLI_PER_GPU)
        milli = milli if gpus else 0
        if gpus and not milli:
            raise TraceError(f"{where}: num_gpu {gpus} with gpu_milli 0")
        spec = frozenset(m for m in (row.get("gpu_spec") or "").split("|") if m)
        return PodRequest(
            name=row["name"],
            cpu_m=_count(row, "cpu_milli", where),
            mem_b=_count(row, "memory_mib", where) * MIB,
            gpus=gpus,
            gpu_milli=milli,
            gpu_models=spec,
        )

    return _read(path, POD_COLUMNS, pod)


def _read(
    path: Path, columns: tuple[str, ...], convert: Callable[[dict[str, str], str], T]
) -> list[T]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            try:
                missing = [c for c in columns if c not in (reader.fieldnames or [])]
                if missing:
                    raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
                items = [convert(row, f"{path}:{reader.line_num}") for row in reader]
            except csv.Error as e:
                raise TraceError(f"{path}:{reader.line_num + 1}: {e}") from e
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not a text file ({e.reason})") from e
    if not items:
        raise TraceError(f"{path}: no rows")
    return items


def _count(row: dict[str, str], column: str, where: str) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(text)
    except ValueError as e:
        raise TraceError(f"{where}: {column} {text!r} is not an integer") from e
    if value < 0 and column != "gpu_milli":
        raise TraceError(f"{where}: {column} {value} is negative")
    return value
