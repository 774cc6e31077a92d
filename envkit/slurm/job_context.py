"""Inside a Slurm job: which of the node's GPUs the job was given, read from the environment (pure).

NVML lists every GPU of the node whatever ``CUDA_VISIBLE_DEVICES`` says; CUDA programs see only the visible ones.
envkit therefore narrows a detected profile to them itself, and says so in its notes.
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Optional

from envkit.machines.profile import MachineProfile
from envkit.versions import is_ascii_number  # a GPU index as CUDA reads one: not '²' or '１'

# Values of CUDA_VISIBLE_DEVICES that hide every GPU.
HIDING = r"(?i)^\s*(|-1|none|NoDevFiles|void)\s*$"  # compiled by re when first matched: most runs never do


class JobContext(NamedTuple):
    """What a Slurm job (or CUDA_VISIBLE_DEVICES) says about the GPUs this process may use."""

    job_id: Optional[str]  # SLURM_JOB_ID
    node: Optional[str]  # SLURMD_NODENAME
    visible: Optional[tuple[str, ...]]  # CUDA_VISIBLE_DEVICES split on commas; None when not set
    # CUDA_DEVICE_ORDER: unless it is PCI_BUS_ID, CUDA numbers the GPUs fastest first, not in NVML's (PCI) order
    order: Optional[str] = None

    @property
    def in_job(self) -> bool:
        return self.job_id is not None


def job_context(environ: Mapping[str, str]) -> JobContext:
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    visible = None if raw is None else tuple(part.strip() for part in raw.split(",") if part.strip())
    return JobContext(job_id=environ.get("SLURM_JOB_ID") or None, node=environ.get("SLURMD_NODENAME") or None,
                      visible=visible, order=environ.get("CUDA_DEVICE_ORDER"))


def apply_job_context(profile: MachineProfile, context: JobContext) -> MachineProfile:
    """``profile`` as the job sees it: only the GPUs in ``CUDA_VISIBLE_DEVICES`` (by index), named after the
    Slurm node when it has no name, with a note saying what was done; the GPUs left out are its ``hidden_gpus``."""
    notes = list(profile.notes)
    gpus = profile.gpus
    name = profile.name
    if context.in_job:
        where = f"inside Slurm job {context.job_id}" + (f" on node {context.node}" if context.node else "")
        if name is None and context.node:
            name = context.node
    else:
        where = "outside a Slurm job"
    if context.visible is not None:
        raw = ",".join(context.visible)
        wanted = _read_as_cuda_does(context.visible, profile)  # (-1, none, NoDevFiles: no GPU named, none taken)
        if wanted is None:
            notes.append(f"{where}: CUDA_VISIBLE_DEVICES={raw} names GPUs by UUID or MIG id, which envkit cannot "
                         "match to NVML's list (NVML did not give the GPUs' UUIDs): all GPUs are shown")
        elif _numbered_fastest_first(context, wanted, profile):
            notes.append(f"{where}: CUDA_VISIBLE_DEVICES={raw} numbers GPUs as CUDA does, fastest first "
                         "(CUDA_DEVICE_ORDER is not PCI_BUS_ID), and this machine's GPUs differ, so envkit cannot "
                         "tell which of them it names: all GPUs are shown. Set CUDA_DEVICE_ORDER=PCI_BUS_ID to "
                         "number them as NVML and nvidia-smi do.")
        else:
            gpus = tuple(gpu for gpu in profile.gpus if gpu.index in wanted)
            notes.append(f"{where}: only the GPUs in CUDA_VISIBLE_DEVICES={raw} count ({len(gpus)} of the "
                         f"{len(profile.gpus)} NVML lists)")
    elif context.in_job:
        notes.append(f"{where}: CUDA_VISIBLE_DEVICES is not set, so the job may use every GPU NVML lists")
    if gpus == profile.gpus and name == profile.name and len(notes) == len(profile.notes):
        return profile
    hidden = profile.hidden_gpus + tuple(gpu for gpu in profile.gpus if gpu not in gpus)
    return profile._replace(gpus=gpus, name=name, notes=tuple(notes), hidden_gpus=hidden)


def _read_as_cuda_does(visible: tuple[str, ...], profile: MachineProfile) -> Optional[list[int]]:
    """The GPU indexes CUDA takes from the list: each entry up to the first that names no GPU of the machine (an
    index it lacks, a UUID none of its GPUs has, or what is neither: '-1', 'abc'). A UUID ('GPU-...', a unique
    prefix of one, 'MIG-...' for a GPU's MIG device) is matched to the GPUs' UUIDs as NVML gave them. None when it
    names a GPU by UUID and the GPUs' UUIDs are unknown (from /proc or nvidia-smi): envkit cannot tell which it is."""
    present = {gpu.index for gpu in profile.gpus}
    knows_uuids = bool(profile.gpus) and all(gpu.uuid for gpu in profile.gpus)
    wanted: list[int] = []
    for part in visible:
        if part.startswith(("GPU-", "MIG-")):
            if not knows_uuids:
                return None
            index = _gpu_with_uuid(part, profile)
            if index is None:
                break
            wanted.append(index)
            continue
        if not is_ascii_number(part) or int(part) not in present:
            break
        wanted.append(int(part))
    return wanted


def _numbered_fastest_first(context: JobContext, wanted: list[int], profile: MachineProfile) -> bool:
    """Whether the indexes in CUDA_VISIBLE_DEVICES pick a part of GPUs that differ, numbered in CUDA's default
    order (fastest first), which is NVML's only where the GPUs are all alike."""
    by_index = any(is_ascii_number(part) for part in context.visible or ())
    kinds = {(gpu.name, gpu.compute_capability) for gpu in profile.gpus}
    pci_order = context.order == "PCI_BUS_ID"  # as CUDA reads it: that exact value
    return by_index and not pci_order and len(kinds) > 1 and 0 < len(set(wanted)) < len(profile.gpus)


def _gpu_with_uuid(part: str, profile: MachineProfile) -> Optional[int]:
    """The index of the one GPU ``part`` names by UUID (or a unique prefix of it), or whose MIG device it names;
    None when none or several do."""
    wanted = part
    if wanted.startswith("MIG-GPU-"):  # the older form of a MIG device, MIG-GPU-<uuid>/<GI>/<CI>
        wanted = wanted[len("MIG-"):].split("/")[0]
    matches = {gpu.index for gpu in profile.gpus
               for uuid in ((gpu.uuid or ""), *gpu.mig_uuids) if uuid.startswith(wanted)}
    return matches.pop() if len(matches) == 1 else None


def job_given_gpus(environ: Mapping[str, Optional[str]]) -> bool:
    """Whether the Slurm job says it was given GPUs on this node: SLURM_GPUS_ON_NODE above 0, SLURM_JOB_GPUS or
    SLURM_STEP_GPUS listing some, or CUDA_VISIBLE_DEVICES naming some (Slurm sets it to the job's GPUs)."""
    on_node = (environ.get("SLURM_GPUS_ON_NODE") or "").strip()
    if is_ascii_number(on_node) and int(on_node) > 0:
        return True
    if any((environ.get(key) or "").strip() for key in ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS")):
        return True
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and not re.match(HIDING, visible)


def hides_all(value: str, gpus: int) -> bool:
    """Whether CUDA_VISIBLE_DEVICES hides every GPU of a machine with ``gpus`` GPUs: an empty list, -1, or a first
    entry that names no GPU there (CUDA reads the list up to its first invalid entry). UUIDs are taken as valid."""
    if re.match(HIDING, value):
        return True
    if gpus == 0:
        return False  # nothing to hide: the machine has no GPU
    first = value.split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return False
    return not (is_ascii_number(first) and int(first) < gpus)
