"""How each known failure is recognised: the patterns frameworks print, and one matcher per rule of
envkit.probe.rules. A matcher reads the facts of a check and yields the values for its rule's templates, once per
thing it found (nothing: the rule does not apply). Pure."""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from envkit.probe.builds import companion_pin, parse_cuda
from envkit.probe.facts import (Facts, arch_strings, covers, device_label, first_line, gpus_text, last_line,
                                machine_label)
from envkit.probe.result import NO_REPORT, TIMED_OUT, Check, ProbeResult
from envkit.slurm.job_context import hides_all, job_given_gpus
from envkit.versions import CudaVersion

Matcher = Callable[[Facts], Iterable[Mapping[str, Any]]]


# --- patterns in what frameworks print ---------------------------------------------------------------------------

DRIVER_TOO_OLD = (
    r"driver on your system is too old \(found version (?P<number>[0-9]{4,6})\)",
    r"NVIDIA driver's CUDA version is (?P<version>[0-9]+\.[0-9]+) which is older",
    r"CUDA driver version is insufficient for CUDA runtime version",
    r"cudaErrorInsufficientDriver",
    r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
)
NO_KERNEL = (
    r"no kernel image is available for execution on the device",
    # ROCm's: HIP has no code object for the GPU's target (the build's gfx list lacks it)
    r"HIP error: invalid device function",
    r"hipErrorNoBinaryForGpu",
    r"hipErrorInvalidDeviceFunction",
    r"with CUDA capability sm_[0-9]+ is not compatible with the current PyTorch installation",
    r"CUDA_ERROR_NO_BINARY_FOR_GPU",
    r"cudaErrorNoKernelImageForDevice",
)
NUMPY2 = (
    r"compiled using NumPy 1\.x cannot be run in\s+NumPy 2",
    r"_ARRAY_API not found",
    r"numpy\.core\.multiarray failed to import",
)
OUT_OF_MEMORY = (r"out of memory", r"CUDA_ERROR_OUT_OF_MEMORY", r"RESOURCE_EXHAUSTED")
BUSY = (r"busy or unavailable", r"CUDA_ERROR_DEVICES_UNAVAILABLE", r"cudaErrorDevicesUnavailable")
OLD_PYTHON = (r"Unknown option: -I", r"SyntaxError: invalid syntax", r"unknown option -I")
MISSING_LIBRARY = r"(?P<library>lib[\w.+-]+?\.so(?:\.[0-9.]+)?): cannot open shared object file"


def search(patterns: Sequence[str], texts: Iterable[str]) -> Optional[re.Match]:
    for text in texts:
        for pattern in patterns:
            found = re.search(pattern, text)
            if found:
                return found
    return None


def driver_cuda_from(probe: ProbeResult) -> Optional[CudaVersion]:
    """The driver's CUDA as a framework's error reported it: "found version 11020" is CUDA 11.2."""
    found = search(DRIVER_TOO_OLD[:2], probe.texts())
    if found is None:
        return None
    groups = found.groupdict()
    try:
        if groups.get("number"):
            return CudaVersion.from_driver_int(int(groups["number"]))
        return CudaVersion.parse(groups["version"])
    except ValueError:
        return None


# --- matchers ----------------------------------------------------------------------------------------------------

