"""The machines a command is for (this one, profiles, a partition of the site file, a fleet of them), the build that
fits them, and the options that chose them, as the commands envkit suggests repeat them."""

from typing import Any, NamedTuple, Optional

from envkit.commands.options import TargetOptions
from envkit.commands.places import current_site, user_dirs


def fleet_for(tables, target: TargetOptions):
    """The machines to resolve for (envkit.machines.fleet.Fleet): this one (detected), or the profiles and partition
    named, with the command-line overrides applied (to one machine only: they describe one)."""
    from envkit.machines.fleet import THIS_MACHINE, Fleet, Machine, fleet_of, load_profiles
    from envkit.machines.overrides import apply_overrides, parse_overrides

    overrides = parse_overrides(target.cuda, target.gpu_arch or ())
    if not target.elsewhere:
        from envkit.detect import detect_machine
        from envkit.detect.jetson import with_platform
        from envkit.detect.system import with_system

        import os
        from pathlib import Path

        from envkit.slurm.job_context import apply_job_context, job_context

        # The driver and GPUs, then the system they run on (its C library; a WSL2 driver said to be Windows'; its
        # platform, and on a Jetson its L4T release, board and JetPack).
        profile = with_system(detect_machine(tables.cuda, tables.gpu_names, timeout=target.timeout,
                                             amd_table=tables.amd), Path("/proc"))
        profile = with_platform(profile, tables.cuda, tables.gpu_names)
        # Inside a Slurm job (or with CUDA_VISIBLE_DEVICES set): only the GPUs the job was given count.
        profile = apply_overrides(apply_job_context(profile, job_context(os.environ)), overrides)
        return Fleet((Machine(name=profile.name or THIS_MACHINE, profile=profile),))
    machines = load_profiles(target.machine or (), user_dirs().cache)
    if target.partition is not None:
        machines += partition_machines(target.partition)
    fleet = fleet_of(machines)
    if target.cuda is not None or target.gpu_arch:
        if len(fleet.machines) != 1:
            from envkit.errors import BadInputError

            raise BadInputError("--cuda and --gpu-arch describe one machine, and these options name "
                                f"{len(fleet.machines)}", hint="Edit the profiles instead, or name one machine.")
        only = fleet.machines[0]
        fleet = Fleet((Machine(only.name, apply_overrides(only.profile, overrides), only.file),))
    return fleet


def recorded_target(record) -> Optional[TargetOptions]:
    """The options a record's target was named with (--machine, --partition, --cuda, --gpu-arch), as TargetOptions;
    None for the machine it was made on, or a target whose options envkit cannot read back."""
    from pathlib import Path

    options = record.target_options()
    if not options or len(options) % 2:
        return None
    values: dict[str, Any] = dict(machine=[], gpu_arch=[])
    for flag, value in zip(options[::2], options[1::2]):
        if flag in ("--machine", "--gpu-arch"):
            values[flag[2:].replace("-", "_")].append(Path(value) if flag == "--machine" else value)
        elif flag in ("--partition", "--cuda"):
            values[flag[2:]] = value
        else:
            return None
    return TargetOptions(**{key: value or None for key, value in values.items()})


def partition_machines(spec: str):
    """The machines of ``PARTITION[:NODE,...]`` in the site file (NODE: as `envkit site` names it, or its
    ``node:``)."""
    from envkit.machines.fleet import named
    from envkit.site import parse_partition_spec, partition_nodes

    name, wanted = parse_partition_spec(spec)
    return [named(profile, profile.name or name, nodes=count)
            for profile, count in partition_nodes(current_site(), name, wanted)]


def machine_for(tables, target: TargetOptions):
    """The one machine a command judges: this one, or the one profile named; a fleet of several is an error."""
    fleet = fleet_for(tables, target)
    if fleet.single is None:
        from envkit.errors import BadInputError

        raise BadInputError(f"this command judges one machine, and the options name {len(fleet.machines)}",
                            hint="Name one profile with --machine.")
    return fleet.single


def group_command(fleet, target: TargetOptions, manifest: str, group, python: Optional[str] = None,
                  command: str = "create") -> Optional[str]:
    """The `envkit create` (or ``command`` "lock": `envkit lock`) command for one group of a fleet, shell-quoted:
    one profile per distinct configuration of the group (--machine FILE), or its nodes of the partition
    (--partition NAME:NODE,...)."""
    import shlex

    from envkit.machines.fleet import distinct

    if group.selected is None:
        return None
    members = [m for m in fleet.machines if m.name in set(group.machines)]
    argv = ["envkit", command, manifest, "--build", group.selected.build.id]
    from envkit.state.records import name_for_machine

    name = name_for_machine(manifest, members[0].name)
    if command == "create":
        argv += ["--name", name]
    else:  # one lock per group, installed as the group's environment (envkit.lockfile.format.install_name)
        from envkit.lockfile.format import lock_file_name

        argv += ["-o", lock_file_name(name)]
    if python is not None:
        argv += ["--python", python]
    if command == "create" and not group.selected.build.is_gpu:
        argv.append("--cpu")  # no GPU build fits this group: say so, or create stops to ask
    nodes = []
    for config in distinct(members):
        with_file = next((m for m in config.machines if m.file), None)
        if with_file is not None:
            argv += ["--machine", with_file.file]
        else:
            nodes.extend(m.name for m in config.machines)
    if nodes and target.partition is not None:
        from envkit.site import parse_partition_spec

        argv += ["--partition", f"{parse_partition_spec(target.partition)[0]}:{','.join(nodes)}"]
    if target.manifests is not None:
        argv += ["--manifests", str(target.manifests)]
    return shlex.join(argv)


