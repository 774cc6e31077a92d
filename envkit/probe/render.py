"""The check's report as text and as JSON. Pure: each function returns a str or a JSON-ready dict."""

from __future__ import annotations

from typing import Any, Optional

from envkit.pick.render import machine_line
from envkit.probe.diagnose import Report
from envkit.probe.result import Bench, Check, Collective, ErrorText, ProbeResult

_SHOWN_WARNINGS = 3


def report_json(report: Report) -> dict[str, Any]:
    """``{"ok", "framework", "version", "cuda", "devices", "diagnosis", ...}``: the keys of issue 4 and the evidence."""
    probe = report.probe
    step = report.next_step
    return {
        "ok": report.ok,
        "framework": report.framework,
        "version": report.version,
        "cuda": report.cuda,
        "devices": [
            {"index": d.index, "name": d.name, "compute_capability": d.compute_capability, "gfx": d.gfx, "ok": d.ok,
             "detail": d.detail}
            for d in report.devices
        ],
        "diagnosis": [
            {"rule": f.rule, "cause": f.cause, "advice": f.advice, "fails": f.failed} for f in report.diagnosis
        ],
        "python": {"executable": probe.python_executable, "version": probe.python, "machine": probe.machine},
        "installed_build": report.installed_build.id if report.installed_build else None,
        "next": None if step is None else {
            "manifest": step.manifest,
            "build": step.build.id,
            "command": step.command,
            "commands": [step.command, *step.others],  # a fleet no one build fits: one per group of machines
            "machines": list(step.machines),
            "manual": list(step.manual),
        },
        "machine": report.machine.seen_dict(),
        "probed_on_machine": report.on_target,
        "probe": _probe_json(probe),
    }


def _probe_json(probe: ProbeResult) -> dict[str, Any]:
    return {
        "failure": probe.failure,
        "failure_detail": probe.failure_detail or None,
        "exit_code": probe.exit_code,
        "seconds": round(probe.elapsed, 3),
        "installed": list(probe.installed),
        "package": ({"version": probe.package_version, "cuda": probe.package_cuda}
                    if probe.package_version or probe.package_cuda else None),  # a framework that cannot be imported
        "gpu_build": probe.gpu_build,
        "hip": probe.hip,
        "cudnn": probe.cudnn,
        "gpu_available": probe.gpu_available,
        "device_count": probe.device_count,
        "arch_list": list(probe.arch_list),
        "cpu_checks": [_check_json(c) for c in probe.cpu_checks],
        "device_checks": [
            {"index": d.index, "memory_mib": d.memory_mib, "checks": [_check_json(c) for c in d.checks]}
            for d in probe.devices
        ],
        "environment": {k: v for k, v in probe.environment.items() if v is not None},
        "import_error": _error_json(probe.import_error),
        "errors": [_error_json(e) for e in probe.errors],
        "warnings": list(probe.warnings),
        "stderr": probe.stderr[-4000:] or None,
        "multi_gpu": _collective_json(probe.multi_gpu),
        "bench": _bench_json(probe.bench),
        "companions": [{"name": c.name, "version": c.version, "asked": c.asked, "imported": c.imported, "ok": c.ok,
                        "error": _error_json(c.error), "checks": [_check_json(k) for k in c.checks]}
                       for c in probe.companions],
    }


def _check_json(check: Check) -> dict[str, Any]:
    return {"name": check.name, "device": check.device, "ok": check.ok, "max_error": check.max_error,
            "tolerance": check.tolerance, "seconds": check.seconds, "problem": check.problem,
            "error": _error_json(check.error)}


def _error_json(error: Optional[ErrorText]) -> Optional[dict[str, str]]:
    if error is None:
        return None
    return {"where": error.where, "type": error.type, "message": error.message, "traceback": error.traceback}


def _collective_json(collective: Optional[Collective]) -> Optional[dict[str, Any]]:
    if collective is None:
        return None
    return {"ok": collective.ok, "skipped": collective.skipped, "method": collective.method,
            "world_size": collective.world_size,
            "bytes": collective.size_bytes, "busbw_gbs": collective.busbw_gbs, "algbw_gbs": collective.algbw_gbs,
            "error": _error_json(collective.error)}


def _bench_json(bench: Optional[Bench]) -> Optional[dict[str, Any]]:
    if bench is None:
        return None
    return {"ok": bench.ok, "skipped": bench.skipped, "tf32": bench.tf32,
            "runs": [{"index": r.index, "dtype": r.dtype, "n": r.n, "tflops": r.tflops, "seconds": r.seconds,
                      "error": _error_json(r.error)} for r in bench.runs]}


def _unimported(probe: Any) -> str:
    """" 2.15.0 (CUDA 13.2, by its version.py)" for a framework that cannot be imported, from its own files."""
    if not probe.package_version:
        return ""
    cuda = f"CUDA {probe.package_cuda}" if probe.package_cuda else "CPU only"
    return f" {probe.package_version} ({cuda}, by its version.py)"


