"""The diagnosis rules: every known failure, how to recognise it in a probe's result, its cause and the next step.

The table RULES: each rule has an id, a cause and an advice template, and a matcher that reads the facts (the probe's
fields, the error texts it captured, the machine) and returns the values for the templates, once per thing it
found. Most matchers are a few regular expressions, but some compare facts (a GPU's capability with the build's arch
list), so the table lives here rather than in envs/. A rule's ``unless`` names rules that, when they fired, already
explain what it would. envkit.probe.diagnose applies the table and assembles the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from envkit.probe.builds import parse_cuda
from envkit.probe.facts import (Facts, arch_strings, covers, device_label, first_line, gpus_text, last_line,
                                machine_label)
from envkit.probe.result import NO_REPORT, TIMED_OUT, Check, ProbeResult
from envkit.versions import CudaVersion

Matcher = Callable[[Facts], Iterable[Mapping[str, Any]]]


@dataclass(frozen=True)
class Rule:
    id: str
    cause: str
    advice: str
    match: Matcher
    failed: bool = True
    unless: tuple[str, ...] = ()  # rules that, when they fired, already explain what this one would


# --- patterns in what frameworks print ---------------------------------------------------------------------------

DRIVER_TOO_OLD = (
    r"driver on your system is too old \(found version (?P<number>\d{4,6})\)",
    r"NVIDIA driver's CUDA version is (?P<version>\d+\.\d+) which is older",
    r"CUDA driver version is insufficient for CUDA runtime version",
    r"cudaErrorInsufficientDriver",
    r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
)
NO_KERNEL = (
    r"no kernel image is available for execution on the device",
    r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
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
MISSING_LIBRARY = r"(?P<library>lib[\w.+-]+?\.so(?:\.[\d.]+)?): cannot open shared object file"
# Values of CUDA_VISIBLE_DEVICES that hide every GPU.
HIDING = re.compile(r"^\s*(|-1|none|NoDevFiles|void)\s*$", re.IGNORECASE)


def _search(patterns: Sequence[str], texts: Iterable[str]) -> Optional[re.Match]:
    for text in texts:
        for pattern in patterns:
            found = re.search(pattern, text)
            if found:
                return found
    return None


def driver_cuda_from(probe: ProbeResult) -> Optional[CudaVersion]:
    """The driver's CUDA as a framework's error reported it: "found version 11020" is CUDA 11.2."""
    found = _search(DRIVER_TOO_OLD[:2], probe.texts())
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

def _timed_out(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.failure == TIMED_OUT:
        timeout = f.probe.timeout or 0
        yield {"timeout": f"{timeout:g}", "longer": f"{max(timeout * 2, 60):g}"}


def _old_python(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.failure == NO_REPORT and _search(OLD_PYTHON, [f.probe.stderr, f.probe.stdout]):
        yield {}


def _no_report(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.failure is not None and f.probe.failure != TIMED_OUT:
        yield {"what": f.probe.failure_detail, "tail": last_line(f.probe.stderr) or "nothing on stderr"}


def _probe_error(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.reported and f.probe.probe_error is not None:
        yield {"error": f.probe.probe_error.text}


def _no_framework(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.reported and f.probe.framework is None and f.probe.probe_error is None:
        yield {}


def _numpy2(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.reported and _search(NUMPY2, f.probe.texts()):
        yield {"effect": "cannot be imported" if not f.probe.imported else
               "imports, but fails wherever it exchanges arrays with NumPy"}


def _import_missing(f: Facts) -> Iterable[Mapping[str, Any]]:
    error = f.probe.import_error
    if f.probe.reported and f.probe.framework and error is not None and error.type == "ModuleNotFoundError" \
            and re.search(rf"No module named '{re.escape(f.probe.framework)}'", error.message):
        yield {}


def _missing_library(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.imported or f.probe.import_error is None:
        return
    found = _search([MISSING_LIBRARY], [f.probe.import_error.message, f.probe.import_error.traceback])
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


def _import_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    error = f.probe.import_error
    if f.probe.reported and f.probe.framework and not f.probe.imported and error is not None:
        yield {"error": first_line(error.text)}


def _driver_too_old(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.probe.imported or not _search(DRIVER_TOO_OLD, f.probe.texts()):
        return
    have = f.driver_cuda or (f.profile.cuda_driver if f.on_target else None)
    need = parse_cuda(f.probe.cuda)
    floor = f.tables.cuda.min_driver.get(need) if f.tables is not None and need is not None else None
    yield {
        "have": f"CUDA {have}" if have else "an older CUDA",
        "need": f"CUDA {need}" if need else "a newer CUDA",
        "update": f" Or have the NVIDIA driver updated to {floor} or newer (the first for CUDA {need})."
        if floor else " Or have the NVIDIA driver updated.",
    }


def _cpu_build(f: Facts) -> Iterable[Mapping[str, Any]]:
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


def _slurm_no_gpu(f: Facts) -> Iterable[Mapping[str, Any]]:
    job = f.env.get("SLURM_JOB_ID")
    if job and _no_gpu_visible(f):
        yield {"job": job}


def cvd_hides_all(value: str, gpus: int) -> bool:
    """Whether CUDA_VISIBLE_DEVICES hides every GPU of a machine with ``gpus`` GPUs: an empty list, -1, or a first
    entry that names no GPU there (CUDA reads the list up to its first invalid entry). UUIDs are taken as valid."""
    if HIDING.match(value):
        return True
    if gpus == 0:
        return False  # nothing to hide: the machine has no GPU
    first = value.split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return False
    return not (first.isdigit() and int(first) < gpus)


def _gpus_hidden(f: Facts) -> Iterable[Mapping[str, Any]]:
    value = f.env.get("CUDA_VISIBLE_DEVICES")
    if value is not None and _no_gpu_visible(f) and cvd_hides_all(value, len(f.profile.gpus)):
        yield {"value": value}


def _gpus_partly_hidden(f: Facts) -> Iterable[Mapping[str, Any]]:
    value = f.env.get("CUDA_VISIBLE_DEVICES")
    total = len(f.profile.gpus)
    if value is not None and _looked_for_gpus(f) and 0 < f.seen < total:
        yield {"value": value, "seen": f.seen, "total": gpus_text(total)}


def _no_gpu_here(f: Facts) -> Iterable[Mapping[str, Any]]:
    if _no_gpu_visible(f) and not f.profile.gpus:
        yield {}


def _gpus_not_seen(f: Facts) -> Iterable[Mapping[str, Any]]:
    total = len(f.profile.gpus)
    value = f.env.get("CUDA_VISIBLE_DEVICES")
    explained = value is not None and (f.seen > 0 or cvd_hides_all(value, total))  # a subset, or none, on purpose
    if _looked_for_gpus(f) and f.seen < total and not explained:
        error = next(iter(f.probe.errors), None)
        yield {"seen": f.seen, "total": gpus_text(total),
               "error": f" It said: {first_line(error.text)}" if error is not None else ""}


def _no_kernels(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.probe.imported or not f.gpu_build:
        return
    arch = tuple(f.probe.arch_list) or (arch_strings(f.installed.arch) if f.installed and f.installed.arch else ())
    carries = ", ".join(arch) or "no list of its GPU code"
    if f.on_target:
        said = _search(NO_KERNEL, f.probe.texts()) is not None
        for device in f.probe.devices:
            covered = covers(arch, device.compute_capability)
            failed_checks = any(c.error is not None and _search(NO_KERNEL, [c.error.text]) for c in device.checks)
            if covered is False or failed_checks or (said and covered is None and not device.ok):
                yield {"gpu": device_label(device.index, device.name, device.compute_capability),
                       "carries": carries}
    elif f.installed is None:
        for gpu in f.profile.gpus:
            capability = str(gpu.compute_capability) if gpu.compute_capability else None
            if covers(arch, capability) is False:
                yield {"gpu": device_label(gpu.index, gpu.name, capability), "carries": carries}


def _check_errors(patterns: Sequence[str]) -> Matcher:
    """Checks that failed with one of these errors: one finding per device, the first such check's."""
    def match(f: Facts) -> Iterable[Mapping[str, Any]]:
        done = set()
        for where, check in f.checks():
            if where not in done and check.error is not None and _search(patterns, [check.error.text]):
                done.add(where)
                yield {"where": where, "check": check.name, "error": first_line(check.error.text)}
    return match


