"""A stand-in for the ``pynvml`` module, faithful at its function boundary.

``FakeNvml`` exposes the NVML functions the GPU collector calls, with the same names and
parameters as nvidia-ml-py (a test pins this), and raises the real ``pynvml`` error classes:
``pynvml.NVMLError(code)`` builds the real ``NVMLError_<Name>`` subclass, and importing
``pynvml`` needs no driver. Constants and error classes are read through from ``pynvml``.

Behaviour that NVML documents is modelled, not scripted per test: calls before ``nvmlInit``
raise Uninitialized; utilisation and remapped rows are NotSupported while MIG instances are
active; NVLink indices past a GPU's last link raise InvalidArgument and a GPU without NVLink
raises NotSupported; events reach an event set only for registered, supported types; handles
are ctypes device pointers, and event data is the real ``c_nvmlEventData_t``.

The scenario builders at the bottom describe hosts as data; tests derive their expectations
from these definitions.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

XID_EVENTS = (
    pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypeSingleBitEccError
)
ALL_EVENTS = XID_EVENTS | pynvml.nvmlEventTypePState | pynvml.nvmlEventTypeClock
GIB = 2**30
MIB = 2**20
_HANDLE_BASE = 0x7F00_0000_0000
_GI_BASE = 0x7E00_0000
"""GPU-instance handles; a compute instance's is its GPU instance's × 0x100 + its id."""
_GI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6, 7: 1, 8: 2, 9: 1}
_GI_MEMORY_SLICES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 7: 1, 9: 2}
"""nvml.h's GPU-instance profile indices: compute slices, and memory slices spanned on an
A100/H100 (``nvidia-smi mig -lgipp``'s placement size)."""
_CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6, 7: 1}


def err(code: int) -> pynvml.NVMLError:
    """The real pynvml exception for an NVML return code."""
    return pynvml.NVMLError(code)


@dataclass
class Link:
    """One NVLink: whether it is up, and the PCI bus id and type of the far end."""

    remote_bus_id: str
    remote_type: int = pynvml.NVML_NVLINK_DEVICE_TYPE_GPU
    active: bool = True


@dataclass
class Mig:
    """One MIG instance, in slot ``slot`` of its parent's MIG device table: a compute
    instance of profile index ``ci_profile`` inside a GPU instance of profile index
    ``gi_profile`` (``NVML_GPU_INSTANCE_PROFILE_*``) placed at memory slice ``start``."""

    slot: int
    uuid: str
    gpu_instance_id: int
    compute_instance_id: int
    mem_total_b: int
    gi_profile: int = pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE
    start: int = 0
    ci_profile: int = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE


@dataclass
class Gpu:
    """One fake GPU. A None capability means NVML answers NotSupported for it."""

    uuid: str
    name: str
    bus_id: str
    mem_total_b: int | None
    mem_used_b: int = 0
    util: tuple[int, int] = (0, 0)
    numa_node_id: int | None = None
    """What nvmlDeviceGetNumaNodeId answers: the GPU-memory node on coherent systems."""
    memory_affinity: int | None = None
    """NUMA node mask nvmlDeviceGetMemoryAffinity answers (bit n = node n)."""
    mig_mode: int | None = None
    max_mig: int = 7
    migs: list[Mig] = field(default_factory=list)
    gi_profiles: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """GPU-instance profile index → (profile id, slice count, memory MB), what
    nvmlDeviceGetGpuInstanceProfileInfo answers; the rest are NotSupported."""
    ecc_mode: int | None = pynvml.NVML_FEATURE_ENABLED
    ecc_uncorrected_volatile: int = 0
    retired_pages_pending: int | None = pynvml.NVML_FEATURE_DISABLED
    retired_pages: dict[int, list[int]] | None = None
    """Retirement cause → page addresses nvmlDeviceGetRetiredPages lists; None: the GPU
    retires no pages (NotSupported, as on Ampere and later)."""
    remapped_rows: tuple[int, int, int, int] | None = (0, 0, 0, 0)
    nvlinks: list[Link] | None = None
    supported_events: int = ALL_EVENTS
    errors: dict[str, int] = field(default_factory=dict)
    """Function name → NVML error code that call raises for this GPU."""
    lost: bool = False
    """Fell off the bus: every call on its handle raises GpuIsLost."""