def target_argv(target: TargetOptions, absolute: bool = False, manifests: bool = True) -> list[str]:
    """The options that chose the machines (``absolute``: profile paths made absolute, for a record)."""
    argv: list[str] = []
    for machine in target.machine or ():
        argv += ["--machine", str(machine.absolute() if absolute else machine)]
    if target.partition is not None:
        argv += ["--partition", target.partition]
    if target.cuda is not None:
        argv += ["--cuda", target.cuda]
    for arch in target.gpu_arch or ():
        argv += ["--gpu-arch", arch]
    if manifests and target.manifests is not None:
        argv += ["--manifests", str(target.manifests)]
    return argv


def target_args(target: TargetOptions, python: Optional[str] = None) -> str:
    """The options that chose the machine (and the Python asked for), shell-quoted, for the next-step commands
    envkit prints."""
    import shlex

    return shlex.join(target_argv(target) + (["--python", python.strip()] if python is not None else []))


class TargetBuild(NamedTuple):
    """What `create` and `lock` plan with, from build_for_target."""

    profile: Any  # the MachineProfile to plan with
    build_id: Optional[str]  # the build to install (None: the plan picks it)
    gpu_unused: Optional[str]  # why the fleet's GPUs go unused by its build
    resolution: Any = None  # the profile's own Resolution when the fleet's resolution made it already, else None


def build_for_target(manifest, fleet, tables, request, build_id: Optional[str], target: TargetOptions,
                     python: Optional[str], command: str = "create") -> TargetBuild:
    """The profile to plan with, the build id to install, why the GPUs go unused, and the profile's resolution
    when it was made here, for `create` and `lock` (``command``: which of them asks, for the commands it suggests).
    The plan takes that resolution as it is: each manifest is resolved once for each configuration.

    One machine: its profile and the build asked for (the plan itself resolves and judges it). Several: the build
    that fits them all, planned on the GPU machine whose driver supports the lowest CUDA (the conda solve must hold
    there); a fleet with no common GPU build is refused with one command per group."""
    if fleet.single is not None:
        return TargetBuild(fleet.single, build_id, None)
    from envkit.create.prepare import DoesNotFit
    from envkit.errors import BadInputError
    from envkit.machines.fleet import names_text, size_text
    from envkit.pick.cpu_fallback import gpu_unused
    from envkit.pick.fleet_resolve import resolve_fleet
    from envkit.pick.render import list_command

    result = resolve_fleet(manifest, fleet, tables, request)
    same_machines = target_args(target, python)
    lowest = fleet.planning_profile()
    if build_id is not None:
        chosen = next((c for c in result.resolution.candidates if c.build.id == build_id), None)
        if chosen is not None and not chosen.compatible:
            raise DoesNotFit(f"{build_id} does not fit every machine: {'; '.join(chosen.reasons)}",
                             hint=f"`{list_command(manifest.name, same_machines, show_all=False)}` shows the builds "
                                  "that fit every machine.")
        return TargetBuild(lowest, build_id, None, result.resolution_for(lowest))  # (an unknown id: prepare says)
    commands = [group_command(fleet, target, manifest.name, group, python, command) for group in result.groups]
    if result.split and any(commands):  # (groups that no build fits, all of them: no build fits, below)
        made = "environment" if command == "create" else "lock"
        lines = [f"    {line}" if line else f"    (no build of {manifest.name} fits {names_text(group.machines)})"
                 for line, group in zip(commands, result.groups)]
        raise BadInputError(
            f"no GPU build of {manifest.name} fits all {size_text(fleet)}, so envkit makes no single "
            f"{made} for them: one per group",
            hint=("Create" if command == "create" else "Make") + " them with:\n" + "\n".join(lines))
    if result.selected is None:
        raise DoesNotFit(f"no build of {manifest.name} fits every machine of {names_text(fleet.names)}",
                         hint=f"`{list_command(manifest.name, same_machines)}` says why each one does not.")
    return TargetBuild(lowest, result.selected.build.id, gpu_unused(result.resolution, lowest),
                       result.resolution_for(lowest))


def target_words(target: TargetOptions, fleet) -> str:
    """What a lock (or an environment made from one) is for, in words: this machine, a partition, profiles."""
    from envkit.machines.fleet import THIS_MACHINE, names_text

    if target.on_target:
        return THIS_MACHINE
    if not target.elsewhere:  # this machine, as --cuda and --gpu-arch describe it
        return f"{THIS_MACHINE} with {target_args(target._replace(manifests=None))}"
    if target.partition is not None:
        return f"partition {target.partition}"
    return f"machines {names_text(fleet.names)}" if fleet.single is None else f"profile {fleet.names[0]}"
