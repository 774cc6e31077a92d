"""amd-smi and rocm-smi as cross-checks of the KFD's GPUs (envkit.detect.amd): where installed, they name the GPUs
and say their targets; the KFD's facts stand, and a disagreement is said.

Their JSON changed across releases, and both forms are read:
- ``amd-smi static --asic --json``: a list of ``{"gpu": 0, "asic": {...}}`` (ROCm 6.x), or the same list under
  ``{"gpu_data": [...]}`` (amd-smi 25.x and later, ROCm 6.4/7.x); warnings printed before the JSON are skipped
  (ROCm/amdsmi#114). amd-smi before 6.3 wrote the target's stepping in decimal ("gfx9010" for gfx90a).
- ``rocm-smi --showproductname --json``: ``{"card0": {"Card Series": ..., "Card Model": "0x74a1", "GFX Version":
  "gfx942"}}``; the keys' capitals vary by release ("Card series"), older releases name the device "Device Name"
  and "Device ID", and write the same decimal stepping ("gfx9010", ROCm/rocm_smi_lib#159).
Each run has a time limit; a tool that hangs, fails or prints what cannot be read is said in a note, and detection
goes on with the KFD's facts.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, NamedTuple, Optional, Sequence

from envkit.detect.timeout import ProbeTimeout
from envkit.machines.amd import pci_device_id
from envkit.machines.profile import Gpu
from envkit.text.terminal import printable
from envkit.versions import parse_gfx

ARGV = {"amd-smi": ("static", "--asic", "--json"), "rocm-smi": ("--showproductname", "--json")}
_NOT_A_VALUE = {"", "n/a", "na", "none", "unknown"}


class SmiGpu(NamedTuple):
    """One GPU as amd-smi or rocm-smi lists it."""

    index: int
    name: Optional[str]
    device_id: Optional[int]
    gfx: Optional[str]


def smi_gfx(value: Any) -> Optional[str]:
    """A target as these tools print it: "gfx942", and the decimal stepping of older releases ("gfx9010" is
    gfx90a: major 9, minor 0, stepping 10); None for "N/A" or what is no target."""
    if not isinstance(value, str) or value.strip().lower() in _NOT_A_VALUE:
        return None
    try:
        return parse_gfx(value)
    except ValueError:
        pass
    found = re.match(r"^gfx([7-9]|1[0-9])([0-9])([0-9]{1,2})$", value.strip().lower())
    if found is None or int(found.group(3)) > 15:
        return None
    return f"gfx{found.group(1)}{int(found.group(2)):x}{int(found.group(3)):x}"


def _json_part(text: str) -> Any:
    """The JSON a tool printed, past any warning lines before it; ValueError when there is none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(("{", "["))), None)
    if start is None:
        raise ValueError("no JSON in its output")
    try:
        return json.loads("\n".join(lines[start:]))
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None


def _text(value: Any) -> Optional[str]:
    if not isinstance(value, str) or value.strip().lower() in _NOT_A_VALUE:
        return None
    return printable(" ".join(value.split()))


def parse_amd_smi(text: str) -> list[SmiGpu]:
    """``amd-smi static --asic --json`` in either form; ValueError when it is neither."""
    data = _json_part(text)
    if isinstance(data, dict) and isinstance(data.get("gpu_data"), list):
        data = data["gpu_data"]
    if not isinstance(data, list):
        raise ValueError("neither a list of GPUs nor {\"gpu_data\": [...]}")
    out = []
    for position, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ValueError(f"entry {position} is not a mapping")
        asic = entry.get("asic") if isinstance(entry.get("asic"), dict) else {}
        index = entry.get("gpu") if isinstance(entry.get("gpu"), int) else position
        out.append(SmiGpu(index, _text(asic.get("market_name")), pci_device_id(asic.get("device_id")),
                          smi_gfx(asic.get("target_graphics_version"))))
    return out


