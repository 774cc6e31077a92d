"""From a probe's result to a verdict: PASS or FAIL, per device, and for every known failure a cause and a next step.

Pure functions: (ProbeResult, MachineProfile, expected build, manifest, tables) -> Report. The known failures are
the table of envkit.probe.rules (each with its cause, its advice and a matcher over envkit.probe.facts.Facts); this
module applies it and assembles the report.

PASS needs: the framework imported, its CPU computation right, every GPU that the build should drive visible to it
with its computations right, and no failing finding. A CPU build passes on a machine without GPUs, or when a CPU
build was what the environment was made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from envkit.catalog.model import Build, Manifest, Tables
from envkit.machines.profile import MachineProfile
from envkit.probe.builds import FleetTarget, NextStep, installed_build, next_step, observed_profile
from envkit.probe.facts import Facts, cc_text, covers
from envkit.probe.matchers import driver_cuda_from
from envkit.probe.result import Check, ProbeDevice, ProbeResult
from envkit.probe.rules import RULES, Rule

__all__ = ["DeviceVerdict", "Finding", "Report", "RULES", "covers", "diagnose", "driver_cuda_from"]


@dataclass(frozen=True)
class Finding:
    rule: str
    cause: str
    advice: str
    failed: bool = True  # False: it explains something (a skipped step, what was not checked) without failing


@dataclass(frozen=True)
class DeviceVerdict:
    index: Optional[int]
    name: str
    compute_capability: Optional[str]
    ok: bool
    detail: str
    gfx: Optional[str] = None  # an AMD GPU's target


@dataclass(frozen=True)
class Report:
    ok: bool
    framework: Optional[str]
    version: Optional[str]
    cuda: Optional[str]  # the CUDA the build targets; None for a CPU build
    devices: tuple[DeviceVerdict, ...]
    diagnosis: tuple[Finding, ...]
    probe: ProbeResult
    machine: MachineProfile  # the machine judged against, with what the probe learnt about it
    on_target: bool  # whether the probe ran on that machine
    installed_build: Optional[Build] = None  # the manifest build the environment holds, if it is one
    next_step: Optional[NextStep] = None  # the build that fits the machine, and how to make it



# --- the report ----------------------------------------------------------------------------------------------------

def diagnose(
    probe: ProbeResult,
    profile: MachineProfile,
    expected: Optional[Build] = None,
    *,
    manifest: Optional[Manifest] = None,
    tables: Optional[Tables] = None,
    on_target: bool = True,
    rules: Sequence[Rule] = RULES,
    machine_args: Sequence[str] = (),
    fleet: Optional[FleetTarget] = None,
) -> Report:
    """Judge a probe's result for a machine.

    ``expected``: the build the environment was made from (None: judge whatever is installed). ``manifest`` and
    ``tables``: where the build to use instead is resolved from (without them the advice names none).
    ``on_target``: whether the probe ran on the machine ``profile`` describes; when not, the GPUs are judged from
    the build's GPU code and CUDA only, and the report says that no GPU computation ran. ``machine_args``: the
    options that name that machine, for the command the advice gives (see :func:`next_step`).
    """
    driver_cuda = driver_cuda_from(probe)
    installed = installed_build(manifest, probe) if manifest is not None else None
    profile = observed_profile(profile, probe, driver_cuda, on_target, tables)
    # A build to advise must fit the whole machine, the GPUs CUDA_VISIBLE_DEVICES hides from this check included: a
    # CPU build for a machine that merely looks GPU-less here would be the wrong advice.
    planned = profile.whole()
    nxt = next_step(manifest, planned, tables, machine_args, fleet) if manifest is not None and tables is not None \
        else None
    facts = Facts(probe=probe, profile=profile, on_target=on_target, expected=expected, manifest=manifest,
                  tables=tables, installed=installed, driver_cuda=driver_cuda, next=nxt,
                  machine_args=tuple(machine_args))
    findings = _findings(facts, rules)
    devices = _devices(facts)
    ok = (
        probe.reported
        and probe.imported
        and probe.cpu_ok
        and all(d.ok for d in devices)
        and not any(finding.failed for finding in findings)
    )
    return Report(
        ok=ok, framework=probe.framework, version=probe.version, cuda=probe.cuda if probe.gpu_build else None,
        devices=devices, diagnosis=findings, probe=probe, machine=profile, on_target=on_target,
        installed_build=installed,
        next_step=nxt if not ok and _cured_by_a_build(findings, rules) and not _made_from(facts) else None,
    )


def _made_from(facts: Facts) -> bool:
    """Whether the build to advise is the one the environment was made from: advising it would be the very command
    that made what failed (its index served another build: a CUDA torch from PyPI where /whl/cpu was meant)."""
    nxt = facts.next
    return nxt is not None and facts.expected is not None and nxt.build.id == facts.expected.id and not nxt.others


def _cured_by_a_build(findings: Sequence[Finding], rules: Sequence[Rule]) -> bool:
    """Whether another build may cure a failed check: unless every failure found lies outside the build (GPUs hidden
    by CUDA_VISIBLE_DEVICES, a Slurm job given no GPU, a busy GPU, a failed all-reduce), where the build installed
    is the right one and advising another would send the user the wrong way."""
    outside = {rule.id for rule in rules if rule.outside_the_build}
    failing = [finding.rule for finding in findings if finding.failed]
    return not failing or any(rule not in outside for rule in failing)


def _findings(facts: Facts, rules: Sequence[Rule]) -> tuple[Finding, ...]:
    common = _common_fields(facts)
    fired: set[str] = set()
    out = []
    for rule in rules:
        if any(other in fired for other in rule.unless):
            continue
        for fields in rule.match(facts):
            values = {**common, **fields}
            out.append(Finding(rule.id, rule.cause.format(**values), rule.advice.format(**values), rule.failed))
            fired.add(rule.id)
    return tuple(out)


def _common_fields(facts: Facts) -> dict[str, Any]:
    probe = facts.probe
    return {
        "framework": facts.framework,
        "subject": f"{facts.framework} {probe.version}" if probe.version else facts.framework,
        "python": probe.python_executable,
        "create": _create_phrase(facts),
        # how another environment is named to each command that runs this check (none of them to all)
        "another_env": "`envkit doctor --python PATH`, `envkit verify --prefix DIR`, or activate it and run "
                       "`envkit doctor`",
    }


def _create_phrase(facts: Facts) -> str:
    if _made_from(facts):  # never the very command that made what failed
        assert facts.next is not None and facts.expected is not None
        build = facts.next.build.id
        if facts.installed is not None and facts.installed.id == facts.expected.id:
            return f"{build}, the build this environment was made from, is the one that fits: making it again " \
                   "would change nothing; the cause above is what to fix."
        installed = f"{facts.framework} {facts.probe.version}" if facts.probe.version else "what is installed"
        return (f"{build} fits, and this environment was made from it, but {installed} is not that build: the "
                "index it was installed from served another (a mirror in envkit's config?). Fix that index first; "
                "making it again as before would only install the same.")
    if facts.next is not None:
        machine = "this machine" if facts.on_target else "that machine"
        if facts.next.machines:  # advice for a fleet: the machines it is for are named
            from envkit.machines.fleet import names_text

            machine = names_text(facts.next.machines)
            machine = f"every machine ({machine})" if not facts.next.others else machine
        others = ("; for the others: " + ", ".join(f"`{command}`" for command in facts.next.others)
                  if facts.next.others else "")
        return f"{facts.next.build.id} fits {machine}: `{facts.next.command}`{others}."
    if facts.manifest is not None:
        import shlex

        machine = "this machine" if facts.on_target else "that machine"
        listing = shlex.join(["envkit", "list", facts.manifest.name, "--all", *facts.machine_args])
        return f"no build of the {facts.manifest.name} manifest fits {machine}: `{listing}` says why."
    framework = facts.probe.framework
    if framework:
        return f"there is no manifest for {framework} to pick a build from."
    import shlex

    machine = "this machine" if facts.on_target else "that machine"  # named by the options it was judged with
    return f"`{shlex.join(['envkit', 'list', *facts.machine_args])}` shows the builds that fit {machine}."


def _devices(facts: Facts) -> tuple[DeviceVerdict, ...]:
    probe = facts.probe
    if not probe.imported:
        return tuple(DeviceVerdict(g.index, g.name, cc_text(g.compute_capability), False, "not checked", g.gfx)
                     for g in facts.profile.gpus)
    if not facts.on_target:
        return _static_devices(facts)
    if probe.devices:
        return tuple(_seen_device(facts, d) for d in probe.devices)
    if not facts.gpus_wanted:
        return ()
    why = f"not visible to {facts.framework}" if facts.gpu_build else "not used by a CPU-only build"
    return tuple(DeviceVerdict(g.index, g.name, cc_text(g.compute_capability), False, why, g.gfx)
                 for g in facts.profile.gpus)


def _seen_device(facts: Facts, device: ProbeDevice) -> DeviceVerdict:
    """A device the probe checked; what the framework could not tell (MXNet names no GPU) comes from the profile,
    when the indices are the machine's own (CUDA_VISIBLE_DEVICES unset)."""
    name, capability = device.name, device.compute_capability
    gpus = {g.index: g for g in facts.profile.gpus}
    if (name is None or capability is None) and facts.env.get("CUDA_VISIBLE_DEVICES") is None \
            and device.index in gpus:
        name = name or gpus[device.index].name
        capability = capability or cc_text(gpus[device.index].compute_capability)
    return DeviceVerdict(device.index, name or f"GPU {device.index}", capability, device.ok,
                         _device_detail(device.checks), device.gfx)


