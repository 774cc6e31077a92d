"""GPUs in words: a machine's GPUs grouped by model and architecture, and a group as a verdict names it ("GPUs 0-3,
NVIDIA A100 (sm_80)", "AMD GPUs 0, 1, AMD Instinct MI300X (gfx942)"). Pure."""

from __future__ import annotations

from typing import Optional, Sequence

from envkit.machines.profile import Gpu


def groups(gpus: Sequence[Gpu]) -> list[list[Gpu]]:
    """The GPUs of one vendor, model and architecture together, in the order they first appear."""
    found: dict[tuple[str, str, Optional[str]], list[Gpu]] = {}
    for gpu in gpus:
        found.setdefault((gpu.vendor, gpu.name, gpu.arch), []).append(gpu)
    return list(found.values())


def gpu_group(gpus: Sequence[Gpu]) -> str:
    if len(gpus) == 1:
        return gpus[0].label
    kind = "AMD GPUs" if gpus[0].is_amd else "GPUs"
    return f"{kind} {index_ranges([g.index for g in gpus])}, {gpus[0].description}"


def index_ranges(indices: Sequence[int]) -> str:
    parts: list[str] = []
    start = previous = indices[0]
    for index in [*indices[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return ", ".join(parts)