class FakeNvml:
    """Module-like NVML double over a list of :class:`Gpu`."""

    def __init__(
        self,
        gpus: list[Gpu],
        *,
        topology: list[list[int]] | None = None,
        driver_version: str | None = "550.54.15",
        init_error: int | None = None,
        strings_as_bytes: bool = False,
    ) -> None:
        self.gpus = gpus
        self.topology = topology
        self.driver_version = driver_version
        self.init_error = init_error
        self.strings_as_bytes = strings_as_bytes
        self.init_count = 0
        self.init_calls = 0
        self.errors: dict[str, int] = {}
        """Function name → NVML error code, for calls not tied to one GPU (and registration)."""
        self.registered: dict[int, int] = {}
        """GPU index → event mask registered on the (single) event set."""
        self.wait_timeouts: list[int] = []
        self.event_sets_freed = 0
        self._queue: deque[Any] = deque()
        self._event_set: Any = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML", "nvmlEventType")):
            return getattr(pynvml, name)
        raise AttributeError(f"fake NVML has no {name}")

    # -------------------------------------------------------------- test controls

    def emit(self, index: int, event_type: int, data: int = 0) -> None:
        """Queue an event as the driver would: only if that type is registered for the GPU."""
        if self._event_set is None or not self.registered.get(index, 0) & event_type:
            return
        event = pynvml.c_nvmlEventData_t()
        event.device = self._handle(index)
        event.eventType = event_type
        event.eventData = data
        event.gpuInstanceId = event.computeInstanceId = 0xFFFFFFFF
        self._queue.append(event)

    def emit_xid(self, index: int, xid: int) -> None:
        self.emit(index, pynvml.nvmlEventTypeXidCriticalError, xid)

    # -------------------------------------------------------------------- library

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise err(self.init_error)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._initialised()
        self.init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._initialised()
        if self.driver_version is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self._str(self.driver_version)

    def nvmlDeviceGetCount(self) -> int:
        self._initialised("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """Handles exist from init on, so a lost GPU still has one unless told otherwise."""
        self._initialised()
        if not 0 <= index < len(self.gpus):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if "nvmlDeviceGetHandleByIndex" in self.gpus[index].errors:
            raise err(self.gpus[index].errors["nvmlDeviceGetHandleByIndex"])
        return self._handle(index)

    # --------------------------------------------------------------- one device

    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes:
        gpu, mig = self._resolve(handle, "nvmlDeviceGetUUID")
        return self._str(mig.uuid if mig else gpu.uuid)

    def nvmlDeviceGetName(self, handle: Any) -> str | bytes:
        return self._str(self._device(handle, "nvmlDeviceGetName").name)

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        gpu = self._device(handle, "nvmlDeviceGetPciInfo")
        return self._pci(gpu.bus_id)

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        gpu = self._device(handle, "nvmlDeviceGetNumaNodeId")
        return _supported(gpu.numa_node_id)

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:  # noqa: N803
        gpu = self._device(handle, "nvmlDeviceGetMemoryAffinity")
        if nodeSetSize < 1 or scope not in (
            pynvml.NVML_AFFINITY_SCOPE_NODE,
            pynvml.NVML_AFFINITY_SCOPE_SOCKET,
        ):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        mask = _supported(gpu.memory_affinity)
        words = (ctypes.c_ulonglong * nodeSetSize)()  # what pynvml returns
        for i in range(nodeSetSize):
            words[i] = (mask >> (64 * i)) & (2**64 - 1)
        return words

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        gpu, mig = self._resolve(handle, "nvmlDeviceGetMemoryInfo")
        if mig is not None:
            return pynvml.c_nvmlMemory_t(mig.mem_total_b, mig.mem_total_b, 0)
        total = _supported(gpu.mem_total_b)
        return pynvml.c_nvmlMemory_t(total, total - gpu.mem_used_b, gpu.mem_used_b)

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu = self._device(handle, "nvmlDeviceGetUtilizationRates")
        if gpu.mig_mode == pynvml.NVML_DEVICE_MIG_ENABLE:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)  # nvml.h: not on MIG-enabled GPUs
        return pynvml.c_nvmlUtilization_t(*gpu.util)

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        gpu = self._device(device, "nvmlDeviceGetMigMode")
        mode = _supported(gpu.mig_mode)
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        gpu = self._device(device, "nvmlDeviceGetMaxMigDeviceCount")
        _supported(gpu.mig_mode)
        return gpu.max_mig

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        gpu = self._device(device, "nvmlDeviceGetMigDeviceHandleByIndex")
        if gpu.mig_mode != pynvml.NVML_DEVICE_MIG_ENABLE or not 0 <= index < gpu.max_mig:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not any(m.slot == index for m in gpu.migs):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return self._handle(self.gpus.index(gpu), mig_slot=index)

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        return self._mig(device, "nvmlDeviceGetGpuInstanceId").gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        return self._mig(device, "nvmlDeviceGetComputeInstanceId").compute_instance_id

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:  # noqa: N803
        gpu = self._device(device, "nvmlDeviceGetGpuInstanceById")
        if gpu.mig_mode != pynvml.NVML_DEVICE_MIG_ENABLE:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not any(m.gpu_instance_id == gpuInstanceId for m in gpu.migs):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        address = _GI_BASE + self.gpus.index(gpu) * 0x1000 + gpuInstanceId
        return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlGpuInstance_t)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:  # noqa: N803
        gpu, mig = self._gi(gpuInstance, "nvmlGpuInstanceGetInfo")
        info = pynvml.c_nvmlGpuInstanceInfo_t()
        info.id = mig.gpu_instance_id
        info.profileId = gpu.gi_profiles[mig.gi_profile][0]
        info.placement.start = mig.start
        info.placement.size = _GI_MEMORY_SLICES.get(mig.gi_profile, 1)
        return info

    def nvmlDeviceGetGpuInstanceProfileInfo(
        self, device: Any, profile: int, version: int = 2
    ) -> Any:
        gpu = self._device(device, "nvmlDeviceGetGpuInstanceProfileInfo")
        if not 0 <= profile < pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if gpu.mig_mode is None or profile not in gpu.gi_profiles:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.id, info.sliceCount, info.memorySizeMB = gpu.gi_profiles[profile]
        return info

    def nvmlGpuInstanceGetComputeInstanceById(
        self, gpuInstance: Any, computeInstanceId: int
    ) -> Any:  # noqa: N803
        _, mig = self._gi(gpuInstance, "nvmlGpuInstanceGetComputeInstanceById")
        if mig.compute_instance_id != computeInstanceId:
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        address = ctypes.cast(gpuInstance, ctypes.c_void_p).value or 0
        return ctypes.cast(
            ctypes.c_void_p(address * 0x100 + computeInstanceId), pynvml.c_nvmlComputeInstance_t
        )

    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> Any:  # noqa: N803
        address = ctypes.cast(computeInstance, ctypes.c_void_p).value or 0
        gi_address, ci_id = divmod(address, 0x100)
        gi = ctypes.cast(ctypes.c_void_p(gi_address), pynvml.c_nvmlGpuInstance_t)
        _, mig = self._gi(gi, "nvmlComputeInstanceGetInfo")
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        info.id = ci_id
        info.profileId = mig.ci_profile  # the CI profile ids are their indices
        return info

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self,
        device: Any,
        profile: int,
        engProfile: int,
        version: int = 2,  # noqa: N803
    ) -> Any:
        _, mig = self._gi(device, "nvmlGpuInstanceGetComputeInstanceProfileInfo")
        if not 0 <= profile < pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT or engProfile != 0:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        slices = _CI_SLICES.get(profile)
        if slices is None or slices > _GI_SLICES[mig.gi_profile]:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlComputeInstanceProfileInfo_v2_t()
        info.id, info.sliceCount = profile, slices
        return info

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        gpu = self._device(handle, "nvmlDeviceGetEccMode")
        mode = _supported(gpu.ecc_mode)
        return [mode, mode]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:  # noqa: N803
        gpu = self._device(handle, "nvmlDeviceGetTotalEccErrors")
        if gpu.ecc_mode != pynvml.NVML_FEATURE_ENABLED:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if (errorType, counterType) != (
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        ):
            raise AssertionError("the fake only models volatile uncorrected counts")
        return gpu.ecc_uncorrected_volatile

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int:
        gpu = self._device(device, "nvmlDeviceGetRetiredPagesPendingStatus")
        return _supported(gpu.retired_pages_pending)

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:  # noqa: N803
        gpu = self._device(device, "nvmlDeviceGetRetiredPages")
        if sourceFilter not in (
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        ):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return list(_supported(gpu.retired_pages).get(sourceFilter, []))

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        gpu = self._device(device, "nvmlDeviceGetRemappedRows")
        if gpu.mig_mode == pynvml.NVML_DEVICE_MIG_ENABLE and gpu.migs:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)  # nvml.h: not with active instances
        return _supported(gpu.remapped_rows)

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        return int(self._link(device, link, "nvmlDeviceGetNvLinkState").active)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        return self._pci(self._link(device, link, "nvmlDeviceGetNvLinkRemotePciInfo").remote_bus_id)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        return self._link(handle, link, "nvmlDeviceGetNvLinkRemoteDeviceType").remote_type

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        a = self.gpus.index(self._device(device1, "nvmlDeviceGetTopologyCommonAncestor"))
        b = self.gpus.index(self._device(device2, "nvmlDeviceGetTopologyCommonAncestor"))
        if self.topology is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.topology[a][b]

    # ------------------------------------------------------------------- events

    def nvmlEventSetCreate(self) -> Any:
        self._initialised("nvmlEventSetCreate")
        if self._event_set is not None:
            raise AssertionError("the collector should create one event set and keep it")
        self._event_set = ctypes.cast(ctypes.c_void_p(0xE0E0), pynvml.c_nvmlEventSet_t)
        return self._event_set

    def nvmlEventSetFree(self, eventSet: Any) -> None:  # noqa: N803
        self._check_event_set(eventSet)
        self._event_set = None
        self.event_sets_freed += 1

    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        return self._device(handle, "nvmlDeviceGetSupportedEventTypes").supported_events

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:  # noqa: N803
        gpu = self._device(handle, "nvmlDeviceRegisterEvents")
        self._check_event_set(eventSet)
        if "nvmlDeviceRegisterEvents" in self.errors:
            raise err(self.errors["nvmlDeviceRegisterEvents"])
        if eventTypes & ~gpu.supported_events:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        index = self.gpus.index(gpu)
        self.registered[index] = self.registered.get(index, 0) | eventTypes

    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any:  # noqa: N803
        self._check_event_set(eventSet)
        self.wait_timeouts.append(timeoutms)
        if "nvmlEventSetWait" in self.errors:
            raise err(self.errors["nvmlEventSetWait"])
        if not self._queue:
            raise err(pynvml.NVML_ERROR_TIMEOUT)
        return self._queue.popleft()

    # ------------------------------------------------------------------ internals

    def _initialised(self, fn: str = "") -> None:
        if self.init_count <= 0:
            raise err(pynvml.NVML_ERROR_UNINITIALIZED)
        if fn in self.errors:
            raise err(self.errors[fn])

    def _handle(self, index: int, mig_slot: int | None = None) -> Any:
        address = _HANDLE_BASE + index * 0x1000 + (0 if mig_slot is None else 0x10 + mig_slot)
        return ctypes.cast(ctypes.c_void_p(address), pynvml.c_nvmlDevice_t)

    def _resolve(self, handle: Any, fn: str) -> tuple[Gpu, Mig | None]:
        self._initialised()
        try:
            address = ctypes.cast(handle, ctypes.c_void_p).value or 0
        except ctypes.ArgumentError:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT) from None
        index, offset = divmod(address - _HANDLE_BASE, 0x1000)
        if not 0 <= index < len(self.gpus) or offset not in (0, *range(0x10, 0x10 + 64)):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        self._raise_for(gpu, fn)
        if offset == 0:
            return gpu, None
        return gpu, next(m for m in gpu.migs if m.slot == offset - 0x10)

    def _device(self, handle: Any, fn: str) -> Gpu:
        gpu, mig = self._resolve(handle, fn)
        if mig is not None:
            raise AssertionError(f"{fn} called with a MIG handle")
        return gpu

    def _mig(self, handle: Any, fn: str) -> Mig:
        _, mig = self._resolve(handle, fn)
        if mig is None:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)  # not a MIG device handle
        return mig

    def _gi(self, handle: Any, fn: str) -> tuple[Gpu, Mig]:
        """The GPU and MIG instance a GPU-instance handle names."""
        self._initialised()
        address = ctypes.cast(handle, ctypes.c_void_p).value or 0
        index, gi_id = divmod(address - _GI_BASE, 0x1000)
        if not 0 <= index < len(self.gpus):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus[index]
        self._raise_for(gpu, fn)
        for mig in gpu.migs:
            if mig.gpu_instance_id == gi_id:
                return gpu, mig
        raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def _link(self, handle: Any, link: int, fn: str) -> Link:
        gpu = self._device(handle, fn)
        if gpu.nvlinks is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(gpu.nvlinks):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.nvlinks[link]

    def _check_event_set(self, event_set: Any) -> None:
        self._initialised()
        if self._event_set is None or (
            ctypes.cast(event_set, ctypes.c_void_p).value
            != ctypes.cast(self._event_set, ctypes.c_void_p).value
        ):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    @staticmethod
    def _raise_for(gpu: Gpu, fn: str) -> None:
        if gpu.lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.errors:
            raise err(gpu.errors[fn])

    def _str(self, value: str) -> str | bytes:
        return value.encode() if self.strings_as_bytes else value

    def _pci(self, bus_id: str) -> Any:
        domain, bus, device_function = bus_id.split(":")
        return SimpleNamespace(
            busId=self._str(bus_id),
            domain=int(domain, 16),
            bus=int(bus, 16),
            device=int(device_function.split(".")[0], 16),
        )


def _supported(value: Any) -> Any:
    if value is None:
        raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
    return value


def write_sys_numa(sys_root: Path, numa_by_bus_id: dict[str, int]) -> Path:
    """A minimal sysfs tree: ``bus/pci/devices/<bdf>/numa_node`` for each GPU."""
    for bus_id, node in numa_by_bus_id.items():
        device = sys_root / "bus" / "pci" / "devices" / bus_id[-12:].lower()
        device.mkdir(parents=True, exist_ok=True)
        (device / "numa_node").write_text(f"{node}\n")
    return sys_root


def uuid(kind: str, n: int) -> str:
    return f"GPU-{kind}0000-0000-4000-8000-{n:012x}"


# ---------------------------------------------------------------------- scenarios

H100_BUS_IDS = [
    "00000000:18:00.0",
    "00000000:2A:00.0",
    "00000000:3A:00.0",
    "00000000:5D:00.0",
    "00000000:9A:00.0",
    "00000000:AB:00.0",
    "00000000:BA:00.0",
    "00000000:DB:00.0",
]
H100_NUMA = [0, 0, 0, 0, 1, 1, 1, 1]
H100_LINKS = 18
NVSWITCH_BUS_IDS = ["00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0"]


def h100_host() -> FakeNvml:
    """An HGX H100 board: 8 GPUs, 18 NVLinks each into four NVSwitches, two sockets.

    PCIe levels: GPUs on one socket share a NUMA node (NODE, 40); across sockets, SYSTEM (50).
    NVML has no NUMA id for these PCIe GPUs; sysfs has it (``H100_NUMA``).
    """
    gpus = [
        Gpu(
            uuid=uuid("h100", i),
            name="NVIDIA H100 80GB HBM3",
            bus_id=bus,
            mem_total_b=80 * GIB,
            mem_used_b=(i + 1) * GIB,
            util=(10 * i, 5 * i),
            mig_mode=pynvml.NVML_DEVICE_MIG_DISABLE,
            retired_pages_pending=None,  # Hopper uses row remapping instead of page retirement
            nvlinks=[
                Link(NVSWITCH_BUS_IDS[k % 4], pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH)
                for k in range(H100_LINKS)
            ],
        )
        for i, bus in enumerate(H100_BUS_IDS)
    ]
    topology = [
        [0 if i == j else 40 if H100_NUMA[i] == H100_NUMA[j] else 50 for j in range(8)]
        for i in range(8)
    ]
    return FakeNvml(gpus, topology=topology)


PCIE_BUS_IDS = ["00000000:17:00.0", "00000000:31:00.0", "00000000:4B:00.0", "00000000:CA:00.0"]
PCIE_NUMA = [0, 0, 0, 1]
PCIE_TOPOLOGY = [
    # GPUs 0 and 1 share a PCIe switch; 2 hangs off the parent switch; 3 is on the other socket.
    [0, 10, 20, 50],
    [10, 0, 20, 50],
    [20, 20, 0, 50],
    [50, 50, 50, 0],
]


def pcie_host() -> FakeNvml:
    """Four L40S on PCIe: no NVLink, no MIG, ECC on; levels 10/20/50."""
    gpus = [
        Gpu(
            uuid=uuid("l40s", i),
            name="NVIDIA L40S",
            bus_id=bus,
            mem_total_b=48 * GIB,
            mem_used_b=i * GIB,
            util=(25 * i, 10 * i),
        )
        for i, bus in enumerate(PCIE_BUS_IDS)
    ]
    return FakeNvml(gpus, topology=PCIE_TOPOLOGY)


A100_40GB_PROFILES = {
    # nvidia-smi mig -lgip on an A100-PCIE-40GB: profile index -> (id, slices, memory MiB)
    pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE: (19, 1, 4864),
    pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: (20, 1, 4864),
    pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: (15, 1, 9856),
    pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE: (14, 2, 9856),
    pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE: (9, 3, 19968),
    pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE: (5, 4, 19968),
    pynvml.NVML_GPU_INSTANCE_PROFILE_7_SLICE: (0, 7, 40192),
}
A100_MIGS = [
    # slot 1 is empty: the table has gaps once instances are destroyed and recreated.
    # A 3g.20gb at slices 4-7, one compute slice of a 2g.10gb at 0-1, a 1g.5gb+me at 2.
    Mig(
        slot=0,
        uuid="MIG-a1000000-0000-4000-8000-000000000001",
        gpu_instance_id=1,
        compute_instance_id=0,
        mem_total_b=19968 * MIB,
        gi_profile=pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE,
        start=4,
        ci_profile=pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
    ),
    Mig(
        slot=2,
        uuid="MIG-a1000000-0000-4000-8000-000000000002",
        gpu_instance_id=5,
        compute_instance_id=0,
        mem_total_b=9856 * MIB,
        gi_profile=pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE,
        start=0,
        ci_profile=pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
    ),
    Mig(
        slot=3,
        uuid="MIG-a1000000-0000-4000-8000-000000000003",
        gpu_instance_id=13,
        compute_instance_id=0,
        mem_total_b=4864 * MIB,
        gi_profile=pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
        start=2,
        ci_profile=pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
    ),
]
MIG_BUS_IDS = ["00000000:3B:00.0", "00000000:D8:00.0"]


def mig_host() -> FakeNvml:
    """Two A100 PCIe: GPU 0 in MIG mode with three instances, GPU 1 with MIG disabled."""
    gpus = [
        Gpu(
            uuid=uuid("a100", 0),
            name="NVIDIA A100-PCIE-40GB",
            bus_id=MIG_BUS_IDS[0],
            mem_total_b=40 * GIB,
            mem_used_b=2 * GIB,
            util=(0, 0),
            mig_mode=pynvml.NVML_DEVICE_MIG_ENABLE,
            migs=[dataclasses.replace(m) for m in A100_MIGS],  # tests may change them
            gi_profiles=dict(A100_40GB_PROFILES),
            retired_pages_pending=None,
        ),
        Gpu(
            uuid=uuid("a100", 1),
            name="NVIDIA A100-PCIE-40GB",
            bus_id=MIG_BUS_IDS[1],
            mem_total_b=40 * GIB,
            mem_used_b=GIB,
            util=(63, 21),
            mig_mode=pynvml.NVML_DEVICE_MIG_DISABLE,
            retired_pages_pending=None,
        ),
    ]
    return FakeNvml(gpus, topology=[[0, 50], [50, 0]])


SPARSE_BUS_IDS = ["00000000:01:00.0", "00000000:21:00.0", "00000000:41:00.0"]
SPARSE_TOPOLOGY = [[0, 30, 40], [30, 0, 40], [40, 40, 0]]


def sparse_host() -> FakeNvml:
    """Three workstation GPUs on an old driver: half of NVML answers NotSupported.

    No NUMA id, MIG, ECC, page retirement, NVLink or events; remapped rows are missing from
    the driver library (FunctionNotFound); no driver version. Memory, utilisation and
    topology (levels 30 and 40) work. No sysfs either.
    """
    gpus = [
        Gpu(
            uuid=uuid("a400", i),
            name="NVIDIA RTX A4000",
            bus_id=bus,
            mem_total_b=16 * GIB,
            mem_used_b=GIB // 2,
            util=(7, 3),
            ecc_mode=None,
            retired_pages_pending=None,
            supported_events=0,
            errors={"nvmlDeviceGetRemappedRows": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND},
        )
        for i, bus in enumerate(SPARSE_BUS_IDS)
    ]
    return FakeNvml(gpus, topology=SPARSE_TOPOLOGY, driver_version=None)


BRIDGE_BUS_IDS = ["00000000:4F:00.0", "00000000:52:00.0"]
BRIDGE_LINKS = 12


def bridged_pair_host() -> FakeNvml:
    """Two A100 PCIe joined by three NVLink bridges: 12 links each, straight to the peer."""
    gpus = [
        Gpu(
            uuid=uuid("a1br", i),
            name="NVIDIA A100 80GB PCIe",
            bus_id=bus,
            mem_total_b=80 * GIB,
            mig_mode=pynvml.NVML_DEVICE_MIG_DISABLE,
            nvlinks=[
                Link(BRIDGE_BUS_IDS[1 - i].replace("00000000:", "0000:"))
                for _ in range(BRIDGE_LINKS)
            ],
        )
        for i, bus in enumerate(BRIDGE_BUS_IDS)
    ]
    return FakeNvml(gpus, topology=[[0, 10], [10, 0]])


GH200_BUS_ID = "00000009:01:00.0"
GH200_GPU_NUMA = 1
GH200_SYSFS_NUMA = 0
GH200_CPU_AFFINITY = 1 << GH200_SYSFS_NUMA


def gh200_host() -> FakeNvml:
    """A Grace Hopper superchip: NVML reports the GPU's own memory NUMA node."""
    gpu = Gpu(
        uuid=uuid("gh20", 0),
        name="NVIDIA GH200 480GB",
        bus_id=GH200_BUS_ID,
        mem_total_b=96 * GIB,
        numa_node_id=GH200_GPU_NUMA,
        memory_affinity=GH200_CPU_AFFINITY,
        mig_mode=pynvml.NVML_DEVICE_MIG_DISABLE,
        retired_pages_pending=None,
    )
    return FakeNvml([gpu], topology=[[0]])
