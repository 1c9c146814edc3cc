"""GPU inventory, topology and health from NVML, through ``pynvml`` (the nvidia-ml-py binding).

Why it is shaped this way:

* NVML is initialised once, on the first collection, and kept: the XID event set only sees
  events while NVML stays up, and re-initialising every cycle costs far more than a read.
  A failed init (no library, driver not loaded) is retried on the next cycle.
* ``pynvml`` is imported lazily so the agent starts, and this module imports, on nodes
  without it; tests inject a stand-in module with the same functions.
* Support for a call depends on the GPU generation, MIG mode, the driver and the OS. Every
  ``NotSupported`` or ``FunctionNotFound`` therefore makes that one field None, never an
  error; any other failure of one field sets it to None and adds a health reason, so one
  unreadable counter never hides the rest of the section.
* A GPU that fell off the bus (``GpuIsLost``) is reported unhealthy; the others report as usual.
* XIDs arrive as events. Each cycle drains the event set with a zero timeout, so collecting
  never blocks; critical XIDs are counted since the collector started, as NVIDIA's device
  plugin does, and application-level XIDs are ignored as the device plugin ignores them.
  The latest few are also kept with the monotonic time they were read, and reported with
  their age, so the coordinator can judge "a critical XID in the last hour" and take a GPU
  back once the window passes with none (after a GPU reset, say) — a count alone never
  goes down while the agent runs.
"""

from __future__ import annotations

import ctypes
import logging
import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from agent.collectors.base import NoData
from agent.kernelfiles import CollectorError, read_text
from agent.settings import AgentSettings
from common.clock import Clock
from common.schema import MAX_RECENT_XIDS, GpuDevice, GpuSection, MigDevice, XidSeen

NAME: Final = "gpus"

INIT_RETRY_S: Final = 300.0
"""How long to wait before trying to load NVML again after it was not found (a driver
installed later is picked up within this time)."""
IGNORED_XIDS: Final = frozenset({13, 31, 43, 45, 68, 109})
"""Application-level XIDs (a faulting kernel, a page fault, a preempted context…): the job
failed, the GPU did not. Same list as the NVIDIA device plugin."""

_MAX_EVENTS_PER_CYCLE: Final = 4096
"""Bound on events drained per cycle, so an XID storm cannot hold a collection forever."""
_MAX_REASONS: Final = 32
_MAX_PCT: Final = 100
_MAX_BYTES: Final = 2**50
_MAX_COUNT: Final = 2**63 - 1
_MAX_INDEX: Final = 1_000_000
_MAX_AGE_S: Final = 10.0**9
_NODE_SET_WORDS: Final = 16
"""64-bit words of NUMA node mask asked of NVML: 1,024 nodes, more than any host has."""
GI_PROFILE_SLICES: Final = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6, 7: 1, 8: 2, 9: 1}
"""nvml.h's ``NVML_GPU_INSTANCE_PROFILE_*`` indices → compute slices, the ones go-nvlib
v0.7.1 (the device plugin's library) names a profile from; others have no name there."""
GI_PROFILE_MEDIA: Final = frozenset({7, 8})
"""``NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1`` and ``2_SLICE_REV1``: the ``+me`` profiles."""
CI_PROFILE_SLICES: Final = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6, 7: 1}
"""``NVML_COMPUTE_INSTANCE_PROFILE_*`` indices → compute slices, as go-nvlib reads them."""