def report_text(report: Report) -> str:
    probe = report.probe
    lines = [f"Python: {probe.python_executable}" + (f" ({probe.python})" if probe.python else "")]
    if probe.imported:
        kind = f"CUDA {report.cuda}" if report.cuda else ("CPU only" if not probe.gpu_build else "GPU build")
        built = f"; the {report.installed_build.id} build" if report.installed_build else ""
        lines.append(f"Installed: {report.framework} {report.version} ({kind}{built})")
    elif probe.framework and probe.framework in probe.installed:
        lines.append(f"Installed: {probe.framework}{_unimported(probe)}, which cannot be imported")
    elif probe.framework:
        lines.append(f"Installed: no {probe.framework}")
    elif probe.reported:
        lines.append("Installed: none of torch, tensorflow, jax, mxnet")
    where = "" if report.on_target else " (a machine described by a profile: its GPUs are judged, the computations ran here)"
    lines.append(machine_line(report.machine) + where)
    if probe.cpu_checks:
        lines.append(f"  CPU: {_checks_text(probe.cpu_checks)}")
    for device in report.devices:
        arch = f", {device.gfx}" if device.gfx else (
            f", compute capability {device.compute_capability}" if device.compute_capability else "")
        kind = "AMD GPU" if device.gfx else "GPU"
        lines.append(f"  {kind} {device.index}: {device.name}{arch}: {'ok' if device.ok else 'FAIL'} ({device.detail})")
    lines += _extras_text(probe)
    verdict = "PASS" if report.ok else "FAIL"
    subject = f"{report.framework} {report.version}" if probe.imported else (report.framework or "the environment")
    if report.on_target:
        lines.append(f"{verdict}: {subject} {'works' if report.ok else 'does not work'} on this machine.")
    else:
        lines.append(f"{verdict}: {subject} {'fits' if report.ok else 'does not fit'} that machine.")
    failing = [f for f in report.diagnosis if f.failed]
    notes = [f for f in report.diagnosis if not f.failed]
    if failing:
        lines.append("Why:")
        for finding in failing:
            lines.append(f"  - {finding.cause}")
            lines.append(f"    {finding.advice}")
    if notes:
        lines.append("Notes:")
        for finding in notes:
            lines.append(f"  - {finding.cause}. {finding.advice}")
    step = report.next_step
    if step is not None:
        if step.others:
            lines.append("To get builds that fit, one environment per group of machines:")
            lines += [f"  {command}" for command in (step.command, *step.others)]
        else:
            lines.append(f"To get a build that fits: {step.command}")
    if probe.warnings:
        shown = probe.warnings[:_SHOWN_WARNINGS]
        more = len(probe.warnings) - len(shown)
        lines.append("Warnings the framework gave:" + (f" (and {more} more in --json)" if more else ""))
        lines += [f"  {_one_line(w)}" for w in shown]
    return "\n".join(lines)


def _checks_text(checks: tuple[Check, ...]) -> str:
    return ", ".join(f"{c.name} {'ok' if c.ok else 'FAILED'}" for c in checks)


def _extras_text(probe: ProbeResult) -> list[str]:
    lines = []
    for companion in probe.companions:
        name = f"{companion.name} {companion.version}" if companion.version else companion.name
        if not companion.imported:
            lines.append(f"  {name}: FAIL (cannot be imported)")
            continue
        where = {}
        for check in companion.checks:
            where.setdefault(f"{check.name} {'ok' if check.ok else 'FAILED'}", []).append(check.device)
        done = "; ".join(f"{what} on {', '.join(devices)}" for what, devices in where.items()) or "imported"
        lines.append(f"  {name}: {'ok' if companion.ok else 'FAIL'} ({done})")
    collective = probe.multi_gpu
    if collective is not None:
        what = f"{collective.method or 'all-reduce'} over {collective.world_size} GPUs"
        if collective.ok is None:
            lines.append(f"  Multi-GPU: skipped: {collective.skipped}")
        elif collective.ok:
            bandwidth = f", bus bandwidth {collective.busbw_gbs:g} GB/s" if collective.busbw_gbs is not None else ""
            lines.append(f"  Multi-GPU: {what} ok{bandwidth}")
        else:
            lines.append(f"  Multi-GPU: {what} FAILED")
    bench = probe.bench
    if bench is not None:
        if bench.ok is None:
            lines.append(f"  Bench: skipped: {bench.skipped}")
        for run in bench.runs:
            result = f"{run.tflops:g} TFLOP/s" if run.tflops is not None else "FAILED"
            precision = ", TF32" if run.dtype == "float32" and bench.tf32 else ""
            size = f" ({run.n}x{run.n} matmul{precision})" if run.n else ""
            lines.append(f"  Bench: GPU {run.index} {run.dtype}{size}: {result}")
    return lines


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:197] + "..."
