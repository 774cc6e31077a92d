"""The AMD probe: the GPUs the kernel's KFD lists and the amdgpu driver, read from sysfs without ROCm installed.

``/sys/class/kfd/kfd/topology/nodes/N/properties`` is one node per CPU socket and GPU (a partitioned MI300X is one node
per partition, as HIP numbers them). A GPU node has SIMDs; its ``gfx_target_version`` (major * 10000 + minor * 100 +
stepping) is the target its code must be built for, and its ``device_id`` the PCI id that names it (envs/rocm.yaml).
Older kernels write no ``gfx_target_version``: the device id then gives the target where rocm.yaml knows it, and
nothing is guessed where it does not. ``/sys/module/amdgpu/version`` is the packaged driver's version; the kernel's
own amdgpu writes none, and is known by the kernel's release. amd-smi or rocm-smi, where installed, cross-check the
GPUs (envkit.detect.amd_smi). Every read is bounded: a node's file that is not a regular file, or is huge, is said
and skipped; the whole probe has a time limit (detect_machine's).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Mapping, NamedTuple, Optional, Sequence

from envkit.machines.amd import AMD, AmdgpuDriver, AmdTable
from envkit.machines.profile import AMD_GPUS, AMDGPU, Gpu, MachineProfile
from envkit.text.terminal import printable
from envkit.versions import gfx_from_kfd

KFD = "KFD topology"
KFD_NODES = Path("class/kfd/kfd/topology/nodes")
MODULE_VERSION = "/sys/module/amdgpu/version"
KERNEL_RELEASE = "the kernel's release (/proc/sys/kernel/osrelease)"
ROCM_TABLE = "envs/rocm.yaml"
AMD_VENDOR = 0x1002
# The variable envkit's tests point detection at a sysfs tree of theirs with (a directory per Slurm node's name, when
# there is one: the nodes of the tests' cluster are this machine). Nothing else ever sets it.
TEST_SYSFS = "ENVKIT_TEST_SYSFS"
MAX_PROPERTIES = 64 << 10  # bytes: a real properties file is about 1 KiB
MAX_NODES = 1024


class KfdNode(NamedTuple):
    """A GPU node of the KFD topology, as its properties file says it."""

    node: int
    properties: Mapping[str, int]

    @property
    def device_id(self) -> Optional[int]:
        return self.properties.get("device_id")


def sysfs_root(environ: Mapping[str, str]) -> Path:
    """/sys, or in envkit's own tests the tree ``$ENVKIT_TEST_SYSFS`` names (``$ENVKIT_TEST_SYSFS/$SLURMD_NODENAME``
    inside a job of the tests' cluster, where that directory exists)."""
    value = environ.get(TEST_SYSFS)
    if not value:
        return Path("/sys")
    root, node = Path(value), environ.get("SLURMD_NODENAME")
    return root / node if node and (root / node).is_dir() else root


def parse_properties(text: str) -> dict[str, int]:
    """A KFD properties file ("simd_count 1216" per line) as numbers; lines that are not "name number" are
    ignored."""
    out = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].isascii() and words[1].isdigit():
            out[words[0]] = int(words[1])
    return out


def probe_amd(sys_root: Path, table: AmdTable, proc_root: Path = Path("/proc"), timeout: float = 10.0,
              smi_commands: Sequence[str] = ("amd-smi", "rocm-smi")) -> MachineProfile:
    """The AMD GPUs and the amdgpu driver: a partial profile (sources name what was found; notes what was not)."""
    notes: list[str] = []
    nodes = _gpu_nodes(sys_root / KFD_NODES, notes)
    if nodes is None:
        return MachineProfile(notes=tuple(notes))
    sources = {AMD_GPUS: KFD}
    gpus = tuple(_gpu(index, node, table, notes) for index, node in enumerate(nodes))
    driver, driver_source = _driver(sys_root, proc_root, notes)
    if driver is not None:
        sources[AMDGPU] = driver_source
    if gpus:
        from envkit.detect.amd_smi import cross_check

        gpus = cross_check(gpus, smi_commands, timeout, notes)
    return MachineProfile(gpus=gpus, sources=sources, notes=tuple(notes), amdgpu=driver)


