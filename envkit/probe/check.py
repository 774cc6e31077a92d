"""One environment checked: run the probe with its Python, judge the result for the machine. Used by doctor, verify
and create."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from envkit.catalog.model import Build, Manifest, Tables
from envkit.machines.profile import MachineProfile
from envkit.probe.builds import FleetTarget
from envkit.probe.diagnose import Report, diagnose
from envkit.probe.runner import ProbeOptions, run_probe


def check_environment(python: Path, options: ProbeOptions, profile: MachineProfile, environ: Mapping[str, str], *,
                      manifest_for: Callable[[Optional[str]], Optional[Manifest]], tables: Optional[Tables],
                      on_target: bool, expected: Optional[Build] = None) -> Report:
    """``manifest_for(framework)``: the manifest to pick a better build from, once the probe says which framework
    is installed (the requested one when it could not tell)."""
    [report] = check_against(python, options, [(profile, on_target)], environ, manifest_for=manifest_for,
                             tables=tables, expected=expected)
    return report


def check_against(python: Path, options: ProbeOptions, machines: Sequence[tuple[MachineProfile, bool]],
                  environ: Mapping[str, str], *, manifest_for: Callable[[Optional[str]], Optional[Manifest]],
                  tables: Optional[Tables], expected: Optional[Build] = None,
                  machine_args: Sequence[Sequence[str]] = (), fleet: Optional[FleetTarget] = None) -> list[Report]:
    """The probe run once, its result judged for each machine: (profile, whether the probe ran on it).
    ``machine_args``: per machine, the options that name it in the commands the advice gives (none: this one).
    ``fleet``: the machines the environment is for, when a machine judged stands for several (create's check of an
    environment for a fleet): its ``machine_args`` name them all, and the build advised must fit them all."""
    result = run_probe(python, options, environ)
    requested = options.framework if options.framework != "auto" else None
    manifest = manifest_for(result.framework or requested)
    args = list(machine_args) + [()] * (len(machines) - len(machine_args))
    return [diagnose(result, profile, expected, manifest=manifest, tables=tables, on_target=on_target,
                     machine_args=named, fleet=fleet)
            for (profile, on_target), named in zip(machines, args)]


def verify_summary(report: Report, others: Sequence[Report] = (), machines: Sequence[str] = ()) -> dict[str, Any]:
    """What an environment's record keeps of a check: of one report, or of one per machine configuration
    (``others``), and whether the probe ran on the machines judged (``on_target``: False means the GPU part was
    judged from the build's CUDA and GPU code, not run)."""
    reports = [report, *others]
    return {
        "ok": all(r.ok for r in reports),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "version": report.version,
        "causes": list(dict.fromkeys(f.cause for r in reports for f in r.diagnosis if f.failed)),
        "on_target": all(r.on_target for r in reports),
        "machines": list(machines),
    }
