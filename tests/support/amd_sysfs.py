"""A fake sysfs tree for AMD GPUs, made of real KFD `properties` files (tests/detect/data/amd): what envkit's AMD
probe reads (envkit.detect.amd), pointed at with ENVKIT_TEST_SYSFS in commands the tests start, and one directory per
node name for the tests' Slurm nodes. Only sysfs is faked: the files are what real kernels wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

AMD_DATA = Path(__file__).resolve().parents[1] / "detect" / "data" / "amd"
CPU = "kfd-props-cpu-epyc112-k8sdp.txt"
MI300X = "kfd-props-mi300x-rocprofsdk.txt"
MI210 = "kfd-props-mi210-k8sdp.txt"
NAVI23 = "kfd-props-navi23-gfx1032-rocprofsdk.txt"
MI25 = "kfd-props-mi25-vega10-k8sdp.txt"


def make_sysfs(root: Path, gpus: Sequence[str], amdgpu_version: Optional[str] = "6.12.12",
               cpus: Sequence[str] = (CPU,)) -> Path:
    """``root`` laid out as /sys: KFD topology nodes 0.. (the CPU nodes first, as kernels number them), then the
    GPU nodes, each a copy of a real properties file; /sys/module/amdgpu/version when ``amdgpu_version`` is given
    (None: the kernel's own driver, which writes none)."""
    nodes = root / "class" / "kfd" / "kfd" / "topology" / "nodes"
    for number, name in enumerate([*cpus, *gpus]):
        node = nodes / str(number)
        node.mkdir(parents=True)
        (node / "properties").write_bytes((AMD_DATA / name).read_bytes())
    module = root / "module" / "amdgpu"
    module.mkdir(parents=True)
    if amdgpu_version is not None:
        (module / "version").write_text(f"{amdgpu_version}\n", encoding="utf-8")
    return root
