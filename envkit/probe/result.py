"""What a probe run gave: the probe's JSON (see program/main.py) read into frozen dataclasses. Pure: no I/O.

A run that did not produce a report (it hung and was cut off, printed something that is not the probe's JSON, or
exited with an error) is still a ProbeResult: ``failure`` says what went wrong, ``stdout``/``stderr`` keep the
evidence, and the diagnosis turns it into a cause and a next step. Nothing here raises for a bad report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, TypeVar

T = TypeVar("T")

# What a run that produced no report failed with.
TIMED_OUT = "timed-out"
NO_REPORT = "no-report"  # exited (zero or not) without printing the probe's JSON
BAD_REPORT = "bad-report"  # printed JSON that is not a probe report envkit can read

_KEEP = 8000  # characters of a failed run's stdout and stderr kept as evidence


@dataclass(frozen=True)
class ErrorText:
    """An exception the probe caught: where, its type, its message and the traceback text."""

    where: str
    type: str
    message: str
    traceback: str = ""

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(frozen=True)
class Check:
    """One computation on one device, compared with a reference."""

    name: str  # matmul, conv2d
    device: str  # cpu, cuda:0, /GPU:0, ...
    ok: bool
    max_error: Optional[float] = None
    tolerance: Optional[float] = None
    seconds: Optional[float] = None
    problem: Optional[str] = None  # it ran and gave a wrong result
    error: Optional[ErrorText] = None  # it raised

    @property
    def ran(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ProbeDevice:
    index: int
    name: Optional[str]
    compute_capability: Optional[str]
    memory_mib: Optional[int] = None
    checks: tuple[Check, ...] = ()
    gfx: Optional[str] = None  # an AMD GPU's target (HIP's gcnArchName without its features), in a ROCm build

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)


@dataclass(frozen=True)
class Collective:
    """The --multi-gpu result: an all-reduce across every GPU, or why it was skipped."""

    ok: Optional[bool]  # None: skipped
    skipped: Optional[str] = None
    method: Optional[str] = None  # "NCCL all-reduce" (torch), "MirroredStrategy all-reduce (...)", "pmap psum" (jax)
    world_size: Optional[int] = None
    size_bytes: Optional[int] = None
    busbw_gbs: Optional[float] = None
    algbw_gbs: Optional[float] = None
    error: Optional[ErrorText] = None


@dataclass(frozen=True)
class BenchRun:
    index: int
    dtype: str
    tflops: Optional[float]
    n: Optional[int] = None
    seconds: Optional[float] = None
    error: Optional[ErrorText] = None


@dataclass(frozen=True)
class Bench:
    """The --bench result: achieved matrix-multiply TFLOP/s per GPU and type, or why it was skipped."""

    ok: Optional[bool]
    skipped: Optional[str] = None
    runs: tuple[BenchRun, ...] = ()
    tf32: Optional[bool] = None


@dataclass(frozen=True)
class Companion:
    """A package the build installs beside the framework (torchvision, torchaudio): imported, and one small operation
    of it on every device."""

    name: str
    version: Optional[str]
    asked: bool  # envkit named it: the build installs it
    imported: bool
    error: Optional[ErrorText] = None  # its import failed (or it is missing)
    checks: tuple[Check, ...] = ()

    @property
    def ok(self) -> bool:
        return self.imported and all(check.ok for check in self.checks)


@dataclass(frozen=True)
class ProbeResult:
    python_executable: str  # the interpreter envkit ran the probe with
    exit_code: Optional[int]  # None when it was cut off
    elapsed: float
    failure: Optional[str] = None  # TIMED_OUT, NO_REPORT, BAD_REPORT; None when the probe reported
    failure_detail: str = ""
    timeout: Optional[float] = None
    stdout: str = ""  # kept only when there is no report
    stderr: str = ""  # the process's stderr (C-level messages of the framework included), clipped
    # From the probe's report:
    python: Optional[str] = None
    machine: Optional[str] = None  # the CPU the Python runs on (platform.machine()): x86_64, aarch64
    requested: Optional[str] = None
    installed: tuple[str, ...] = ()
    framework: Optional[str] = None
    imported: bool = False
    import_error: Optional[ErrorText] = None
    version: Optional[str] = None
    # What the framework's files say when it cannot be imported (torch/version.py): its version and CUDA
    package_version: Optional[str] = None
    package_cuda: Optional[str] = None
    gpu_build: Optional[bool] = None
    cuda: Optional[str] = None
    hip: Optional[str] = None  # a ROCm build's HIP version (torch.version.hip): its GPUs are AMD's
    cudnn: Optional[str] = None
    gpu_available: Optional[bool] = None
    device_count: Optional[int] = None
    arch_list: tuple[str, ...] = ()
    cpu_checks: tuple[Check, ...] = ()
    devices: tuple[ProbeDevice, ...] = ()
    environment: Mapping[str, Optional[str]] = field(default_factory=dict)
    errors: tuple[ErrorText, ...] = ()
    warnings: tuple[str, ...] = ()
    probe_stderr: str = ""  # what Python code wrote to sys.stderr during the probe
    probe_error: Optional[ErrorText] = None
    multi_gpu: Optional[Collective] = None
    bench: Optional[Bench] = None
    companions: tuple[Companion, ...] = ()

    @property
    def reported(self) -> bool:
        return self.failure is None

    @property
    def cpu_ok(self) -> bool:
        return bool(self.cpu_checks) and all(check.ok for check in self.cpu_checks)

    def texts(self) -> list[str]:
        """Every message the run left: errors, tracebacks, warnings, stderr; what the diagnosis rules search."""
        out: list[str] = []
        errors = [self.import_error, self.probe_error, *self.errors]
        errors += [c.error for c in self.cpu_checks] + [c.error for d in self.devices for c in d.checks]
        errors += [c.error for c in self.companions] + [k.error for c in self.companions for k in c.checks]
        for error in errors:
            if error is not None:
                out += [error.text, error.traceback]
        out += list(self.warnings)
        out += [self.probe_stderr, self.stderr, self.stdout]
        return [text for text in out if text]


def _clip(text: str) -> str:
    return text if len(text) <= _KEEP else "..." + text[-_KEEP:]


def cut_off(python: str, timeout: float, elapsed: float, stdout: str, stderr: str) -> ProbeResult:
    """A probe that did not finish in time (it was stopped with its whole process group)."""
    return ProbeResult(
        python_executable=python, exit_code=None, elapsed=elapsed, failure=TIMED_OUT, timeout=timeout,
        failure_detail=f"did not finish within {timeout:g} s and was stopped", stdout=_clip(stdout),
        stderr=_clip(stderr),
    )


def parse_output(python: str, exit_code: int, elapsed: float, stdout: str, stderr: str) -> ProbeResult:
    """A finished probe run: its report, or a result saying why there is none."""
    base = dict(python_executable=python, exit_code=exit_code, elapsed=elapsed, stderr=_clip(stderr))
    text = stdout.strip()
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        detail = f"exited with code {exit_code}" if exit_code else "exited normally"
        shown = f"printed {_describe(text)}" if text else "printed nothing"
        return ProbeResult(**base, failure=NO_REPORT, failure_detail=f"{detail} and {shown} instead of its report",
                           stdout=_clip(stdout))
    try:
        return _from_report(data, base)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        return ProbeResult(**base, failure=BAD_REPORT, failure_detail=f"printed JSON envkit cannot read ({exc})",
                           stdout=_clip(stdout))


def _describe(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return repr(first[:120] + ("..." if len(first) > 120 or "\n" in text else ""))


def _from_report(data: Mapping[str, Any], base: dict[str, Any]) -> ProbeResult:
    if data.get("probe_format") != 1:
        raise ValueError(f"probe_format {data.get('probe_format')!r}, expected 1")
    environment = data.get("environment") or {}
    if not isinstance(environment, Mapping):
        raise ValueError("environment is not a mapping")
    cpu = data.get("cpu") or {}
    package = data.get("package") if isinstance(data.get("package"), Mapping) else {}
    return ProbeResult(
        **base,
        python=_opt_str(data.get("python")),
        machine=_opt_str(data.get("machine")),
        requested=_opt_str(data.get("requested")),
        installed=tuple(str(name) for name in _list(data.get("installed"))),
        framework=_opt_str(data.get("framework")),
        imported=bool(data.get("imported")),
        import_error=_error(data.get("import_error")),
        version=_opt_str(data.get("version")),
        package_version=_opt_str(package.get("version")),
        package_cuda=_opt_str(package.get("cuda")),
        gpu_build=_opt_bool(data.get("gpu_build")),
        cuda=_opt_str(data.get("cuda")),
        hip=_opt_str(data.get("hip")),
        cudnn=_opt_str(data.get("cudnn")),
        gpu_available=_opt_bool(data.get("gpu_available")),
        device_count=_opt_int(data.get("device_count")),
        arch_list=tuple(str(arch) for arch in _list(data.get("arch_list"))),
        cpu_checks=tuple(_check(c) for c in _list(cpu.get("checks"))),
        devices=tuple(_device(d, position) for position, d in enumerate(_list(data.get("devices")))),
        environment={str(k): _opt_str(v) for k, v in environment.items()},
        errors=tuple(e for e in (_error(x) for x in _list(data.get("errors"))) if e is not None),
        warnings=tuple(_warning(w) for w in _list(data.get("warnings"))),
        probe_stderr=str(data.get("stderr") or ""),
        probe_error=_error(data.get("probe_error")),
        multi_gpu=_collective(data.get("multi_gpu")),
        bench=_bench(data.get("bench")),
        companions=tuple(_companion(c) for c in _list(data.get("companions"))),
    )


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {type(value).__name__}")
    return value


def _opt_str(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _opt_bool(value: Any) -> Optional[bool]:
    return None if value is None else bool(value)


def _opt_number(value: Any, cast: Callable[[Any], T]) -> Optional[T]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("expected a number, got true/false")
    try:
        return cast(value)
    except OverflowError:  # an integer too large for a float (or inf for an int): no measurement is that
        raise ValueError(f"expected a number, got one of {len(str(value)) if isinstance(value, int) else '?'} "
                         "digits") from None


def _opt_int(value: Any) -> Optional[int]:
    return _opt_number(value, int)


def _opt_float(value: Any) -> Optional[float]:
    return _opt_number(value, float)


def _error(value: Any) -> Optional[ErrorText]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return ErrorText(where="", type="Error", message=str(value))
    return ErrorText(
        where=str(value.get("where") or ""),
        type=str(value.get("type") or "Error"),
        message=str(value.get("message") or ""),
        traceback=str(value.get("traceback") or ""),
    )


def _warning(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"{value.get('category', 'Warning')}: {value.get('message', '')}"
    return str(value)


def _check(value: Any) -> Check:
    if not isinstance(value, Mapping):
        raise ValueError("a check is not a mapping")
    return Check(
        name=str(value.get("name") or "?"),
        device=str(value.get("device") or "?"),
        ok=bool(value.get("ok")),
        max_error=_opt_float(value.get("max_error")),
        tolerance=_opt_float(value.get("tolerance")),
        seconds=_opt_float(value.get("seconds")),
        problem=_opt_str(value.get("problem")),
        error=_error(value.get("error")),
    )


def _device(value: Any, position: int) -> ProbeDevice:
    if not isinstance(value, Mapping):
        raise ValueError("a device is not a mapping")
    index = _opt_int(value.get("index"))
    return ProbeDevice(
        index=position if index is None else index,
        name=_opt_str(value.get("name")),
        compute_capability=_opt_str(value.get("compute_capability")),
        memory_mib=_opt_int(value.get("memory_mib")),
        checks=tuple(_check(c) for c in _list(value.get("checks"))),
        gfx=_opt_str(value.get("gfx")),
    )


def _companion(value: Any) -> Companion:
    if not isinstance(value, Mapping):
        raise ValueError("a companion is not a mapping")
    return Companion(name=str(value.get("name") or "?"), version=_opt_str(value.get("version")),
                     asked=bool(value.get("asked")), imported=bool(value.get("imported")),
                     error=_error(value.get("error")), checks=tuple(_check(c) for c in _list(value.get("checks"))))


def _collective(value: Any) -> Optional[Collective]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError("multi_gpu is not a mapping")
    ok = value.get("ok")
    return Collective(
        ok=None if ok is None else bool(ok),
        skipped=_opt_str(value.get("skipped")),
        method=_opt_str(value.get("method")),
        world_size=_opt_int(value.get("world_size")),
        size_bytes=_opt_int(value.get("bytes")),
        busbw_gbs=_opt_float(value.get("busbw_gbs")),
        algbw_gbs=_opt_float(value.get("algbw_gbs")),
        error=_error(value.get("error")),
    )


def _bench(value: Any) -> Optional[Bench]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError("bench is not a mapping")
    runs = []
    for run in _list(value.get("runs")):
        if not isinstance(run, Mapping):
            raise ValueError("a bench run is not a mapping")
        runs.append(BenchRun(
            index=_opt_int(run.get("index")) or 0,
            dtype=str(run.get("dtype") or "?"),
            tflops=_opt_float(run.get("tflops")),
            n=_opt_int(run.get("n")),
            seconds=_opt_float(run.get("seconds")),
            error=_error(run.get("error")),
        ))
    ok = value.get("ok")
    return Bench(ok=None if ok is None else bool(ok), skipped=_opt_str(value.get("skipped")), runs=tuple(runs),
                 tf32=_opt_bool(value.get("tf32")))