class Nvml(Protocol):
    """What this collector uses of the ``pynvml`` module (nvidia-ml-py ships no types), and
    so what a stand-in must expose: its functions, constants and error classes.

    Handles, event sets and the structs NVML fills (memory, PCI, utilisation …) are ctypes
    objects, read by attribute where they are used.
    """

    NVMLError: type[Exception]
    NVMLError_DriverNotLoaded: type[Exception]
    NVMLError_FunctionNotFound: type[Exception]
    NVMLError_GpuIsLost: type[Exception]
    NVMLError_InvalidArgument: type[Exception]
    NVMLError_LibraryNotFound: type[Exception]
    NVMLError_NotFound: type[Exception]
    NVMLError_NotSupported: type[Exception]
    NVMLError_Timeout: type[Exception]

    NVML_AFFINITY_SCOPE_NODE: int
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT: int
    NVML_COMPUTE_INSTANCE_PROFILE_COUNT: int
    NVML_GPU_INSTANCE_PROFILE_COUNT: int
    NVML_DEVICE_MIG_ENABLE: int
    NVML_FEATURE_ENABLED: int
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: int
    NVML_NVLINK_DEVICE_TYPE_SWITCH: int
    NVML_NVLINK_MAX_LINKS: int
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: int
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: int
    NVML_VOLATILE_ECC: int
    nvmlEventTypeDoubleBitEccError: int
    nvmlEventTypeSingleBitEccError: int
    nvmlEventTypeXidCriticalError: int

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str | bytes: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetMigMode(self, device: Any) -> Any: ...
    def nvmlDeviceGetEccMode(self, handle: Any) -> Any: ...
    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int: ...
    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Any) -> int: ...
    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> Any: ...
    def nvmlDeviceGetRemappedRows(self, device: Any) -> Any: ...
    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int: ...
    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any: ...
    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int: ...
    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int: ...
    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any: ...
    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any: ...
    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int) -> Any: ...
    def nvmlGpuInstanceGetComputeInstanceById(
        self, gpuInstance: Any, computeInstanceId: int
    ) -> Any: ...
    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> Any: ...
    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, device: Any, profile: int, engProfile: int
    ) -> Any: ...
    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int: ...
    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any: ...
    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int: ...
    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int: ...
    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int: ...
    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None: ...
    def nvmlEventSetCreate(self) -> Any: ...
    def nvmlEventSetFree(self, eventSet: Any) -> None: ...
    def nvmlEventSetWait(self, eventSet: Any, timeoutms: int) -> Any: ...


log = logging.getLogger(__name__)


def build(settings: AgentSettings, clock: Clock) -> GpuCollector:
    return GpuCollector(clock=clock, sys_root=settings.paths.sys)