def timed_out(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.failure == TIMED_OUT:
        timeout = f.probe.timeout or 0
        if f.profile.gpus or f.profile.hidden_gpus or not f.on_target:
            suspect = ("A GPU or driver that hangs is the usual reason: look at `nvidia-smi` (a process stuck on the "
                       "GPU) and for Xid errors in `dmesg`.")
        else:  # no GPU here to hang on: the Python, or what it imports, does
            suspect = (f"This machine has no GPU to hang on: run `{f.probe.python_executable} -V` to see whether "
                       "that Python starts at all, and look for an import that waits (a network filesystem, a lock).")
        yield {"timeout": f"{timeout:g}", "longer": f"{max(timeout * 2, 60):g}", "suspect": suspect}


def old_python(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.failure == NO_REPORT and search(OLD_PYTHON, [f.probe.stderr, f.probe.stdout]):
        yield {}


def no_report(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.failure is not None and f.probe.failure != TIMED_OUT:
        yield {"what": f.probe.failure_detail, "tail": last_line(f.probe.stderr) or "nothing on stderr"}


def probe_error(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.reported and f.probe.probe_error is not None:
        yield {"error": f.probe.probe_error.text}


def no_framework(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.reported and f.probe.framework is None and f.probe.probe_error is None:
        yield {}


def numpy2(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.reported and search(NUMPY2, f.probe.texts()):
        yield {"effect": "cannot be imported" if not f.probe.imported else
               "imports, but fails wherever it exchanges arrays with NumPy"}


def import_missing(f: Facts) -> Iterable[Mapping[str, Any]]:
    error = f.probe.import_error
    if f.probe.reported and f.probe.framework and error is not None and error.type == "ModuleNotFoundError" \
            and re.search(rf"No module named '{re.escape(f.probe.framework)}'", error.message):
        yield {}


def missing_library(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.imported or f.probe.import_error is None:
        return
    found = search([MISSING_LIBRARY], [f.probe.import_error.message, f.probe.import_error.traceback])
    if found:
        library = found.group("library")
        if library.startswith("libcuda.so"):
            why = ("it is the NVIDIA driver's own library, so this machine (or container) has no usable NVIDIA "
                   "driver")
            what = ("Run it where the driver is (a GPU node; in a container, start it with the GPUs passed through), "
                    "or use a CPU build here")
        else:
            why = "a library this build needs is not installed"
            what = "Reinstall the build into a fresh environment"
        yield {"library": library, "why": why, "what": what}


def import_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    error = f.probe.import_error
    if f.probe.reported and f.probe.framework and not f.probe.imported and error is not None:
        yield {"error": first_line(error.text)}


def driver_too_old(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.probe.imported:
        return
    need = parse_cuda(f.probe.cuda)
    if not search(DRIVER_TOO_OLD, f.probe.texts()):
        # The framework did not say so (JAX's CUDA plugin only finds no GPU): the facts do, where the GPU part failed
        # on the machine the check ran on, whose driver cannot run the build's CUDA.
        build = f.installed or f.expected
        if build is None or build.cuda is None or not _gpu_part_failed(f) or f.tables is None \
                or f.profile.cuda_driver is None:
            return
        from envkit.pick.resolve import driver_runs

        if driver_runs(build, f.profile, f.tables)[0]:
            return
        need = build.cuda
    have = f.driver_cuda or (f.profile.cuda_driver if f.on_target else None)
    floor = f.tables.cuda.min_driver.get(need) if f.tables is not None and need is not None else None
    update = f" Or have the NVIDIA driver updated to {floor} or newer (the first for CUDA {need})." if floor \
        else " Or have the NVIDIA driver updated."
    last = _last_driver(f, need)
    if last is not None:  # no driver for that CUDA drives this GPU: never advise one
        gpu, driver = last
        update = (f" No driver update can run it here: no driver for CUDA {need} drives the {gpu.description}, "
                  f"{driver.describe()}; no build for a newer CUDA than {driver.cuda} will ever run on it.")
    yield {
        "have": f"CUDA {have}" if have else "an older CUDA",
        "need": f"CUDA {need}" if need else "a newer CUDA",
        "update": update,
    }


def _gpu_part_failed(f: Facts) -> bool:
    """Whether a GPU build, checked on the machine judged, failed its GPU part: fewer GPUs seen than the machine has
    (none, often), or a GPU's computations failed."""
    return _looked_for_gpus(f) and bool(f.profile.gpus) and (
        f.seen < len(f.profile.gpus) or not all(device.ok for device in f.probe.devices))


def _last_driver(f: Facts, need: Any) -> Any:
    """(a GPU of the machine, the last driver branch that drives it) when that branch is older than CUDA ``need``;
    else None."""
    if f.tables is None or need is None:
        return None
    for gpu in f.profile.gpus:
        last = f.tables.cuda.last_driver_for(gpu.compute_capability) if gpu.compute_capability else None
        if last is not None and need > last.cuda:
            return gpu, last
    return None


def cpu_build(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.probe.imported or f.gpu_build or not f.gpus_wanted:
        return
    evidence = {
        "torch": "torch.version.cuda is None" + (", and its version ends in +cpu" if "+cpu" in (f.probe.version or "")
                                                 else ""),
        "tensorflow": "its build information says it was not built with CUDA",
        "jax": "no CUDA plugin (jax[cudaNN]) is installed",
        "mxnet": "it was built without CUDA",
    }.get(f.framework, "it was built without CUDA")
    gpus = len(f.profile.gpus)
    machine = "this machine's" if f.on_target else "that machine's"
    yield {"evidence": evidence, "gpus": f"{machine} {gpus_text(gpus)}" if gpus else "a GPU"}


def _looked_for_gpus(f: Facts) -> bool:
    """Whether the probe got as far as asking a GPU build for its GPUs, on the machine being judged."""
    return f.on_target and f.probe.imported and f.gpu_build and f.probe.probe_error is None


def _no_gpu_visible(f: Facts) -> bool:
    return _looked_for_gpus(f) and f.seen == 0


def _all_gpus(f: Facts) -> int:
    """The GPUs of the machine judged, those that CUDA_VISIBLE_DEVICES hides from this process included (a profile
    detected here counts only the visible ones: envkit.slurm.job_context)."""
    return len(f.profile.gpus) + len(f.profile.hidden_gpus)


def slurm_no_gpu(f: Facts) -> Iterable[Mapping[str, Any]]:
    job = f.env.get("SLURM_JOB_ID")
    # Only a job that really has none: one given GPUs (SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES) whose framework
    # sees none has another cause (the driver, the build's GPU code, the GPUs' state), said by the other rules.
    if job and _no_gpu_visible(f) and not job_given_gpus(f.env):
        yield {"job": job}


def gpus_hidden(f: Facts) -> Iterable[Mapping[str, Any]]:
    value = f.env.get("CUDA_VISIBLE_DEVICES")
    # Hidden by it as envkit read it (a UUID matched to none of NVML's GPUs), or by its form alone.
    read_as_hiding = bool(f.profile.hidden_gpus) and not f.profile.gpus
    if value is not None and _no_gpu_visible(f) and (read_as_hiding or hides_all(value, _all_gpus(f))):
        yield {"value": value}


def gpus_partly_hidden(f: Facts) -> Iterable[Mapping[str, Any]]:
    value = f.env.get("CUDA_VISIBLE_DEVICES")
    total = _all_gpus(f)
    in_job = bool(f.env.get("SLURM_JOB_ID"))  # a job's GPUs are a part of the node's by design: nothing to say
    if value is not None and not in_job and _looked_for_gpus(f) and 0 < f.seen < total:
        yield {"value": value, "seen": f.seen, "total": gpus_text(total)}


def _driven(f: Facts) -> tuple:
    """The machine's GPUs the probed build drives: the AMD ones for a ROCm build, the NVIDIA ones otherwise."""
    return f.profile.amd_gpus if f.probe.hip else f.profile.nvidia_gpus


def no_gpu_here(f: Facts) -> Iterable[Mapping[str, Any]]:
    if _no_gpu_visible(f) and not _driven(f):
        yield {"vendor": "an AMD GPU (it is a ROCm build)" if f.probe.hip else "an NVIDIA GPU"}


def gpus_not_seen(f: Facts) -> Iterable[Mapping[str, Any]]:
    total = len(_driven(f))
    value = f.env.get("CUDA_VISIBLE_DEVICES")
    explained = value is not None and (f.seen > 0 or hides_all(value, _all_gpus(f)))  # a part, or none, on purpose
    if _looked_for_gpus(f) and f.seen < total and not explained:
        error = next(iter(f.probe.errors), None)
        yield {"seen": f.seen, "total": gpus_text(total),
               "error": f" It said: {first_line(error.text)}" if error is not None else ""}


def no_kernels(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.probe.imported or not f.gpu_build:
        return
    arch = tuple(f.probe.arch_list) or (arch_strings(f.installed.arch) if f.installed and f.installed.arch else ()) \
        or (f.installed.gfx if f.installed else ())
    carries = ", ".join(arch) or "no list of its GPU code"
    if f.on_target and not f.probe.devices and _gpu_part_failed(f):
        # The framework saw no GPU at all: the machine's GPUs, judged by the build's GPU code.
        for gpu in f.profile.gpus:
            capability = str(gpu.compute_capability) if gpu.compute_capability else None
            if covers(arch, capability) is False:
                yield {"gpu": device_label(gpu.index, gpu.name, capability), "carries": carries}
    elif f.on_target:
        said = search(NO_KERNEL, f.probe.texts()) is not None
        for device in f.probe.devices:
            covered = covers(arch, device.compute_capability, device.gfx)
            failed_checks = any(c.error is not None and search(NO_KERNEL, [c.error.text]) for c in device.checks)
            if covered is False or failed_checks or (said and covered is None and not device.ok):
                yield {"gpu": device_label(device.index, device.name, device.compute_capability, device.gfx),
                       "carries": carries}
    elif f.installed is None:
        for gpu in f.profile.gpus:
            capability = str(gpu.compute_capability) if gpu.compute_capability else None
            if covers(arch, capability, gpu.gfx) is False:
                yield {"gpu": device_label(gpu.index, gpu.name, capability, gpu.gfx), "carries": carries}


def check_errors(patterns: Sequence[str]) -> Matcher:
    """Checks that failed with one of these errors: one finding per device, the first such check's."""
    def match(f: Facts) -> Iterable[Mapping[str, Any]]:
        done = set()
        for where, check in f.checks():
            if where not in done and check.error is not None and search(patterns, [check.error.text]):
                done.add(where)
                yield {"where": where, "check": check.name, "error": first_line(check.error.text)}
    return match


_EXPLAINED = DRIVER_TOO_OLD + NO_KERNEL + OUT_OF_MEMORY + BUSY


def computation_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    for where, check in f.checks():
        if check.error is not None and not search(_EXPLAINED, [check.error.text]):
            yield {"where": where, "check": check.name, "error": first_line(check.error.text)}


def wrong_results(f: Facts) -> Iterable[Mapping[str, Any]]:
    """One finding per device, naming every computation that came out wrong there and the first one's problem."""
    wrong: dict[str, list[Check]] = {}
    for where, check in f.checks():
        if check.error is None and not check.ok:
            wrong.setdefault(where, []).append(check)
    for where, checks in wrong.items():
        yield {"where": where, "check": " and ".join(c.name for c in checks),
               "problem": checks[0].problem or "the result is wrong"}


def does_not_fit(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.on_target or f.installed is None or f.tables is None or not f.probe.imported:
        return
    from envkit.pick.resolve import assess

    candidate = assess(f.installed, f.profile, f.tables)
    if candidate.build.is_gpu and not candidate.compatible:
        yield {"build": f.installed.id, "machine": machine_label(f.profile), "reasons": "; ".join(candidate.reasons)}


def not_checked_here(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.on_target and f.probe.imported and f.profile.gpus:
        import shlex

        # the environment checked, by its Python: a bare `envkit doctor` would check whichever one is active there
        doctor = shlex.join(["envkit", "doctor", "--python", f.probe.python_executable])
        yield {"machine": machine_label(f.profile), "doctor": doctor}


def not_identified(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.imported and f.installed is None and f.manifest is not None:
        yield {"manifest": f.manifest.name}


def multi_gpu_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    collective = f.probe.multi_gpu
    if collective is not None and collective.ok is False:
        error = first_line(collective.error.text) if collective.error else "no rank reported success"
        yield {"n": collective.world_size or f.seen, "error": error, "method": collective.method or "all-reduce"}


def multi_gpu_skipped(f: Facts) -> Iterable[Mapping[str, Any]]:
    collective = f.probe.multi_gpu
    if collective is not None and collective.ok is None:
        yield {"why": collective.skipped or "skipped"}


def bench_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    bench = f.probe.bench
    for run in bench.runs if bench is not None else ():
        if run.error is not None:
            yield {"index": run.index, "dtype": run.dtype, "error": first_line(run.error.text)}


def bench_skipped(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.bench is not None and f.probe.bench.ok is None:
        yield {"why": f.probe.bench.skipped or "skipped"}


def companion_missing(f: Facts) -> Iterable[Mapping[str, Any]]:
    """A companion the build installs that is not there."""
    for companion in f.probe.companions:
        if _missing(companion):
            build = f.installed or f.expected
            yield {"companion": companion.name, "pin": companion_pin(build, companion.name) or companion.name}


def companion_broken(f: Facts) -> Iterable[Mapping[str, Any]]:
    """A companion that cannot be imported beside the framework, or whose operation failed: one finding each, with
    the pair of versions and the build's own pin of it."""
    for companion in f.probe.companions:
        if companion.ok or _missing(companion):
            continue
        if companion.error is not None:
            what = f"importing it fails: {first_line(companion.error.text)}"
        else:
            check = next(c for c in companion.checks if not c.ok)
            said = first_line(check.error.text) if check.error is not None else check.problem or "a wrong result"
            what = f"{check.name} failed on {check.device}: {said}"
        pin = companion_pin(f.installed or f.expected, companion.name)
        yield {"companion": companion.name, "version": companion.version or "(version unknown)", "what": what,
               "pin": f"; the build installs {pin}" if pin else ""}


def _missing(companion: Any) -> bool:
    error = companion.error
    return (companion.asked and error is not None and error.type == "ModuleNotFoundError"
            and f"No module named '{companion.name}'" in error.message)
