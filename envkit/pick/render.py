"""Text and JSON renderings of profiles and resolutions. Pure: each returns a str or a JSON-ready dict."""

from __future__ import annotations

from typing import Any, Sequence

from envkit.machines.platforms import DEFAULT_PLATFORM, PLATFORMS
from envkit.machines.profile import (AMD_GPUS, AMDGPU, CUDA_DRIVER, DRIVER_VERSION, GPUS, L4T, LIBC, PLATFORM, Gpu,
                                     MachineProfile)
from envkit.pick.resolve import Candidate, Resolution, passed_over


def profile_text(profile: MachineProfile) -> str:
    """What ``envkit detect`` prints: every fact with the probe that gave it, then what the probes said."""
    sources = profile.sources
    lines = []
    if profile.name:
        lines.append(f"Machine: {profile.name}")
    amd = profile.amd_gpus
    if profile.cuda_driver is None:
        lines.append("No NVIDIA driver found." if amd else "No NVIDIA driver found: this machine can run CPU builds "
                     "only.")
    else:
        driver = f"{profile.driver_version} ({sources.get(DRIVER_VERSION, '?')})" if profile.driver_version else "unknown"
        lines.append(f"NVIDIA driver: {driver}")
        lines.append(f"Highest CUDA the driver supports: {profile.cuda_driver} ({sources.get(CUDA_DRIVER, '?')})")
    if profile.nvidia_gpus:
        lines.append(f"GPUs ({sources.get(GPUS, '?')}):")
        lines.extend(_gpu_line(gpu) for gpu in profile.nvidia_gpus)
    if amd:
        driver = f"{profile.amdgpu} ({sources.get(AMDGPU, '?')})" if profile.amdgpu else "unknown"
        lines.append(f"AMD GPU driver (amdgpu): {driver}")
        lines.append(f"AMD GPUs ({sources.get(AMD_GPUS, '?')}):")
        lines.extend(_gpu_line(gpu) for gpu in amd)
    elif not profile.gpus and profile.cuda_driver is not None:
        lines.append("GPUs: none visible" if profile.hidden_gpus else "GPUs: none")
    if profile.hidden_gpus:
        lines.append("Hidden by CUDA_VISIBLE_DEVICES (not counted):")
        lines.extend(_gpu_line(gpu) for gpu in profile.hidden_gpus)
    if profile.libc:
        lines.append(f"C library: {profile.libc} ({sources.get(LIBC, '?')})")
    if profile.platform != DEFAULT_PLATFORM:  # (linux-64 goes unsaid, as in detect --json)
        lines.append(f"Platform: {PLATFORMS[profile.platform].words} ({sources.get(PLATFORM, '?')})")
    if profile.l4t is not None:
        lines.append(f"Jetson, Linux for Tegra {profile.l4t} ({sources.get(L4T, '?')})")
    if profile.notes:
        lines.append("Probes:")
        lines.extend(f"  {note}" for note in profile.notes)
    return "\n".join(lines)


def _gpu_line(gpu: Gpu) -> str:
    memory = f", {gpu.memory_mib} MiB" if gpu.memory_mib is not None else ""
    if gpu.is_amd:
        return f"  AMD GPU {gpu.index}: {gpu.name}, {gpu.gfx or 'gfx target unknown'}{memory}"
    capability = (f"compute capability {gpu.compute_capability} ({gpu.compute_capability.sm})"
                  if gpu.compute_capability else "compute capability unknown")
    return f"  GPU {gpu.index}: {gpu.name}, {capability}{memory}"


def machine_line(profile: MachineProfile) -> str:
    """One line naming the machine a listing was resolved for."""
    label = f"{profile.name}: " if profile.name else ""
    if profile.cuda_driver is None:
        driver = "no NVIDIA driver" if not profile.amd_gpus else ""
    else:
        version = f"driver {profile.driver_version}, " if profile.driver_version else ""
        driver = f"{version}CUDA {profile.cuda_driver} ({profile.sources.get(CUDA_DRIVER, '?')})"
    if profile.amd_gpus:
        amdgpu = f"amdgpu {profile.amdgpu}" if profile.amdgpu else "amdgpu driver unknown"
        driver = f"{driver}, {amdgpu}" if driver else amdgpu
    hidden = f" ({len(profile.hidden_gpus)} hidden by CUDA_VISIBLE_DEVICES)" if profile.hidden_gpus else ""
    if profile.platform != DEFAULT_PLATFORM or profile.l4t is not None:  # linux-64, the default, goes unsaid
        driver = f"{profile.platform}{f' (Jetson, L4T {profile.l4t})' if profile.l4t else ''}, {driver}"
    if not profile.gpus:
        return f"Machine: {label}{driver}, no GPU{' visible' if hidden else ''}{hidden}"
    counts: dict[str, int] = {}
    for gpu in profile.gpus:
        counts[gpu.description] = counts.get(gpu.description, 0) + 1
    gpus = ", ".join(f"{n}x {key}" if n > 1 else key for key, n in counts.items())
    return f"Machine: {label}{driver}; {gpus}{hidden}"


_HEADERS = ("BUILD", "VERSION", "VARIANT", "CUDA", "PYTHON")


def list_command(manifest: str, target_args: str = "", show_all: bool = True) -> str:
    """The `envkit list` command that shows a manifest's builds for the same machines, ready to paste.
    ``target_args``: the options that chose the machines, already shell-quoted."""
    import shlex

    argv = shlex.join(["envkit", "list", manifest, *(["--all"] if show_all else [])])
    return f"{argv} {target_args}" if target_args else argv


