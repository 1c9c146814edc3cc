"""Reading the kubelet's configuration file (``KubeletConfiguration``, v1beta1).

Only the fields that decide allocatable and NUMA alignment are read. Flags can override
the file on a real node, so the result is labelled with the path it came from; the
coordinator can compare it with the Node's ``status.allocatable``.

Kubelet's rules reproduced here (``pkg/kubelet/cm``, ``cmd/kubelet/app/server.go``):

* ``reservedSystemCPUs`` replaces the CPU part of kube- and system-reserved with the
  number of listed CPUs;
* an absent ``evictionHard`` means the default ``memory.available<100Mi``; a present one
  without ``memory.available`` reserves nothing for memory unless
  ``mergeDefaultEvictionSettings`` is true;
* percentages in ``evictionHard`` are of memory capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

from agent.kernelfiles import parse_cpulist
from common import config, quantity
from common.errors import ConfigError, QuantityError
from common.schema import KubeletSettings

DEFAULT_EVICTION_MEMORY_B: Final = 100 * 2**20


class KubeletConfigError(ValueError):
    """The file exists but is not a usable KubeletConfiguration."""


@dataclass(frozen=True, slots=True)
class Reservations:
    capacity_b: int
    """The memory capacity percentages were resolved against."""
    kube_reserved_m: int
    system_reserved_m: int
    reserved_cpus_m: int
    kube_reserved_b: int
    system_reserved_b: int
    eviction_hard_b: int


def load(path: Path) -> dict[str, Any]:
    """Parse the YAML file; raise KubeletConfigError if it is not a mapping.

    Read with the settings files' bounds (:func:`common.config.read_yaml`): a FIFO, a
    device, a huge or non-UTF-8 file or an alias bomb is an error naming the file,
    never a hang, a crash or a runaway allocation.
    """
    try:
        data = config.read_yaml(path)
    except ConfigError as e:
        raise KubeletConfigError(str(e)) from e
    if not isinstance(data, dict):
        raise KubeletConfigError(f"{path}: expected a KubeletConfiguration mapping")
    kind = data.get("kind")
    if kind not in (None, "KubeletConfiguration"):
        raise KubeletConfigError(f"{path}: kind is {kind!r}, not KubeletConfiguration")
    return data


def settings(path: Path, data: dict[str, Any]) -> KubeletSettings:
    enforce = data.get("enforceNodeAllocatable", ["pods"])
    if not isinstance(enforce, list) or not all(isinstance(x, str) for x in enforce):
        raise KubeletConfigError(f"{path}: enforceNodeAllocatable must be a list of strings")
    return KubeletSettings(
        path=str(path),
        cgroup_driver=_opt_str(data, "cgroupDriver"),
        cgroups_per_qos=bool(data.get("cgroupsPerQOS", True)),
        enforce_node_allocatable=enforce,
        cpu_manager_policy=_opt_str(data, "cpuManagerPolicy"),
        memory_manager_policy=_opt_str(data, "memoryManagerPolicy"),
        topology_manager_policy=_opt_str(data, "topologyManagerPolicy"),
        topology_manager_scope=_opt_str(data, "topologyManagerScope"),
        reserved_system_cpus=_opt_str(data, "reservedSystemCPUs"),
    )


def reservations(data: dict[str, Any], memory_capacity_b: int) -> Reservations:
    """CPU and memory kubelet holds back, in millicores and bytes."""
    kube = _resource_map(data, "kubeReserved")
    system = _resource_map(data, "systemReserved")
    reserved_cpus_m = 0
    cpus = _opt_str(data, "reservedSystemCPUs")
    if cpus:
        try:
            reserved_cpus_m = len(parse_cpulist(cpus)) * 1000
        except ValueError as e:
            raise KubeletConfigError(f"reservedSystemCPUs: {e}") from e
        kube.pop("cpu", None)
        system.pop("cpu", None)
    return Reservations(
        capacity_b=memory_capacity_b,
        kube_reserved_m=_milli(kube, "cpu", "kubeReserved"),
        system_reserved_m=_milli(system, "cpu", "systemReserved"),
        reserved_cpus_m=reserved_cpus_m,
        kube_reserved_b=_units(kube, "memory", "kubeReserved"),
        system_reserved_b=_units(system, "memory", "systemReserved"),
        eviction_hard_b=_eviction_memory(data, memory_capacity_b),
    )


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise KubeletConfigError(f"{key}: expected a string, got {type(value).__name__}")
    return value


def _resource_map(data: dict[str, Any], key: str) -> dict[str, str]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise KubeletConfigError(f"{key}: expected a map of resource quantities")
    return {str(k): str(v) for k, v in value.items()}


def _milli(res: dict[str, str], name: str, key: str) -> int:
    return _parse(res, name, key, lambda v: math.ceil(v * 1000))


def _units(res: dict[str, str], name: str, key: str) -> int:
    return _parse(res, name, key, math.ceil)


def _parse(res: dict[str, str], name: str, key: str, scale: Any) -> int:
    if name not in res:
        return 0
    try:
        value = quantity.parse_value(res[name])
    except QuantityError as e:
        raise KubeletConfigError(f"{key}.{name}: {e}") from e
    if value < 0:
        raise KubeletConfigError(f"{key}.{name}: negative quantity {res[name]!r}")
    result: int = scale(value)
    return result


def _eviction_memory(data: dict[str, Any], capacity_b: int) -> int:
    hard = data.get("evictionHard")
    if hard is None:
        return DEFAULT_EVICTION_MEMORY_B
    if not isinstance(hard, dict):
        raise KubeletConfigError("evictionHard: expected a map of signal thresholds")
    raw = hard.get("memory.available")
    if raw is None:
        return DEFAULT_EVICTION_MEMORY_B if data.get("mergeDefaultEvictionSettings") else 0
    raw = str(raw).strip()
    if raw.endswith("%"):
        try:
            pct = Fraction(raw[:-1])
        except ValueError as e:
            raise KubeletConfigError(f"evictionHard.memory.available: {raw!r}") from e
        if not 0 <= pct <= 100:
            raise KubeletConfigError(f"evictionHard.memory.available: {raw!r} out of range")
        return math.ceil(capacity_b * pct / 100)
    try:
        value = quantity.parse_value(raw)
    except QuantityError as e:
        raise KubeletConfigError(f"evictionHard.memory.available: {e}") from e
    if value < 0:
        raise KubeletConfigError(f"evictionHard.memory.available: negative {raw!r}")
    return math.ceil(value)
