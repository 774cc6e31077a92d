"""Inside a Slurm job: which of the node's GPUs the job was given, read from the environment (pure).

NVML lists every GPU of the node whatever ``CUDA_VISIBLE_DEVICES`` says; CUDA programs see only the visible ones.
envkit therefore narrows a detected profile to them itself, and says so in its notes.
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Optional

from envkit.machine import MachineProfile
from envkit.versions import is_ascii_number  # a GPU index as CUDA reads one: not '²' or '１'

# Values of CUDA_VISIBLE_DEVICES that hide every GPU.
HIDING = re.compile(r"^\s*(|-1|none|NoDevFiles|void)\s*$", re.IGNORECASE)


class JobContext(NamedTuple):
    """What a Slurm job (or CUDA_VISIBLE_DEVICES) says about the GPUs this process may use."""

    job_id: Optional[str]  # SLURM_JOB_ID
    node: Optional[str]  # SLURMD_NODENAME
    visible: Optional[tuple[str, ...]]  # CUDA_VISIBLE_DEVICES split on commas; None when not set

    @property
    def in_job(self) -> bool:
        return self.job_id is not None


def job_context(environ: Mapping[str, str]) -> JobContext:
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    visible = None if raw is None else tuple(part.strip() for part in raw.split(",") if part.strip())
    return JobContext(job_id=environ.get("SLURM_JOB_ID") or None, node=environ.get("SLURMD_NODENAME") or None,
                      visible=visible)


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
                         "match to NVML's list: all GPUs are shown")
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
    index it lacks, or what is neither an index nor a UUID: '-1', 'abc'). None when a UUID or MIG id comes first:
    envkit cannot tell which GPU that is."""
    present = {gpu.index for gpu in profile.gpus}
    wanted: list[int] = []
    for part in visible:
        if part.startswith(("GPU-", "MIG-")):
            return None
        if not is_ascii_number(part) or int(part) not in present:
            break
        wanted.append(int(part))
    return wanted


def hides_all(value: str, gpus: int) -> bool:
    """Whether CUDA_VISIBLE_DEVICES hides every GPU of a machine with ``gpus`` GPUs: an empty list, -1, or a first
    entry that names no GPU there (CUDA reads the list up to its first invalid entry). UUIDs are taken as valid."""
    if HIDING.match(value):
        return True
    if gpus == 0:
        return False  # nothing to hide: the machine has no GPU
    first = value.split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return False
    return not (is_ascii_number(first) and int(first) < gpus)