def _static_devices(facts: Facts) -> tuple[DeviceVerdict, ...]:
    """Devices of a machine the probe did not run on: judged from the build's CUDA and GPU code."""
    gpus = facts.profile.gpus
    if not facts.gpu_build:
        unused = "not used by a CPU-only build"
        return tuple(DeviceVerdict(g.index, g.name, cc_text(g.compute_capability), False, unused, g.gfx)
                     for g in gpus) if facts.gpus_wanted else ()
    if facts.installed is not None and facts.tables is not None:
        from envkit.pick.resolve import assess

        candidate = assess(facts.installed, facts.profile, facts.tables)
        runs = candidate.compatible
        detail = ("the build can run on it: its CUDA and GPU code fit (a GPU of the machine described, not run from "
                  "here)" if runs else f"the build cannot run on it: {'; '.join(candidate.reasons)}")
        return tuple(DeviceVerdict(g.index, g.name, cc_text(g.compute_capability), runs, detail, g.gfx) for g in gpus)
    arch = tuple(facts.probe.arch_list)
    out = []
    for gpu in gpus:
        covered = covers(arch, cc_text(gpu.compute_capability), gpu.gfx)
        detail = {True: "the build has kernels for it", False: "the build has no kernels for it",
                  None: "unknown: the build did not report its GPU code"}[covered]
        out.append(DeviceVerdict(gpu.index, gpu.name, cc_text(gpu.compute_capability), covered is True, detail,
                                 gpu.gfx))
    return tuple(out)


def _device_detail(checks: Sequence[Check]) -> str:
    if not checks:
        return "no computation ran"
    return ", ".join(f"{c.name} {'ok' if c.ok else 'FAILED'}" for c in checks)
