"""The nvidia-smi probe: the last resort, for when NVML cannot be loaded from Python.

nvidia-smi's output is not a stable interface (NVIDIA says so), so the parsers here are pure functions tested on
text in the formats of several driver branches, and read it defensively: values of "[N/A]", extra whitespace,
fields that older branches do not know.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, TypeVar

from envkit.detect.sources import GPU_TABLE, SMI, gpu_from_name, smi_missing
from envkit.detect.timeout import ProbeTimeout
from envkit.machines.gpu_names import GpuNameTable
from envkit.machines.profile import CUDA_DRIVER, DRIVER_VERSION, GPUS, Gpu, MachineProfile
from envkit.text.terminal import printable
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

QUERY_FIELDS = ("index", "name", "compute_cap", "memory.total", "driver_version")
# Older nvidia-smi (R470 and before) rejects the whole query when it names compute_cap.
LEGACY_QUERY_FIELDS = tuple(field for field in QUERY_FIELDS if field != "compute_cap")
NO_DEVICES = "No devices were found"

# From R610 the banner says "KMD Version" and "CUDA UMD Version" where it said "Driver Version" and "CUDA Version"
# (nvidia-smi's documentation; sgl-project/sglang#27487); `nvidia-smi -q` prints both, the old ones marked
# deprecated. Either is read; a value that is not a version ("N/A", WSL2's "ERR!") is none.
_CUDA_VERSION = re.compile(r"CUDA (?:UMD )?Version\s*:\s*([0-9]+\.[0-9]+)")
_DRIVER_VERSION = re.compile(r"(?:Driver|KMD) Version\s*:\s*([0-9]+(?:\.[0-9]+)+)")
# What nvidia-smi prints for a GPU that has fallen off the bus ("... GPU is lost. Reboot the system to recover this
# GPU", or "... Unknown Error"), in place of its row.
_LOST = "Unable to determine the device handle"
_LEADING_NUMBER = re.compile(r"^\s*([0-9]+)")

T = TypeVar("T")


@dataclass(frozen=True)
class SmiQuery:
    """What one ``--query-gpu`` run said."""

    gpus: tuple[Gpu, ...]  # compute_capability None where the query had no compute_cap (or it was "[N/A]")
    driver_version: Optional[DriverVersion]
    lost: tuple[str, ...] = ()  # what nvidia-smi said of each GPU it could not reach (fallen off the bus)


@dataclass(frozen=True)
class SmiHeader:
    """What the header of plain ``nvidia-smi`` says; None where it says "N/A" or nothing."""

    driver_version: Optional[DriverVersion]
    cuda_driver: Optional[CudaVersion]


def parse_query(text: str, fields: Sequence[str] = QUERY_FIELDS) -> SmiQuery:
    """Parse ``--query-gpu=<fields> --format=csv,noheader,nounits`` output. Raises ValueError on anything else."""
    if NO_DEVICES in text:
        return SmiQuery(gpus=(), driver_version=None)
    gpus = []
    drivers = []
    lost = []
    for number, line in enumerate(text.splitlines(), start=1):
        if _LOST in line:
            lost.append(line.strip())
            continue
        if not _LEADING_NUMBER.match(line):
            continue  # blank, or what nvidia-smi says besides ("WARNING: infoROM is corrupted at gpu 0000:...")
        values = [value.strip() for value in line.split(",")]
        if len(values) > len(fields) and "name" in fields:
            # A name with a comma in it: the extra values belong to the name.
            at = fields.index("name")
            extra = len(values) - len(fields)
            values[at : at + extra + 1] = [", ".join(values[at : at + extra + 1])]
        if len(values) != len(fields):
            raise ValueError(f"line {number}: expected {len(fields)} comma-separated values, got {line.strip()!r}")
        row = dict(zip(fields, values))
        try:
            index = int(row["index"])
        except ValueError:
            raise ValueError(f"line {number}: GPU index {row['index']!r} is not a number") from None
        name = _known(row["name"])
        if name is None:
            raise ValueError(f"line {number}: no GPU name")
        gpus.append(
            Gpu(
                index=index,
                name=printable(" ".join(name.split())),  # never a terminal's escape sequence
                compute_capability=_parsed(ComputeCapability.parse, row.get("compute_cap")),
                memory_mib=_mib(row.get("memory.total")),
                source=SMI,
            )
        )
        drivers.append(_parsed(DriverVersion.parse, row.get("driver_version")))
    if not gpus:
        raise ValueError(f"a GPU is lost: {lost[0]}" if lost else "no output")
    return SmiQuery(gpus=tuple(gpus), driver_version=next((d for d in drivers if d is not None), None),
                    lost=tuple(lost))


def parse_header(text: str) -> SmiHeader:
    """Parse the banner of plain ``nvidia-smi``.

    ``| NVIDIA-SMI 550.54.14              Driver Version: 550.54.14      CUDA Version: 12.4     |``, from R610
    ``| NVIDIA-SMI 610.43.02              KMD Version: 610.43.02     CUDA UMD Version: 13.3     |``; before R410 it
    has no CUDA at all. Under WSL2 the driver is the Windows one (``Driver Version: 555.99``, not the NVIDIA-SMI
    version before it).
    """
    driver = _DRIVER_VERSION.search(text)
    cuda = _CUDA_VERSION.search(text)
    return SmiHeader(
        driver_version=_parsed(DriverVersion.parse, driver[1] if driver else None),
        cuda_driver=_parsed(CudaVersion.parse, cuda[1] if cuda else None),
    )


def _known(value: Optional[str]) -> Optional[str]:
    # nvidia-smi prints "[N/A]", "N/A" or "[Not Supported]" for what it cannot tell.
    if not value or value.startswith("[") or value.upper() == "N/A":
        return None
    return value


def _parsed(parse: Callable[[str], T], value: Optional[str]) -> Optional[T]:
    value = _known(value)
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError:
        return None


def _mib(value: Optional[str]) -> Optional[int]:
    # With nounits the value is "16384"; a branch that ignores nounits prints "16384 MiB".
    match = _LEADING_NUMBER.match(_known(value) or "")
    return int(match[1]) if match else None


class SmiError(Exception):
    """nvidia-smi ran but did not give an answer; the message says what it did instead."""


class _NoComputeCap(Exception):
    """This nvidia-smi does not know the compute_cap query field."""


def probe_smi(
    gpu_names: GpuNameTable, *, command: str = "nvidia-smi", timeout: float = 10.0, want_cuda: bool = True
) -> MachineProfile:
    """Run nvidia-smi (at most ``timeout`` seconds in all). A partial profile: ``sources`` names what it gave.

    ``want_cuda`` runs plain ``nvidia-smi`` for the "CUDA Version" of its header, which no query field gives.
    """
    import shutil

    missing = smi_missing(command)
    executable = shutil.which(command)
    if missing is not None or executable is None:
        return MachineProfile(notes=(f"{SMI}: {missing or 'not found on PATH'}",))
    deadline = time.monotonic() + timeout
    notes = []

    def failure(exc: Exception) -> str:
        return f"{SMI}: timed out after {timeout:g} s" if isinstance(exc, ProbeTimeout) else f"{SMI}: {exc}"

    try:
        try:
            query = _query(executable, QUERY_FIELDS, deadline)
        except _NoComputeCap:
            notes.append(f"{SMI}: this nvidia-smi has no compute_cap field; compute capability from {GPU_TABLE}")
            query = _query(executable, LEGACY_QUERY_FIELDS, deadline)
    except (ProbeTimeout, SmiError) as exc:
        return MachineProfile(notes=(*notes, failure(exc)))
    notes.extend(f"{SMI}: {line} (a GPU that has fallen off the bus: it is not counted; reboot to recover it)"
                 for line in query.lost)
    gpus = tuple(
        gpu
        if gpu.compute_capability is not None
        else gpu_from_name(gpu.index, gpu.name, gpu_names, SMI, gpu.memory_mib)
        for gpu in query.gpus
    )
    sources = {GPUS: SMI}
    driver_version = query.driver_version
    cuda_driver = None
    if want_cuda:
        try:
            header = _header(executable, deadline)
        except (ProbeTimeout, SmiError) as exc:
            notes.append(failure(exc))
        else:
            cuda_driver = header.cuda_driver
            driver_version = driver_version or header.driver_version
            if cuda_driver is None:
                notes.append(f"{SMI}: no CUDA Version in its header")
    if driver_version is not None:
        sources[DRIVER_VERSION] = SMI
    if cuda_driver is not None:
        sources[CUDA_DRIVER] = SMI
    return MachineProfile(
        gpus=gpus, cuda_driver=cuda_driver, driver_version=driver_version, sources=sources, notes=tuple(notes)
    )


def _query(executable: str, fields: Sequence[str], deadline: float) -> SmiQuery:
    """One ``--query-gpu`` run."""
    argv = [executable, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    status, output, errors = _run(argv, deadline)
    if "compute_cap" in fields and "compute_cap" in output + errors:
        # 'Field "compute_cap" is not a valid field to query.' (some branches still exit 0 after it)
        raise _NoComputeCap()
    if status != 0 and NO_DEVICES not in output:
        raise SmiError(_failure(status, output, errors))
    try:
        return parse_query(output, fields)
    except ValueError as exc:
        raise SmiError(f"output not understood ({exc})") from None


def _header(executable: str, deadline: float) -> SmiHeader:
    status, output, errors = _run([executable], deadline)
    if status != 0:
        raise SmiError(_failure(status, output, errors))
    return parse_header(output)


def _run(argv: Sequence[str], deadline: float) -> tuple[int, str, str]:
    """Run nvidia-smi: its exit status, standard output and error. SmiError if it cannot start, ProbeTimeout
    past the deadline (the process and its children are killed)."""
    from envkit.system.process import run_captured

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ProbeTimeout(0)
    try:
        # Its own process group, so a timeout kills whatever it started too (and closes our pipes); no grace:
        # a hung nvidia-smi does not clean up.
        done = run_captured(argv, _environment(), remaining, grace=0)
    except OSError as exc:
        raise SmiError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
    if done.returncode is None:
        raise ProbeTimeout(remaining)
    return done.returncode, done.stdout, done.stderr


def _failure(status: int, output: str, errors: str) -> str:
    message = _first_line(output) or _first_line(errors)
    return f"exited with status {status}" + (f": {message}" if message else "")


def _environment() -> dict[str, str]:
    # A clean environment: the C locale for the output format the parsers expect; PATH and LD_LIBRARY_PATH kept
    # because some installations find nvidia-smi's libnvidia-ml.so.1 only through them.
    env = {"LC_ALL": "C", "LANG": "C", "PATH": os.environ.get("PATH", os.defpath)}
    if "LD_LIBRARY_PATH" in os.environ:
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    return env


def _first_line(text: str, limit: int = 160) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."