def _gpu_nodes(nodes_dir: Path, notes: list[str]) -> Optional[list[KfdNode]]:
    """The GPU nodes in node order; None when there is no KFD (no AMD GPU driver loaded): a normal answer."""
    try:
        names = os.listdir(nodes_dir)
    except FileNotFoundError:
        return None  # said by nothing: most machines have no AMD GPU
    except OSError as exc:
        notes.append(f"{KFD}: {nodes_dir} cannot be read: {exc.strerror or exc}")
        return None
    numbers = sorted(int(name) for name in names if name.isascii() and name.isdigit())[:MAX_NODES]
    found = []
    for number in numbers:
        text = _read_bounded(nodes_dir / str(number) / "properties", notes)
        if text is None:
            continue
        properties = parse_properties(text)
        if properties.get("simd_count", 0) == 0:
            continue  # a CPU node (gfx_target_version 0)
        if properties.get("vendor_id", AMD_VENDOR) != AMD_VENDOR:
            notes.append(f"{KFD}: node {number} is a GPU of PCI vendor {properties['vendor_id']:#06x}, not AMD: "
                         "not counted")
            continue
        found.append(KfdNode(number, properties))
    return found


def _read_bounded(path: Path, notes: list[str]) -> Optional[str]:
    """A sysfs file's text: opened without waiting (a FIFO in its place would wait forever for a writer), refused
    when it is not a regular file or is over MAX_PROPERTIES; None, with a note, when it cannot be read."""
    where = f"{KFD}: {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        notes.append(f"{where}: missing")
        return None
    except OSError as exc:
        notes.append(f"{where}: cannot be read: {exc.strerror or exc}")
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            notes.append(f"{where}: not a regular file: skipped")
            return None
        data = b""
        while len(data) <= MAX_PROPERTIES:
            chunk = os.read(fd, MAX_PROPERTIES + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > MAX_PROPERTIES:
            notes.append(f"{where}: over {MAX_PROPERTIES >> 10} KiB, not a KFD properties file: skipped")
            return None
        return data.decode("utf-8", errors="replace")
    except OSError as exc:
        notes.append(f"{where}: cannot be read: {exc.strerror or exc}")
        return None
    finally:
        os.close(fd)


def _gpu(index: int, node: KfdNode, table: AmdTable, notes: list[str]) -> Gpu:
    """One GPU of the KFD: its target from gfx_target_version, else from its device id in rocm.yaml, else unknown
    (said, never guessed)."""
    device = table.device(node.device_id)
    ident = f"{node.device_id:#06x}" if node.device_id is not None else "unknown"
    name = device.name if device is not None else f"AMD GPU (device {ident})"
    source = f"{KFD} + {ROCM_TABLE}" if device is not None else KFD  # the name (and maybe the target) from the table
    gfx = None
    version = node.properties.get("gfx_target_version")
    label = f"AMD GPU {index} (KFD node {node.node}, device {ident})"
    if version:
        try:
            gfx = gfx_from_kfd(version)
        except ValueError:
            notes.append(f"{label}: gfx_target_version {version} names no gfx target envkit can read: pass "
                         "--gpu-arch gfxNNNN (the target `rocminfo` prints) to state it")
    elif device is not None and device.gfx is not None:
        gfx = device.gfx
    else:
        notes.append(f"{label}: the KFD gives no gfx_target_version (an older kernel) and {ROCM_TABLE} does not know "
                     "the device: its gfx target is unknown; pass --gpu-arch gfxNNNN (the target `rocminfo` prints)")
    if gfx is not None and not table.knows(gfx):
        notes.append(f"{label}: {gfx} is not a target {ROCM_TABLE} knows: no ROCm build lists it")
    memory = _memory_mib(node)
    return Gpu(index=index, name=printable(name), compute_capability=None, memory_mib=memory, source=source,
               vendor=AMD, gfx=gfx)


def _memory_mib(node: KfdNode) -> Optional[int]:
    size = node.properties.get("local_mem_size", 0)
    return size >> 20 if size else None


def _driver(sys_root: Path, proc_root: Path, notes: list[str]) -> tuple[Optional[AmdgpuDriver], str]:
    """The packaged driver's version, else the kernel's release (its amdgpu has no version of its own)."""
    path = sys_root / "module" / "amdgpu" / "version"
    text = _read_bounded(path, []) if os.path.lexists(path) else None
    if text is not None:
        try:
            return AmdgpuDriver.parse(text), MODULE_VERSION
        except ValueError:
            notes.append(f"{MODULE_VERSION}: {printable(text.strip()[:60])!r} is not a driver version: not taken")
    try:
        release = (proc_root / "sys" / "kernel" / "osrelease").read_text(encoding="utf-8", errors="replace").strip()
        return AmdgpuDriver.parse(f"kernel {release}"), KERNEL_RELEASE
    except (OSError, ValueError):
        notes.append(f"{MODULE_VERSION}: absent, and the kernel's release cannot be read: the amdgpu driver is "
                     "unknown")
        return None, ""