_EXPLAINED = DRIVER_TOO_OLD + NO_KERNEL + OUT_OF_MEMORY + BUSY


def _computation_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    for where, check in f.checks():
        if check.error is not None and not _search(_EXPLAINED, [check.error.text]):
            yield {"where": where, "check": check.name, "error": first_line(check.error.text)}


def _wrong_results(f: Facts) -> Iterable[Mapping[str, Any]]:
    """One finding per device, naming every computation that came out wrong there and the first one's problem."""
    wrong: dict[str, list[Check]] = {}
    for where, check in f.checks():
        if check.error is None and not check.ok:
            wrong.setdefault(where, []).append(check)
    for where, checks in wrong.items():
        yield {"where": where, "check": " and ".join(c.name for c in checks),
               "problem": checks[0].problem or "the result is wrong"}


def _does_not_fit(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.on_target or f.installed is None or f.tables is None or not f.probe.imported:
        return
    from envkit.resolve import assess

    candidate = assess(f.installed, f.profile, f.tables)
    if candidate.build.is_gpu and not candidate.compatible:
        yield {"build": f.installed.id, "machine": machine_label(f.profile), "reasons": "; ".join(candidate.reasons)}


def _not_checked_here(f: Facts) -> Iterable[Mapping[str, Any]]:
    if not f.on_target and f.probe.imported and f.profile.gpus:
        yield {"machine": machine_label(f.profile)}


def _not_identified(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.imported and f.installed is None and f.manifest is not None:
        yield {"manifest": f.manifest.name}


def _multi_gpu_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    collective = f.probe.multi_gpu
    if collective is not None and collective.ok is False:
        error = first_line(collective.error.text) if collective.error else "no rank reported success"
        yield {"n": collective.world_size or f.seen, "error": error, "method": collective.method or "all-reduce"}


def _multi_gpu_skipped(f: Facts) -> Iterable[Mapping[str, Any]]:
    collective = f.probe.multi_gpu
    if collective is not None and collective.ok is None:
        yield {"why": collective.skipped or "skipped"}


def _bench_failed(f: Facts) -> Iterable[Mapping[str, Any]]:
    bench = f.probe.bench
    for run in bench.runs if bench is not None else ():
        if run.error is not None:
            yield {"index": run.index, "dtype": run.dtype, "error": first_line(run.error.text)}


def _bench_skipped(f: Facts) -> Iterable[Mapping[str, Any]]:
    if f.probe.bench is not None and f.probe.bench.ok is None:
        yield {"why": f.probe.bench.skipped or "skipped"}


# --- the table -----------------------------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule("probe-timed-out", "the check did not finish within {timeout} s and was stopped",
         "A GPU or driver that hangs is the usual reason: look at `nvidia-smi` (a process stuck on the GPU) and for "
         "Xid errors in `dmesg`. If the machine is only slow (the first start of a build compiles its PTX), rerun "
         "with --probe-timeout {longer}.", _timed_out),
    Rule("python-too-old", "{python} cannot run the check: it needs Python 3.6 or newer",
         "Check an environment with Python 3.6 or newer (pass its python with --python); {create}", _old_python),
    Rule("probe-no-report", "the check {what}; the last thing it wrote on stderr: {tail}",
         "Run `{python} -c 'import {framework}'` to see the error, and check that {python} is a working Python "
         "3.6 or newer.", _no_report, unless=("python-too-old",)),
    Rule("probe-crashed", "the check stopped early: {error}",
         "This is a bug in envkit's probe or a framework that exits on import: rerun with --debug and report it.",
         _probe_error),
    Rule("no-framework", "none of torch, tensorflow, jax or mxnet is installed for {python}",
         "Activate the environment to check, or pass its python with --python; {create}", _no_framework),
    Rule("numpy2", "{subject} was built against NumPy 1.x, and this environment has NumPy 2: it {effect}",
         "Install NumPy 1 into it: `{python} -m pip install 'numpy<2'`; or move to a newer build: {create}", _numpy2),
    Rule("import-missing", "{framework} is not installed for {python}",
         "Pass the python of the environment that has it with --python; {create}", _import_missing,
         unless=("numpy2",)),
    Rule("missing-library", "{framework} cannot load {library}: {why}", "{what}; {create}", _missing_library,
         unless=("numpy2",)),
    Rule("import-failed", "{framework} cannot be imported: {error}",
         "Run `{python} -c 'import {framework}'` to see the whole error; reinstalling into a fresh environment "
         "usually cures it: {create}", _import_failed, unless=("numpy2", "import-missing", "missing-library")),
    Rule("driver-too-old", "the NVIDIA driver is too old for this build: it supports {have}, the build needs {need}",
         "Use a build that runs on this driver: {create}{update}", _driver_too_old),
    Rule("cpu-build", "{subject} is a CPU-only build ({evidence}): it cannot use {gpus}",
         "Install a GPU build: {create}", _cpu_build),
    Rule("slurm-no-gpu", "this Slurm job ({job}) has no GPU: {framework} sees none",
         "Ask Slurm for GPUs: `srun --gpus-per-node=1 ...`, or `#SBATCH --gres=gpu:1` in the batch script (on a login "
         "node, run the check inside such a job).", _slurm_no_gpu, unless=("driver-too-old",)),
    Rule("gpus-hidden", "CUDA_VISIBLE_DEVICES={value!r} hides the GPUs: {framework} sees none",
         "Unset CUDA_VISIBLE_DEVICES, or set it to the GPUs to use (e.g. CUDA_VISIBLE_DEVICES=0,1).", _gpus_hidden,
         unless=("driver-too-old", "slurm-no-gpu")),
    Rule("gpus-partly-hidden", "CUDA_VISIBLE_DEVICES={value!r} shows {framework} {seen} of this machine's {total}",
         "Only those were checked; unset CUDA_VISIBLE_DEVICES to check them all.", _gpus_partly_hidden, failed=False),
    Rule("no-gpu-here", "this {framework} build needs an NVIDIA GPU, and this machine has none that works",
         "Run the check on a GPU node, or judge this environment for one from here with --machine FILE (`envkit "
         "detect --json` saved there). For CPU work here: {create}", _no_gpu_here,
         unless=("driver-too-old", "slurm-no-gpu", "gpus-hidden")),
    Rule("gpus-not-seen", "{framework} sees {seen} of this machine's {total}.{error}",
         "Look at `nvidia-smi`: a GPU in an error state, in MIG mode or in exclusive use by another process is not "
         "offered to new processes.", _gpus_not_seen,
         unless=("driver-too-old", "slurm-no-gpu", "gpus-hidden", "no-gpu-here")),
    Rule("no-kernels", "this build has no kernels for {gpu}: it carries {carries}",
         "Use a build that has them: {create}", _no_kernels, unless=("driver-too-old",)),
    Rule("gpu-out-of-memory", "{where} ran out of memory during {check}: {error}",
         "Other processes hold its memory: see `nvidia-smi`, and rerun when it is free.",
         _check_errors(OUT_OF_MEMORY)),
    Rule("gpu-busy", "{where} is busy or unavailable: {error}",
         "It is in exclusive compute mode and in use, or prohibited: see `nvidia-smi -q -d COMPUTE` and its processes.",
         _check_errors(BUSY)),
    Rule("wrong-results", "{where} computed {check} wrongly: {problem}",
         "The build runs but computes wrong numbers: look for ECC or Xid errors (`nvidia-smi -q -d ECC`, `dmesg`), "
         "try another GPU with CUDA_VISIBLE_DEVICES, and tell the machine's admin.", _wrong_results),
    Rule("computation-failed", "{check} failed on {where}: {error}",
         "Run the same computation by hand to see the whole error; the captured tracebacks are in --json.",
         _computation_failed),
    Rule("does-not-fit", "{build} does not run on {machine}: {reasons}", "Use a build that does: {create}",
         _does_not_fit),
    Rule("gpus-not-checked-here", "no GPU computation ran: the check ran on this machine, not on {machine}",
         "Run `envkit doctor` on that machine (in a job on that partition) to check its GPUs for real.",
         _not_checked_here, failed=False),
    Rule("build-not-in-manifest", "the installed {subject} is not a build of the {manifest} manifest",
         "It was judged by what it reports about itself only.", _not_identified, failed=False),
    Rule("multi-gpu-failed", "the {method} across {n} GPUs failed: {error}",
         "Rerun with NCCL_DEBUG=INFO set to see where NCCL stops (torch's all-reduce, JAX's psum and TensorFlow's "
         "NcclAllReduce run on NCCL); NCCL_P2P_DISABLE=1 tells whether peer-to-peer transfers are the problem.",
         _multi_gpu_failed),
    Rule("multi-gpu-skipped", "--multi-gpu: {why}", "The rest of the check is complete without it.",
         _multi_gpu_skipped, failed=False),
    Rule("bench-failed", "the benchmark failed on GPU {index} ({dtype}): {error}",
         "The correctness checks above tell whether the GPU works; the benchmark needs about 200 MiB of free GPU "
         "memory.", _bench_failed),
    Rule("bench-skipped", "--bench: {why}", "The rest of the check is complete without it.", _bench_skipped,
         failed=False),
)

