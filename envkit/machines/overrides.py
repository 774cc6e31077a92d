"""The command-line overrides of a machine profile: ``--cuda X.Y`` and ``--gpu-arch`` (a compute capability or an AMD
GPU's gfx target), parsed before any probe runs and applied to the profile detected or read. Pure."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence, Union

from envkit.errors import ProfileError
from envkit.machines.amd import AMD, NVIDIA
from envkit.machines.profile import AMD_GPUS, CUDA_DRIVER, DRIVER_VERSION, GPUS, Gpu, MachineProfile
from envkit.versions import ComputeCapability, CudaVersion, parse_gfx


class Overrides(NamedTuple):
    """``--cuda X.Y`` and ``--gpu-arch X.Y`` or ``gfxNNNN`` (repeatable), parsed before any probe runs."""

    cuda: Optional[CudaVersion] = None
    gpu_archs: tuple[Union[ComputeCapability, str], ...] = ()  # a compute capability, or an AMD GPU's gfx target


def parse_overrides(cuda: Optional[str] = None, gpu_archs: Sequence[str] = ()) -> Overrides:
    try:
        cuda_driver = CudaVersion.parse(cuda) if cuda is not None else None
    except ValueError as exc:
        raise ProfileError(f"--cuda: {exc}") from None
    archs: list[Union[ComputeCapability, str]] = []
    for value in gpu_archs:
        if value.strip().lower().startswith("gfx"):  # an AMD GPU's target, stated where detection could not tell
            try:
                archs.append(parse_gfx(value))
            except ValueError as exc:
                raise ProfileError(f"--gpu-arch: {exc}") from None
            continue
        try:
            arch = ComputeCapability.parse(value)
        except ValueError as exc:
            raise ProfileError(f"--gpu-arch: {exc} (or an AMD GPU's target like 'gfx942')") from None
        if arch.major < 1:
            raise ProfileError(f"--gpu-arch {value}: no GPU has compute capability {value}",
                               hint="Give a real one, e.g. 8.0 for an A100 (`envkit detect` on the GPU node says).")
        archs.append(arch)
    return Overrides(cuda=cuda_driver, gpu_archs=tuple(archs))


def apply_overrides(profile: MachineProfile, overrides: Overrides) -> MachineProfile:
    """Apply the overrides to a profile.

    ``--cuda`` replaces the driver's CUDA; the driver version is then unknown (its floor is taken from the CUDA
    table). ``--gpu-arch`` makes the machine one GPU per value (a gfx target: an AMD GPU): where the count matches
    the detected GPUs, their names and memory are kept, otherwise the GPUs are named after the option.
    """
    sources = dict(profile.sources)
    notes = list(profile.notes)
    if overrides.cuda is not None:
        sources[CUDA_DRIVER] = "--cuda option"
        sources.pop(DRIVER_VERSION, None)
        profile = profile._replace(cuda_driver=overrides.cuda, driver_version=None)
    archs = overrides.gpu_archs
    if archs:
        keep_names = len(archs) == len(profile.gpus)
        gpus = tuple(
            (profile.gpus[i] if keep_names else Gpu(index=i, name="GPU from --gpu-arch", compute_capability=None))
            ._replace(source="--gpu-arch option", **_arch_fields(arch))
            for i, arch in enumerate(archs)
        )
        sources.pop(AMD_GPUS, None)
        sources[GPUS] = "--gpu-arch option"
        profile = profile._replace(gpus=gpus, hidden_gpus=())  # the option describes the whole machine
        if profile.cuda_driver is None and any(not gpu.is_amd for gpu in gpus):
            notes.append("--gpu-arch gives GPUs but nothing gives the driver's CUDA: add --cuda X.Y")
    return profile._replace(sources=sources, notes=tuple(notes))


def _arch_fields(arch: Union[ComputeCapability, str]) -> dict[str, Any]:
    if isinstance(arch, str):
        return {"vendor": AMD, "gfx": arch, "compute_capability": None}
    return {"vendor": NVIDIA, "gfx": None, "compute_capability": arch}