def listing_text(profile: MachineProfile, resolutions: Sequence[Resolution], show_all: bool,
                 target_args: str = "") -> str:
    """The ``envkit list`` table: per manifest the selected build (*), the compatible ones, and with ``show_all``
    the incompatible ones with their reasons. ``target_args``: the options that chose the machine (``--machine
    FILE``...), shell-quoted, so that the commands it suggests judge the same machine when pasted."""
    blocks = [machine_line(profile)]
    for resolution in resolutions:
        blocks.append(manifest_block(resolution, profile, show_all, target_args))
    return "\n\n".join(blocks)


def manifest_block(resolution: Resolution, profile: MachineProfile, show_all: bool, target_args: str,
                    where: str = "this machine") -> str:
    """One manifest's part of `envkit list`: its builds for ``where``, the pick marked, what does not fit counted."""
    from envkit.pick.cpu_fallback import gpu_unused

    manifest = resolution.manifest
    lines = [f"{manifest.name}: {manifest.summary}"]
    from envkit.pick.rocm import left_unused

    unused = gpu_unused(resolution, profile) or (left_unused(resolution.selected.build, profile)
                                                 if resolution.selected else None)
    if unused:
        lines.append(f"  Warning: {unused}.")
    if manifest.retired:
        lines.append(f"  retired: {manifest.retired}")
    rows = list(resolution.compatible)
    hidden = resolution.incompatible
    if show_all:
        rows += hidden
    if not resolution.compatible:  # none is shown: --all is pointed at here, not "N more" counted below
        why = f": `{list_command(manifest.name, target_args)}` says why" if hidden and not show_all else ""
        lines.append(f"  No build of {manifest.name} fits {where}{why}.")
    if rows:
        cells = [_cells(c) for c in rows]
        widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(_HEADERS)]
        lines.append("    " + "  ".join(h.ljust(w) for h, w in zip(_HEADERS, widths)) + "  NOTES")
        selected = resolution.selected
        indent = " " * (4 + sum(widths) + 2 * len(widths))
        for candidate, row in zip(rows, cells):
            mark = "  * " if candidate is selected else "    "
            notes = _notes(candidate)
            if show_all and candidate.build.unconfirmed:  # for admins: what the manifest's authors could not check
                notes.append(f"unconfirmed: {candidate.build.unconfirmed}")
            lines.append(mark + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + notes[0])
            lines.extend(indent + note for note in notes[1:])
    if resolution.selected is not None and resolution.selected.build.notes:
        lines.append(f"  note on {resolution.selected.build.id}: {resolution.selected.build.notes}")
    passed = passed_over(resolution)
    if passed is not None:
        lines.append(f"  {passed.build.id} fits too and would rank first, but a build the manifest could not confirm "
                     f"is not picked over one it could (unconfirmed: {passed.build.unconfirmed}); "
                     f"`{' '.join(['envkit create', manifest.name, '--build', passed.build.id, target_args]).strip()}` "
                     "installs it anyway.")
    if hidden and not show_all and resolution.compatible:
        lines.append(
            f"  {len(hidden)} more {'builds do' if len(hidden) != 1 else 'build does'} not fit {where}: "
            f"`{list_command(manifest.name, target_args)}` says why."
        )
    return "\n".join(line.rstrip() for line in lines)


def _cells(candidate: Candidate) -> list[str]:
    build = candidate.build
    return [
        build.id,
        str(build.version),
        build.variant,
        str(build.cuda) if build.cuda else f"ROCm {build.rocm}" if build.rocm else "-",
        str(candidate.python) if candidate.python else "-",
    ]


def _notes(candidate: Candidate) -> list[str]:
    if not candidate.compatible:
        return [f"no: {reason}" for reason in candidate.reasons] or ["no"]
    if not candidate.build.is_gpu:
        return ["CPU only"]
    if candidate.build.is_rocm:  # what was judged of the driver, then of the GPUs
        return list(candidate.reasons[:1]) or ["runs on every AMD GPU"]
    if candidate.native:
        return ["the driver runs its CUDA"]
    return ["runs through CUDA minor-version compatibility (an older driver of the same CUDA major)"]


def listing_json(profile: MachineProfile, resolutions: Sequence[Resolution]) -> dict[str, Any]:
    return {
        "machine": profile.seen_dict(),
        "manifests": [
            {
                "name": r.manifest.name,
                "summary": r.manifest.summary,
                "framework": r.manifest.framework,
                "retired": r.manifest.retired,
                "selected": r.selected.build.id if r.selected else None,
                "passed_over": passed_json(r),
                "gpu_unused": gpu_unused_json(r, profile),
                "builds": [candidate_json(c) for c in r.candidates],
            }
            for r in resolutions
        ],
    }


def passed_json(resolution: Resolution) -> dict[str, Any] | None:
    """The unconfirmed build that would rank first but is not picked (envkit.pick.resolve.passed_over), or None."""
    passed = passed_over(resolution)
    return None if passed is None else {"build": passed.build.id, "unconfirmed": passed.build.unconfirmed}


def gpu_unused_json(resolution: Resolution, profile: MachineProfile) -> dict[str, Any] | None:
    from envkit.pick.cpu_fallback import gpu_unused

    reason = gpu_unused(resolution, profile)
    return None if reason is None else {"reason": reason}


def candidate_json(candidate: Candidate) -> dict[str, Any]:
    build = candidate.build
    return {
        "id": build.id,
        "version": str(build.version),
        "variant": build.variant,
        "cuda": str(build.cuda) if build.cuda else None,
        "rocm": str(build.rocm) if build.rocm else None,
        "compatible": candidate.compatible,
        "native": candidate.native,
        "python": str(candidate.python) if candidate.python else None,
        "python_requires": str(build.python),
        "reasons": list(candidate.reasons),
        "notes": build.notes,
        "unconfirmed": build.unconfirmed,
    }