class _Probe:
    """Runs NVML calls for one GPU and turns each failure into a None field."""

    def __init__(self, nvml: Nvml) -> None:
        self._nvml = nvml
        self.lost = False
        self.reasons: list[str] = []

    def __call__(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self.lost:
            return None  # every further call would fail the same way, and may be slow
        try:
            return fn(*args)
        except self._nvml.NVMLError as e:
            self.fail(what, e)
            return None

    def fail(self, what: str, e: Exception) -> None:
        nv = self._nvml
        if isinstance(e, (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound)):
            return  # this GPU, driver or mode cannot tell: the field is simply absent
        if isinstance(e, nv.NVMLError_GpuIsLost):
            self.lost = True
        else:
            self.reasons.append(f"{what}: {_err(e)}")


@dataclass(eq=False)
class _Gpu:
    """One GPU during one collection: its handle, identity and NVLink ends."""

    index: int
    probe: _Probe
    handle: Any = None
    uuid: str = ""
    name: str = ""
    bus_id: str = ""
    links_to_gpu: Counter[int] = field(default_factory=Counter)
    links_to_switch: int = 0

    @property
    def bdf(self) -> str:
        """sysfs form of the PCI address: NVML's ``00000000:3B:00.0`` → ``0000:3b:00.0``."""
        return self.bus_id[-12:].lower()


class GpuCollector:
    """Reads every GPU's inventory, health and pairwise links each cycle."""

    name = NAME

    def __init__(self, *, clock: Clock, sys_root: Path, nvml: Nvml | None = None) -> None:
        self._clock = clock
        self._sys_root = sys_root
        self._module = nvml
        """The NVML module: the one given, else ``pynvml`` once the first init imports it."""
        self._initialised = False
        self._unavailable: tuple[float, str] | None = None
        self._events: Any = None
        self._events_supported = True
        self._registered: set[int] = set()
        self._xid_count: Counter[int] = Counter()
        self._last_xid: dict[int, int] = {}
        self._recent_xids: dict[int, deque[tuple[int, float]]] = {}
        """Per GPU, the latest critical XIDs and the monotonic time each was read."""
        self._identity: dict[int, tuple[str, str, str]] = {}
        self._driver_version: str | None = None

    def collect(self) -> GpuSection:
        nv = self._init()
        try:
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as e:
            raise CollectorError(f"nvmlDeviceGetCount: {_err(e)}") from e
        if count == 0:
            raise NoData("no-gpus")
        measured_at = self._clock.wall()
        gpus = [self._open(i) for i in range(count)]
        event_reasons = self._drain_xids(gpus)
        by_bdf = {g.bdf: g.index for g in gpus if g.bus_id}
        devices = [self._device(g, by_bdf, event_reasons) for g in gpus]
        return GpuSection(
            measured_at=measured_at,
            driver_version=self._driver(),
            devices=devices,
            topology=self._topology(gpus),
            nvlinks=_nvlink_matrix(gpus),
        )

    def close(self) -> None:
        """Free the event set and shut NVML down; safe to call twice."""
        if not self._initialised:
            return
        nv = self._nvml
        if self._events is not None:
            try:
                nv.nvmlEventSetFree(self._events)
            except nv.NVMLError as e:
                log.debug("nvmlEventSetFree: %s", _err(e))
        try:
            nv.nvmlShutdown()
        except nv.NVMLError as e:
            log.debug("nvmlShutdown: %s", _err(e))
        self._initialised, self._events, self._registered = False, None, set()

    # ------------------------------------------------------------------ setup

    @property
    def _nvml(self) -> Nvml:
        """The module, for the readers below: each runs after :meth:`_init` loaded it."""
        assert self._module is not None
        return self._module

    def _init(self) -> Nvml:
        if self._initialised:
            return self._nvml
        if self._unavailable is not None:
            since, reason = self._unavailable
            if self._clock.monotonic() - since < INIT_RETRY_S:
                raise NoData(reason)  # loading a missing library each cycle costs a search
        if self._module is None:
            try:
                import pynvml
            except ImportError as e:
                raise NoData(f"nvml-unavailable: pynvml not installed ({e})") from e
            self._module = pynvml
        nv = self._module
        try:
            nv.nvmlInit()
        except (nv.NVMLError_LibraryNotFound, nv.NVMLError_DriverNotLoaded) as e:
            self._unavailable = (self._clock.monotonic(), f"nvml-unavailable: {e}")
            raise NoData(self._unavailable[1]) from e
        except nv.NVMLError as e:
            raise CollectorError(f"nvmlInit: {_err(e)}") from e
        self._initialised = True
        return nv

    def _open(self, index: int) -> _Gpu:
        """Get a GPU's handle and identity; a lost GPU keeps the identity seen before."""
        nv = self._nvml
        gpu = _Gpu(index=index, probe=_Probe(nv))
        gpu.handle = gpu.probe("handle", nv.nvmlDeviceGetHandleByIndex, index)
        uuid = name = bus_id = None
        if gpu.handle is not None:
            uuid = gpu.probe("uuid", nv.nvmlDeviceGetUUID, gpu.handle)
            name = gpu.probe("name", nv.nvmlDeviceGetName, gpu.handle)
            pci = gpu.probe("pci", nv.nvmlDeviceGetPciInfo, gpu.handle)
            bus_id = None if pci is None else pci.busId
        seen = self._identity.get(index, ("", "", ""))
        gpu.uuid = _text(uuid) if uuid is not None else seen[0]
        gpu.name = _text(name) if name is not None else seen[1]
        gpu.bus_id = _text(bus_id) if bus_id is not None else seen[2]
        self._identity[index] = (gpu.uuid, gpu.name, gpu.bus_id)
        return gpu

    # ------------------------------------------------------------------- XIDs

    def _drain_xids(self, gpus: list[_Gpu]) -> list[str]:
        """Register new GPUs for XID events, then read every queued event without waiting.

        Returns reasons that concern every GPU (the event set itself failing).
        """
        nv = self._nvml
        if self._events is None and self._events_supported:
            try:
                self._events = nv.nvmlEventSetCreate()
            except (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound):
                self._events_supported = False
            except nv.NVMLError as e:
                return [f"xid-events: {_err(e)}"]
        if self._events is None:
            return []
        wanted = (
            nv.nvmlEventTypeXidCriticalError
            | nv.nvmlEventTypeDoubleBitEccError
            | nv.nvmlEventTypeSingleBitEccError
        )
        for g in gpus:
            if g.index in self._registered or g.handle is None:
                continue
            try:
                mask = nv.nvmlDeviceGetSupportedEventTypes(g.handle) & wanted
                if mask:
                    nv.nvmlDeviceRegisterEvents(g.handle, mask, self._events)
            except (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound):
                pass  # "the event set can still be used": this GPU just cannot deliver
            except nv.NVMLError as e:
                g.probe.fail("xid-events", e)
                continue  # try again next cycle
            self._registered.add(g.index)
        by_handle = {_handle_key(g.handle): g.index for g in gpus if g.handle is not None}
        by_handle.pop(None, None)
        by_uuid = {g.uuid: g.index for g in gpus if g.uuid}
        for _ in range(_MAX_EVENTS_PER_CYCLE):
            try:
                event = nv.nvmlEventSetWait(self._events, 0)
            except nv.NVMLError_Timeout:
                break  # queue empty
            except nv.NVMLError as e:
                return [f"xid-events: {_err(e)}"]
            if event.eventType != nv.nvmlEventTypeXidCriticalError:
                continue  # ECC events: the volatile ECC counter reports those
            try:
                index = by_uuid.get(_text(nv.nvmlDeviceGetUUID(event.device)))
            except nv.NVMLError:
                index = None  # XID 79, fallen off the bus: the handle still says which GPU
            if index is None:
                index = by_handle.get(_handle_key(event.device))
            xid = int(event.eventData)
            if index is None:
                log.warning("XID %d from a GPU not in this collection; dropped", xid)
            elif xid not in IGNORED_XIDS:
                self._xid_count[index] += 1
                self._last_xid[index] = xid
                recent = self._recent_xids.setdefault(index, deque(maxlen=MAX_RECENT_XIDS))
                recent.appendleft((xid, self._clock.monotonic()))
        return []

    # -------------------------------------------------------------- one GPU

    def _device(self, g: _Gpu, by_bdf: dict[str, int], event_reasons: list[str]) -> GpuDevice:
        nv, probe, h = self._nvml, g.probe, g.handle

        def read(what: str, fn: Any, *args: Any) -> Any:
            return None if h is None else probe(what, fn, h, *args)

        # The CPU-side node is what kubelet's topology manager aligns to: sysfs first, else
        # the node NVML's memory affinity names (what `nvidia-smi topo -m` prints as "NUMA
        # Affinity"; VMs often leave sysfs at -1). Not nvmlDeviceGetNumaNodeId: on coherent
        # (Grace Hopper) systems that is the GPU's own memory node, a different thing.
        numa = self._sysfs_numa(g.bdf)
        if numa is None:
            affinity = read(
                "numa-affinity",
                nv.nvmlDeviceGetMemoryAffinity,
                _NODE_SET_WORDS,
                nv.NVML_AFFINITY_SCOPE_NODE,
            )
            numa = _single_node(affinity)
        mem = read("memory", nv.nvmlDeviceGetMemoryInfo)
        util = read("utilization", nv.nvmlDeviceGetUtilizationRates)
        mig = read("mig-mode", nv.nvmlDeviceGetMigMode)
        mig_enabled = None if mig is None else mig[0] == nv.NVML_DEVICE_MIG_ENABLE
        ecc = read("ecc-mode", nv.nvmlDeviceGetEccMode)
        ecc_enabled = None if ecc is None else ecc[0] == nv.NVML_FEATURE_ENABLED
        ecc_unc = None
        if ecc_enabled:
            ecc_unc = read(
                "ecc-errors",
                nv.nvmlDeviceGetTotalEccErrors,
                nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nv.NVML_VOLATILE_ECC,
            )
        retired = read("retired-pages", nv.nvmlDeviceGetRetiredPagesPendingStatus)
        retired_count = self._retired_pages(read)
        rows = read("remapped-rows", nv.nvmlDeviceGetRemappedRows)
        nvlinks_active = None if h is None else self._nvlinks(g, by_bdf)
        mem_total_b = _bounded(getattr(mem, "total", None), _MAX_BYTES)
        migs = self._mig_devices(g, mem_total_b) if mig_enabled and h is not None else []
        dev = GpuDevice(
            index=g.index,
            uuid=g.uuid,
            name=g.name,
            pci_bus_id=g.bus_id,
            numa_node=numa,
            mem_total_b=mem_total_b,
            mem_used_b=_bounded(getattr(mem, "used", None), _MAX_BYTES),
            util_gpu_pct=_pct(getattr(util, "gpu", None)),
            util_mem_pct=_pct(getattr(util, "memory", None)),
            mig_enabled=mig_enabled,
            mig_devices=migs,
            ecc_enabled=ecc_enabled,
            ecc_uncorrected_volatile=_bounded(ecc_unc, _MAX_COUNT),
            retired_pages_pending=None if retired is None else retired == nv.NVML_FEATURE_ENABLED,
            remapped_rows_pending=None if rows is None else bool(rows[2]),
            remapping_failed=None if rows is None else bool(rows[3]),
            nvlinks_active=nvlinks_active,
            xid_critical=self._xid_count[g.index],
            last_xid=self._last_xid.get(g.index),
            health="ok",
            health_reasons=[],
            xid_recent=self._xids_of(g.index),
            retired_pages=retired_count,
            lost=probe.lost,
        )
        return _with_health(dev, probe, event_reasons)

    def _xids_of(self, index: int) -> list[XidSeen]:
        """GPU ``index``'s latest critical XIDs, newest first, aged by the monotonic clock."""
        now = self._clock.monotonic()
        return [
            XidSeen(xid=min(xid, _MAX_COUNT), age_s=min(max(0.0, now - at), _MAX_AGE_S))
            for xid, at in self._recent_xids.get(index, ())
        ]

    def _retired_pages(self, read: Any) -> int | None:
        """Pages retired for either cause (many single-bit errors, a double-bit error);
        None when the GPU answers for neither (no page retirement: Ampere and later remap
        rows instead)."""
        nv = self._nvml
        causes = (
            nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        )
        counts = [read(f"retired-pages-{c}", nv.nvmlDeviceGetRetiredPages, c) for c in causes]
        known = [len(c) for c in counts if c is not None]
        return _bounded(sum(known), _MAX_COUNT) if known else None

    def _sysfs_numa(self, bdf: str) -> int | None:
        """The PCI device's NUMA node from sysfs; -1 (firmware does not say) becomes None.

        A missing file means sysfs is not mounted or the device is not PCI: unknown, not an
        error.
        """
        if not bdf:
            return None
        path = self._sys_root / "bus" / "pci" / "devices" / bdf / "numa_node"
        try:
            node = int(read_text(path).strip())
        except (CollectorError, ValueError):
            return None
        return _bounded(node, _MAX_INDEX)

    def _mig_devices(self, g: _Gpu, parent_total_b: int | None) -> list[MigDevice]:
        nv, probe = self._nvml, g.probe
        out: list[MigDevice] = []
        for slot in range(probe("mig-count", nv.nvmlDeviceGetMaxMigDeviceCount, g.handle) or 0):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(g.handle, slot)
            except nv.NVMLError_NotFound:
                continue  # an empty slot
            except nv.NVMLError as e:
                probe.fail("mig-device", e)
                continue
            uuid = probe("mig-uuid", nv.nvmlDeviceGetUUID, mig)
            if uuid is None or probe.lost:
                continue
            mem = probe("mig-memory", nv.nvmlDeviceGetMemoryInfo, mig)
            gi_id = _bounded(probe("mig-gi", nv.nvmlDeviceGetGpuInstanceId, mig), _MAX_INDEX)
            ci_id = _bounded(probe("mig-ci", nv.nvmlDeviceGetComputeInstanceId, mig), _MAX_INDEX)
            profile, start = self._mig_profile(g, gi_id, ci_id, parent_total_b)
            out.append(
                MigDevice(
                    uuid=_text(uuid),
                    gpu_instance_id=gi_id,
                    compute_instance_id=ci_id,
                    mem_total_b=_bounded(getattr(mem, "total", None), _MAX_BYTES),
                    profile=profile,
                    placement_start=start,
                )
            )
        return out[:64]

    def _mig_profile(
        self, g: _Gpu, gi_id: int | None, ci_id: int | None, parent_total_b: int | None
    ) -> tuple[str | None, int | None]:
        """The instance's profile name and first memory slice, the way go-nvlib's
        ``GetProfile`` finds them (the device plugin's resource names come from it): the
        GPU instance's profile id matched among the parent's GPU-instance profiles, its
        compute instance's among the GPU instance's compute-instance profiles, the memory
        as the profile's share of the board rounded up to an eighth."""
        nv, probe = self._nvml, g.probe
        if gi_id is None:
            return None, None
        gi = probe("mig-gi-handle", nv.nvmlDeviceGetGpuInstanceById, g.handle, gi_id)
        info = None if gi is None else probe("mig-gi-info", nv.nvmlGpuInstanceGetInfo, gi)
        if info is None:
            return None, None
        start = _bounded(info.placement.start, _MAX_INDEX)
        found = self._gi_profile(g, int(info.profileId))
        if found is None or ci_id is None or parent_total_b is None:
            return None, start
        index, memory_mb = found
        ci = probe("mig-ci-handle", nv.nvmlGpuInstanceGetComputeInstanceById, gi, ci_id)
        ci_info = None if ci is None else probe("mig-ci-info", nv.nvmlComputeInstanceGetInfo, ci)
        compute = None if ci_info is None else self._ci_slices(g, gi, int(ci_info.profileId))
        if compute is None:
            return None, start
        slices = GI_PROFILE_SLICES[index]
        gb = _mig_memory_gb(parent_total_b, memory_mb)
        name = f"{slices}g.{gb}gb" if compute == slices else f"{compute}c.{slices}g.{gb}gb"
        return name + ("+me" if index in GI_PROFILE_MEDIA else ""), start

    def _gi_profile(self, g: _Gpu, profile_id: int) -> tuple[int, int] | None:
        """(profile index, memory MB) of the parent's GPU-instance profile with this id."""
        nv = self._nvml
        for index in range(nv.NVML_GPU_INSTANCE_PROFILE_COUNT):
            if index not in GI_PROFILE_SLICES:
                continue
            try:
                info = nv.nvmlDeviceGetGpuInstanceProfileInfo(g.handle, index)
            except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
                continue  # a profile this GPU does not have
            except nv.NVMLError as e:
                g.probe.fail("mig-gi-profile", e)
                return None
            if info.id == profile_id:
                return index, int(info.memorySizeMB)
        return None

    def _ci_slices(self, g: _Gpu, gi: Any, profile_id: int) -> int | None:
        """Compute slices of the GPU instance's compute-instance profile with this id."""
        nv = self._nvml
        for index in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            if index not in CI_PROFILE_SLICES:
                continue
            for engine in range(nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT):
                try:
                    info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, engine)
                except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
                    continue
                except nv.NVMLError as e:
                    g.probe.fail("mig-ci-profile", e)
                    return None
                if info.id == profile_id:
                    return CI_PROFILE_SLICES[index]
        return None

    def _nvlinks(self, g: _Gpu, by_bdf: dict[str, int]) -> int | None:
        """Count active links and note where each goes: another GPU, or an NVSwitch.

        Links are probed upward from 0 until NVML says the index is past the last link
        (InvalidArgument) or that the GPU has no NVLink at all (NotSupported on link 0).
        """
        nv, probe = self._nvml, g.probe
        if probe.lost:
            return None
        active = probed = 0
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            try:
                state = nv.nvmlDeviceGetNvLinkState(g.handle, link)
            except nv.NVMLError_InvalidArgument:
                break
            except nv.NVMLError as e:
                probe.fail("nvlink", e)
                break
            probed += 1
            if state != nv.NVML_FEATURE_ENABLED:
                continue
            active += 1
            remote = probe("nvlink-remote", nv.nvmlDeviceGetNvLinkRemotePciInfo, g.handle, link)
            peer = None if remote is None else by_bdf.get(_text(remote.busId)[-12:].lower())
            if peer is not None:
                g.links_to_gpu[peer] += 1
            elif (
                probe("nvlink-remote-type", nv.nvmlDeviceGetNvLinkRemoteDeviceType, g.handle, link)
                == nv.NVML_NVLINK_DEVICE_TYPE_SWITCH
            ):
                g.links_to_switch += 1
        return active if probed else None

    # ---------------------------------------------------------------- pairs

    def _topology(self, gpus: list[_Gpu]) -> list[list[int | None]]:
        """Common-ancestor level per pair, read once per pair (it is symmetric).

        A pair call cannot say which GPU is lost, so GpuIsLost here blames neither: each
        GPU's own calls decide that.
        """
        nv, n = self._nvml, len(gpus)
        topo: list[list[int | None]] = [[0 if i == j else None for j in range(n)] for i in range(n)]
        for i, a in enumerate(gpus):
            for j in range(i + 1, n):
                b = gpus[j]
                if a.handle is None or b.handle is None or a.probe.lost or b.probe.lost:
                    continue
                try:
                    level = nv.nvmlDeviceGetTopologyCommonAncestor(a.handle, b.handle)
                except nv.NVMLError_GpuIsLost:
                    continue
                except nv.NVMLError as e:
                    a.probe.fail(f"topology-{j}", e)
                    continue
                topo[i][j] = topo[j][i] = _bounded(level, 100)
        return topo

    def _driver(self) -> str | None:
        """The driver version; it cannot change while NVML is up, so it is read once."""
        if self._driver_version is None:
            nv = self._nvml
            try:
                self._driver_version = _text(nv.nvmlSystemGetDriverVersion())
            except nv.NVMLError as e:
                log.debug("nvmlSystemGetDriverVersion: %s", _err(e))
        return self._driver_version


