"""The NVML probe (nvidia-ml-py): driver version, the driver's CUDA, and every GPU's name, architecture, memory.

NVML is what nvidia-smi itself is built on and the one interface NVIDIA keeps stable across driver branches, so
it is asked first. This module does not impose a time limit; ``envkit.detect`` runs it in a thread that has one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from envkit.detect.sources import NVML, gpu_from_name
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS, Gpu, MachineProfile
from envkit.text.terminal import printable
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

if TYPE_CHECKING:  # annotations only: detection that looks nothing up in the tables imports none of this
    from envkit.machines.gpu_names import GpuNameTable

_MIB = 1024 * 1024


def probe_nvml(gpu_names: GpuNameTable, nvml: Any = None) -> MachineProfile:
    """Ask NVML. Returns a partial profile: ``sources`` names the facts NVML gave, ``notes`` what went wrong.

    ``nvml`` is the pynvml module, or an object with the same functions (tests); None imports pynvml, here and
    not when envkit is imported, so commands that never detect do not pay for it.
    """
    if nvml is None:
        if not _library_loads():  # no driver: said at once, without importing pynvml (most of detection's cost)
            return MachineProfile(notes=(f"NVML: library {NVML_LIBRARY} not found",))
        try:
            import pynvml as nvml
        except ImportError:
            return MachineProfile(notes=("NVML: nvidia-ml-py (module pynvml) is not installed",))
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return MachineProfile(notes=(f"NVML: {_describe(nvml, exc)}",))
    try:
        return _read(nvml, gpu_names)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # the facts are read; a failed shutdown changes none of them


NVML_LIBRARY = "libnvidia-ml.so.1"  # the name pynvml loads on Linux


def _library_loads() -> bool:
    """Whether the dynamic loader finds NVML's library, as pynvml's nvmlInit will look for it.

    Asked with the call ctypes.CDLL itself makes on Linux (_ctypes.dlopen, in CDLL's default mode): importing the
    whole of ctypes only to ask cost about 1.5 ms of every `envkit list` on a machine without a driver
    (bench/list_startup.py)."""
    from _ctypes import RTLD_LOCAL, dlopen

    try:
        dlopen(NVML_LIBRARY, RTLD_LOCAL)
    except OSError:
        return False
    return True


def _describe(nvml: Any, exc: Exception) -> str:
    code = getattr(exc, "value", None)
    if code == nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return f"library {NVML_LIBRARY} not found"
    if code == nvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return "NVIDIA driver not loaded"
    why = _CAUSES.get(code)
    return f"{exc} ({why})" if why else str(exc)  # pynvml's own wording, and what it means where it is not plain


# NVML's return codes (nvml.h; the ABI keeps them), named here: pynvml is imported only where NVML is asked something.
NO_PERMISSION, GPU_IS_LOST, LIB_RM_VERSION_MISMATCH = 4, 15, 18
# What the NVML errors a working-looking machine gives mean, and what to do.
_CAUSES = {
    LIB_RM_VERSION_MISMATCH: "the driver's libraries and its loaded kernel module are different versions, as after "
                             "a driver upgrade without a reboot: CUDA programs fail until the machine is rebooted (or "
                             "the nvidia modules reloaded); what the kernel module says is used meanwhile",
    NO_PERMISSION: "this user may not open the GPUs' device files /dev/nvidia*, so CUDA programs run by it cannot use "
                   "them either: ask the administrator for access (or, in a container, for the devices)",
    GPU_IS_LOST: "the GPU fell off the bus (Xid 79 in dmesg): no program can use it until it is reset or the machine "
                 "rebooted",
}


def _text(value: Any) -> str:
    # pynvml returns str in recent releases and bytes in older ones.
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value).strip()


class _Reader:
    """Calls NVML functions one by one, keeping a note for each that fails instead of giving up."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.notes: list[str] = []

    def call(self, what: str, function: Callable[..., Any], *args: Any) -> Optional[Any]:
        try:
            return function(*args)
        except self.nvml.NVMLError as exc:
            self.notes.append(f"NVML: {what}: {_describe(self.nvml, exc)}")
            return None


def _read(nvml: Any, gpu_names: GpuNameTable) -> MachineProfile:
    reader = _Reader(nvml)
    sources = {}
    driver_version = _driver_version(reader)
    if driver_version is not None:
        sources[DRIVER_VERSION] = NVML
    cuda_driver = _cuda_driver(reader)
    if cuda_driver is not None:
        sources[CUDA_DRIVER] = NVML
    gpus: tuple[Gpu, ...] = ()
    count = reader.call("GPU count", nvml.nvmlDeviceGetCount)
    if count is not None:
        found = [_gpu(reader, index, gpu_names) for index in range(count)]
        # CUDA numbers only the GPUs this process may open, from 0: so are they here when NVML refused some.
        gpus = tuple(gpu._replace(index=number) for number, gpu in enumerate(g for g in found if g is not None))
        sources[GPUS] = NVML
    return MachineProfile(
        gpus=gpus, cuda_driver=cuda_driver, driver_version=driver_version, sources=sources, notes=tuple(reader.notes)
    )


def _driver_version(reader: _Reader) -> Optional[DriverVersion]:
    raw = reader.call("driver version", reader.nvml.nvmlSystemGetDriverVersion)
    if raw is None:
        return None
    try:
        return DriverVersion.parse(_text(raw))
    except ValueError:
        reader.notes.append(f"NVML: driver version {_text(raw)!r} not understood")
        return None


def _cuda_driver(reader: _Reader) -> Optional[CudaVersion]:
    nvml = reader.nvml
    try:
        # _v2 asks libcuda itself: the most accurate answer, but an error where libcuda.so.1 is missing.
        value = nvml.nvmlSystemGetCudaDriverVersion_v2()
    except nvml.NVMLError as exc:
        code = getattr(exc, "value", None)
        why = "libcuda.so.1 not found" if code == nvml.NVML_ERROR_LIBRARY_NOT_FOUND else str(exc)
        try:
            # The first version answers without libcuda, with the CUDA the NVML library was built for.
            value = nvml.nvmlSystemGetCudaDriverVersion()
        except nvml.NVMLError as older:
            reader.notes.append(f"NVML: CUDA driver version unavailable ({why}; {_describe(nvml, older)})")
            return None
        reader.notes.append(f"NVML: CUDA driver version from the NVML library, not from libcuda ({why})")
    try:
        return CudaVersion.from_driver_int(int(value))
    except (TypeError, ValueError):
        reader.notes.append(f"NVML: CUDA driver version {value!r} not understood")
        return None


def _gpu(reader: _Reader, index: int, gpu_names: GpuNameTable) -> Optional[Gpu]:
    """One GPU; what NVML cannot tell about it stays unknown, and the other GPUs are read all the same. None for
    a GPU this process may not open (NVML counts it all the same): CUDA here cannot use it either."""
    nvml = reader.nvml
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == NO_PERMISSION:
            reader.notes.append(f"NVML: GPU {index}: {exc}: this process may not open it (a Slurm job's or a "
                                "container's device limits), so CUDA cannot use it either: not counted, and the "
                                "GPUs it may use are numbered from 0, as CUDA numbers them")
            return None
        reader.notes.append(f"NVML: GPU {index}: {_describe(nvml, exc)}")
        return Gpu(index=index, name="unknown GPU", compute_capability=None, source=NVML)
    raw_name = reader.call(f"GPU {index} name", nvml.nvmlDeviceGetName, handle)
    name = printable(_text(raw_name)) if raw_name is not None else "unknown GPU"  # never a terminal's escape
    memory = reader.call(f"GPU {index} memory", nvml.nvmlDeviceGetMemoryInfo, handle)
    memory_mib = int(memory.total) // _MIB if memory is not None else None
    capability = reader.call(f"GPU {index} compute capability", nvml.nvmlDeviceGetCudaComputeCapability, handle)
    uuid = _quiet(nvml, "nvmlDeviceGetUUID", handle)
    ids = {"uuid": _text(uuid) if uuid is not None else None, "mig_uuids": _mig_uuids(nvml, handle)}
    if capability is None:
        return gpu_from_name(index, name, gpu_names, NVML, memory_mib)._replace(**ids)
    major, minor = capability
    return Gpu(
        index=index,
        name=name,
        compute_capability=ComputeCapability(int(major), int(minor)),
        memory_mib=memory_mib,
        source=NVML,
        **ids,
    )


def _quiet(nvml: Any, function: str, *args: Any) -> Optional[Any]:
    """A call whose failure is no fact worth a note (a GPU without MIG, an NVML without the function): None."""
    call = getattr(nvml, function, None)
    if call is None:
        return None
    try:
        return call(*args)
    except nvml.NVMLError:
        return None


def _mig_uuids(nvml: Any, handle: Any) -> tuple[str, ...]:
    """The UUIDs of the GPU's MIG devices (what CUDA_VISIBLE_DEVICES=MIG-... names), when MIG mode is on."""
    mode = _quiet(nvml, "nvmlDeviceGetMigMode", handle)
    if not mode or mode[0] != 1:  # (current, pending); 1: NVML_DEVICE_MIG_ENABLE
        return ()
    uuids = []
    for slot in range(_quiet(nvml, "nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
        device = _quiet(nvml, "nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)  # empty slots: NOT_FOUND
        uuid = _quiet(nvml, "nvmlDeviceGetUUID", device) if device is not None else None
        if uuid is not None:
            uuids.append(_text(uuid))
    return tuple(uuids)
