"""The plan and the result of `envkit create`, as text and as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envkit.backends.base import python_of
from envkit.backends.installers import pip_command, pip_environ
from envkit.create.prepare import Prepared
from envkit.pick.render import machine_line
from envkit.text.redact import redact

if TYPE_CHECKING:
    from envkit.create.execute import Outcome
    from envkit.probe.diagnose import Report


def plan_commands(prepared: Prepared) -> list[str]:
    """Every command the run will execute, in order, as a user could type them."""
    from envkit.backends.base import command_text
    from envkit.create.jupyter import install_argv

    plan, context = prepared.plan, prepared.context
    python = python_of(plan.prefix)
    out = list(prepared.backend.describe(plan, context))
    for step in plan.pip:  # (credentials go in the installer's environment: shown so, and masked by plan_text)
        variables = [f"{name}={value}" for name, value in pip_environ(step, context.tools.uv, plan.python).items()]
        out.append(command_text([*variables, *pip_command(step, python, context.tools.uv, plan.python)]))
    if plan.jupyter:
        out.append(command_text(install_argv(python, plan.name)))
    return out


def plan_text(prepared: Prepared, on_node: str = "") -> str:
    """The plan; ``on_node``: where --verify-on-node checks it once made (``a node of P``, ``node N of P``)."""
    plan = prepared.plan
    build = plan.build
    lines = [f"Warning:     {plan.gpu_unused}."] if plan.gpu_unused else []
    lines += [
        *_target_lines(plan),
        f"Build:       {build.id} ({plan.manifest} {build.version}, {build.variant}"
        + (f", CUDA {build.cuda})" if build.cuda else ", CPU only)"),
        f"Environment: {plan.name} at {plan.prefix}",
        f"Python:      {plan.python}",
        f"Backend:     {plan.backend}: {plan.backend_reason}",
    ]
    if plan.conda is not None:
        lines.append(f"Conda:       {' '.join(plan.conda.specs)}")
        lines.append(f"  channels:  {', '.join(plan.conda.channels)} (no others)")
        cuda = plan.conda.cuda or "none (a CPU-only solve)"
        lines.append(f"  __cuda:    {cuda} ({plan.conda.cuda_source})")
    for step in plan.pip:
        lines.append(f"Pip:         {' '.join(step.packages)}  ({step.purpose})")
        if step.requirements is not None and "://" not in step.index_url:  # a lock's files, fetched by envkit
            lines.append(f"  files:     {step.index_url}, in {step.find_links} (no index)")
            continue
        lines.append(f"  index:     {step.index_url} (the only index)")
        if step.constraints:
            lines.append(f"  held:      the build, as installed by the step before ({step.constraints[0]})")
        if step.find_links:
            lines.append(f"  links:     {step.find_links} (a page of wheel links, searched as well)")
    if prepared.storage is not None:
        from envkit.create.storage import storage_lines

        lines += storage_lines(prepared.storage)
    lines.append("Commands:")
    lines += [f"  {command}" for command in plan_commands(prepared)]
    here = ("yes, on this machine" if plan.on_target else
            "yes, here (without the target's GPUs: whether they are covered is judged from the build's CUDA and GPU "
            "code in the manifest)")
    check = here if plan.verify else f"no ({plan.unchecked})"
    if on_node:
        node = f"on {on_node} through srun, with its own GPUs (--verify-on-node)"
        check = f"{here}; then {node}" if plan.verify else f"{node}; not here ({plan.unchecked})"
    lines.append(f"Check:       {check}")
    return redact("\n".join(lines))  # a mirror's password, in the index URLs and commands, is never shown


def _target_lines(plan) -> list[str]:
    machines = (plan.target or {}).get("machines") or []
    line = machine_line(plan.profile).removeprefix("Machine: ")
    if len(machines) <= 1:
        return [f"Machine:     {line}"]
    from envkit.machines.fleet import names_text
    from envkit.text.words import counted

    nodes = (plan.target or {}).get("nodes")  # a site file entry standing for several nodes counts them all
    count = counted(nodes, "node") if isinstance(nodes, int) and nodes > len(machines) else len(machines)
    return [f"Machines:    {count}: {names_text(machines, most=6)} (the build fits every one)",
            f"  solve for: {line} (the lowest driver CUDA among them)"]


def plan_json(prepared: Prepared) -> dict[str, Any]:
    plan = prepared.plan
    return {
        "name": plan.name,
        "prefix": str(plan.prefix),
        "manifest": plan.manifest,
        "build": plan.build.id,
        "python": str(plan.python),
        "backend": plan.backend,
        "backend_reason": plan.backend_reason,
        "conda": None if plan.conda is None else {
            "channels": list(plan.conda.channels), "specs": list(plan.conda.specs), "cuda": plan.conda.cuda},
        "pip": [{"purpose": s.purpose, "packages": list(s.packages), "index_url": s.index_url,
                 "find_links": s.find_links} for s in plan.pip],
        "commands": plan_commands(prepared),
        "jupyter": plan.jupyter,
        "verify": plan.verify,
        "machine": plan.profile.seen_dict(),
        "target": plan.target,
        "gpu_unused": None if plan.gpu_unused is None else {"reason": plan.gpu_unused},
        "storage": _storage_json(prepared),
    }


def _storage_json(prepared: Prepared) -> Any:
    if prepared.storage is None:
        return None
    from envkit.create.storage import storage_json

    return storage_json(prepared.storage)


def outcome_json(prepared: Prepared, outcome: "Outcome") -> dict[str, Any]:
    from envkit.probe.render import report_json

    report = report_json(outcome.report) if outcome.report is not None else None
    return {"plan": plan_json(prepared), "record": outcome.record.to_dict() if outcome.kept else None,
            "verify": report, "replaced": outcome.replaced}


def report_only_json(prepared: Prepared, report: "Report") -> dict[str, Any]:
    """outcome_json of a run that made nothing it kept (--force whose new environment failed its check)."""
    from envkit.probe.render import report_json

    return {"plan": plan_json(prepared), "record": None, "verify": report_json(report), "replaced": None}




def outcome_text(prepared: Prepared, outcome: "Outcome") -> str:
    """The check's report, then what was made and how to use it, each next step a command that works as printed
    (a shared environment's by its site:NAME)."""
    from envkit.shared.layout import shown_name
    from envkit.shared.store import is_shared
    from envkit.system.activation import activation_hint

    plan, record = prepared.plan, outcome.record
    shared = is_shared(record)
    name = shown_name(record.name) if shared else plan.name
    lines = []
    if outcome.report is not None:
        from envkit.probe.render import report_text

        lines.append(report_text(outcome.report))
    if not outcome.kept:
        return "\n".join(lines)
    if outcome.report is None:
        lines.append(f"Not checked ({plan.unchecked}): run `envkit verify {name}` to check it.")
    if outcome.replaced:
        lines.append(f"Replaced the environment that was at {outcome.replaced}.")
    tool = prepared.context.tools.conda
    hint = activation_hint(plan.prefix, record.kind, name, plan.in_conda_envs, tool.kind if tool else None)
    if shared:
        lines += [f"Published {name} at {plan.prefix}.", f"  Load it:      module load envkit/{record.name}",
                  f"  Activate it:  {hint}"]
    else:
        lines += [f"Created {name} at {plan.prefix}.", f"  Activate it:  {hint}"]
    lines.append(f"  Or run in it: envkit run {name} -- python your_script.py")
    partition = record.target_partition()
    if partition is not None:  # made for a partition from its login node: its nodes are reached through Slurm
        import shlex

        from envkit.site import parse_partition_spec

        partition_name, _ = parse_partition_spec(partition)  # `envkit job` takes the partition, not its nodes
        lines += [f"  Check a node: {shlex.join(['envkit', 'verify', name, '--partition', partition])}",
                  "  Or as a job:  " + shlex.join(["envkit", "job", name, "-p", partition_name, "--", "python",
                                                   "your_script.py"])]
    if record.kernel:
        lines.append(f"  Jupyter:      the kernel {record.kernel!r} ({plan.name} (envkit))")
    return "\n".join(lines)