def _nvlink_matrix(gpus: list[_Gpu]) -> list[list[int]]:
    """``m[i][j]``: links from i that reach j, directly or through the NVSwitch fabric.

    On NVSwitch systems (HGX) every link ends at a switch and every GPU on the fabric reaches
    every other; the pair gets the smaller of the two GPUs' switch link counts, which is the
    ``NV#`` that ``nvidia-smi topo -m`` prints there.
    """
    n = len(gpus)
    m = [[0] * n for _ in range(n)]
    for a in gpus:
        for b in gpus:
            if a.index != b.index:
                direct = a.links_to_gpu[b.index]
                fabric = min(a.links_to_switch, b.links_to_switch)
                m[a.index][b.index] = min(direct + fabric, 64)
    return m


def _with_health(dev: GpuDevice, probe: _Probe, extra: list[str]) -> GpuDevice:
    """Judge health from the fields; read failures are listed but do not change it."""
    bad: list[str] = []
    warn: list[str] = []
    if probe.lost:
        bad.append("gpu-lost")
    if dev.xid_critical:
        bad.append(f"xid-critical: {dev.xid_critical} (last {dev.last_xid})")
    if dev.ecc_uncorrected_volatile:
        bad.append(f"ecc-uncorrected-volatile: {dev.ecc_uncorrected_volatile}")
    if dev.remapping_failed:
        bad.append("row-remap-failed")
    if dev.remapped_rows_pending:
        warn.append("row-remap-pending")
    if dev.retired_pages_pending:
        warn.append("retired-pages-pending")
    health = "unhealthy" if bad else "degraded" if warn else "ok"
    reasons = (bad + warn + probe.reasons + extra)[:_MAX_REASONS]
    return msgspec.structs.replace(dev, health=health, health_reasons=reasons)


