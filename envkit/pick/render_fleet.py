"""``envkit list`` for a fleet (several machines, a directory of profiles, a partition): text and JSON. Pure.

One machine renders exactly as envkit.pick.render does, with ``"machines"`` added to the JSON. Several add: the distinct
configurations and the machines sharing each, per build the machines it does not fit (``"fails_on"``), and, when no
GPU build fits every GPU machine, the groups with the build for each (``"groups"``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from envkit.machines.fleet import Fleet, fleet_json, names_text
from envkit.machines.profile import MachineProfile
from envkit.pick.fleet_resolve import FleetResolution
from envkit.pick.render import gpu_unused_json, listing_json, listing_text, machine_line, manifest_block
from envkit.text.words import counted

# A group's create command: (manifest name, group) -> the command line, shell-quoted; supplied by the CLI.
GroupCommand = Callable[[str, Any], Optional[str]]


def fleet_header(fleet: Fleet) -> str:
    """The machines and their distinct configurations. Where a site file entry stands for several nodes (its
    ``count``), the nodes are counted, as `envkit site` counts them: "Machines: 24 nodes", "a100-01 (12 nodes)"."""
    configs = fleet.configs()
    by_node = fleet.counts_nodes
    lines = [f"Machines: {counted(fleet.node_count, 'node') if by_node else len(fleet.machines)} "
             f"({counted(len(configs), 'distinct configuration')})"]
    for config in configs:
        line = machine_line(config.profile).removeprefix("Machine: ").removeprefix(f"{config.profile.name}: ")
        nodes = f" ({counted(config.node_count, 'node')})" if by_node else ""
        lines.append(f"  {names_text(config.names)}{nodes}: {line}")
    return "\n".join(lines)


def fleet_listing_text(fleet: Fleet, results: Sequence[FleetResolution], show_all: bool, target_args: str = "",
                       group_command: Optional[GroupCommand] = None) -> str:
    single = fleet.single
    if single is not None:
        return listing_text(single, [r.resolution for r in results], show_all, target_args)
    blocks = [fleet_header(fleet)]
    for result in results:
        block = manifest_block(result.resolution, _warned(fleet, result), show_all, target_args,
                               where=_nowhere(result) or "every machine")
        blocks.append("\n".join([block, *_fleet_lines(result, group_command)]))
    return "\n\n".join(blocks)


def _fleet_lines(result: FleetResolution, group_command: Optional[GroupCommand]) -> list[str]:
    lines = []
    if result.cpu_only:
        lines.append(f"  No GPU on {names_text(result.cpu_only)}: not judged for GPU builds (an environment for "
                     "the GPU machines runs there on the CPU only).")
    if result.groups and not _nowhere(result):
        if result.platforms:
            lines.append(f"  The machines are of {len(result.platforms)} platforms ({', '.join(result.platforms)}), "
                         "and one environment's packages are for one: one environment per group:")
        else:
            lines.append(f"  No GPU build of {result.manifest.name} fits every machine; one environment per group:")
        for group in result.groups:
            build = group.selected.build.id if group.selected else "no build fits"
            lines.append(f"    {build}: {names_text(group.machines, most=8)}")
            command = group_command(result.manifest.name, group) if group_command else None
            if command:
                lines.append(f"      {command}")
    return lines


def _nowhere(result: FleetResolution) -> str:
    """The machines no build fits any of, in words, when no group has a build; else "" (and the groups are shown)."""
    if not result.groups or any(group.selected for group in result.groups):
        return ""
    return "any of the GPU machines" if result.cpu_only else "any of the machines"


def fleet_listing_json(fleet: Fleet, results: Sequence[FleetResolution]) -> dict[str, Any]:
    profile = fleet.single or MachineProfile()
    data = listing_json(profile, [r.resolution for r in results])
    if fleet.single is None:
        del data["machine"]
    data["machines"] = fleet_json(fleet)
    for manifest, result in zip(data["manifests"], results):
        manifest["cpu_only"] = list(result.cpu_only)
        manifest["groups"] = [
            {"machines": list(g.machines), "selected": g.selected.build.id if g.selected else None}
            for g in result.groups
        ]
        for build in manifest["builds"]:
            build["fails_on"] = list(result.fails_on.get(build["id"], ()))
        if fleet.single is None:
            manifest["gpu_unused"] = gpu_unused_json(result.resolution, _warned(fleet, result))
    return data


def _warned(fleet: Fleet, result: FleetResolution) -> MachineProfile:
    """The machine whose facts a warning about unused GPUs names: for a fleet, the one an environment for all is
    planned on (its driver's CUDA the lowest), when one environment is what the fleet gets; when it is split, the
    groups say it, and no machine is named."""
    return MachineProfile() if result.split else fleet.planning_profile()
