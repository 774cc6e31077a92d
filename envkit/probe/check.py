"""One environment checked: run the probe with its Python, judge the result for the machine. Used by doctor, verify
and create."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from envkit.catalog.model import Build, Manifest, Tables
from envkit.machine import MachineProfile
from envkit.probe.diagnose import Report, diagnose
from envkit.probe.runner import ProbeOptions, run_probe


def check_environment(python: Path, options: ProbeOptions, profile: MachineProfile, environ: Mapping[str, str], *,
                      manifest_for: Callable[[Optional[str]], Optional[Manifest]], tables: Optional[Tables],
                      on_target: bool, expected: Optional[Build] = None) -> Report:
    """``manifest_for(framework)``: the manifest to pick a better build from, once the probe says which framework
    is installed (the requested one when it could not tell)."""
    result = run_probe(python, options, environ)
    requested = options.framework if options.framework != "auto" else None
    manifest = manifest_for(result.framework or requested)
    return diagnose(result, profile, expected, manifest=manifest, tables=tables, on_target=on_target)


def verify_summary(report: Report) -> dict[str, Any]:
    """What an environment's record keeps of a check."""
    return {
        "ok": report.ok,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "version": report.version,
        "causes": [finding.cause for finding in report.diagnosis if finding.failed],
    }