def _handle_key(handle: Any) -> int | None:
    """NVML handles are ctypes pointers, fixed for the session: compare their addresses."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return None


def _text(value: str | bytes) -> str:
    """nvidia-ml-py 13 returns str; older bindings return bytes."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _bounded(value: Any, hi: int) -> int | None:
    """An integer within [0, hi], else None: one absurd reading must not void the section."""
    if value is None or not 0 <= value <= hi:
        return None
    return int(value)


def _mig_memory_gb(parent_total_b: int, memory_mb: int) -> int:
    """go-nvlib's ``getMigMemorySizeGB``: the instance's share of the board's memory
    rounded up to an eighth, times the board's memory in whole GB (rounded up), rounded
    half away from zero as Go's ``math.Round`` does."""
    share = math.ceil(memory_mb * 2**20 / parent_total_b * 8) / 8
    return math.floor(share * ((parent_total_b + 2**30 - 1) // 2**30) + 0.5)


def _single_node(node_set: Any) -> int | None:
    """The one NUMA node set in an NVML node mask (array of 64-bit words), else None.

    A GPU equidistant from several nodes has no single node to align to.
    """
    if node_set is None:
        return None
    mask = 0
    for i, word in enumerate(node_set):
        mask |= int(word) << (64 * i)
    if mask == 0 or mask & (mask - 1):
        return None
    return mask.bit_length() - 1


def _pct(value: Any) -> float | None:
    bounded = _bounded(value, _MAX_PCT)
    return None if bounded is None else float(bounded)


def _err(e: Exception) -> str:
    """``NVMLError_NoPermission`` → ``NoPermission``: short enough for a health reason."""
    return type(e).__name__.removeprefix("NVMLError_")