def parse_rocm_smi(text: str) -> list[SmiGpu]:
    """``rocm-smi --showproductname --json``; ValueError when it is not a mapping of cardN entries."""
    data = _json_part(text)
    if not isinstance(data, dict):
        raise ValueError("not a mapping of cards")
    cards = sorted(((int(key[4:]), value) for key, value in data.items()
                    if re.match(r"^card[0-9]{1,4}$", str(key)) and isinstance(value, dict)), key=lambda pair: pair[0])
    if not cards and data:
        raise ValueError("no card0, card1, ... in it")
    out = []
    for index, card in cards:
        fields = {str(key).strip().lower(): value for key, value in card.items()}
        name = _text(fields.get("card series")) or _text(fields.get("device name"))
        device = pci_device_id(fields.get("card model")) or pci_device_id(fields.get("device id"))
        out.append(SmiGpu(index, name, device, smi_gfx(fields.get("gfx version"))))
    return out


PARSERS = {"amd-smi": parse_amd_smi, "rocm-smi": parse_rocm_smi}


def cross_check(gpus: Sequence[Gpu], commands: Sequence[str], timeout: float, notes: list[str]) -> tuple[Gpu, ...]:
    """The KFD's GPUs, with what the first of ``commands`` found on PATH adds: a target the KFD could not give, a
    name where rocm.yaml has none. Disagreements are notes; the KFD's facts stand."""
    import shutil

    tool = next((c for c in commands if c in ARGV and shutil.which(c) is not None), None)
    if tool is None:
        return tuple(gpus)
    command = shutil.which(tool)
    try:
        listed = _listed(command, tool, timeout)
    except ProbeTimeout as exc:
        notes.append(f"{tool}: {exc}: not used to cross-check the GPUs")
        return tuple(gpus)
    except ValueError as exc:
        notes.append(f"{tool}: {exc}: not used to cross-check the GPUs")
        return tuple(gpus)
    if len(listed) != len(gpus):
        notes.append(f"{tool} lists {len(listed)} GPU(s), the KFD {len(gpus)}: the KFD's are taken")
        return tuple(gpus)
    return tuple(_checked(gpu, other, tool, notes) for gpu, other in zip(gpus, listed))


def _checked(gpu: Gpu, other: SmiGpu, tool: str, notes: list[str]) -> Gpu:
    if other.gfx is not None and gpu.gfx is not None and other.gfx != gpu.gfx:
        notes.append(f"{gpu.label}: {tool} says {other.gfx}; the KFD's {gpu.gfx} is taken")
    if gpu.gfx is None and other.gfx is not None:
        gpu = gpu._replace(gfx=other.gfx, source=f"{gpu.source} + {tool}")
    if gpu.name.startswith("AMD GPU (device") and other.name:
        gpu = gpu._replace(name=other.name, source=gpu.source if tool in gpu.source else f"{gpu.source} + {tool}")
    return gpu


def _listed(command: str, tool: str, timeout: float) -> list[SmiGpu]:
    """Run the tool (its own process group, killed at the time limit) and read its GPUs. ValueError for a failure
    or output not understood; ProbeTimeout past ``timeout``."""
    from envkit.system.process import run_captured

    env = {"LC_ALL": "C", "LANG": "C", "PATH": os.environ.get("PATH", os.defpath)}
    try:
        done = run_captured([command, *ARGV[tool]], env, timeout, grace=0, max_output=4 << 20)
    except OSError as exc:
        raise ValueError(f"cannot be run: {exc.strerror or exc}") from None
    if done.returncode is None:
        raise ProbeTimeout(timeout)
    if done.returncode != 0:
        first = next((line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()), "")
        raise ValueError(f"exited with status {done.returncode}" + (f": {printable(first[:160])}" if first else ""))
    try:
        return PARSERS[tool](done.stdout)
    except ValueError as exc:
        raise ValueError(f"output not understood: {exc}") from None
