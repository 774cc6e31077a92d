"""The site file's partitions, their nodes and GPU configurations: ``envkit site``."""

from typing import Annotated, Any

import typer

from envkit.commands.output import print_json, reported_errors
from envkit.commands.places import current_site, manifests_dir, user_dirs
from envkit.commands.options import JsonOption, ManifestsOption


def site(
    builds: Annotated[bool, typer.Option(
        "--builds", help="Show, for every partition (and each of its node configurations), the build envkit would "
        "pick there from every manifest: what each partition can run, at a glance.")] = False,
    reasons: Annotated[bool, typer.Option(
        "--reasons", help="With --builds: say why a cell is a CPU build, empty or split.")] = False,
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
) -> None:
    """Show the site file: its partitions, their nodes and GPU configurations, and when each was surveyed.

    With --builds: one table, partitions down and manifests across, each cell the build `envkit create MANIFEST
    --partition P` would pick there (for a partition of several configurations, the build that fits them all, and
    each configuration's own pick below it). A CPU build is shown as CPU (build), a partition that needs one
    environment per group of nodes as split, and --reasons says why. Run it after `envkit survey` or after an edit of
    the manifests.

    The site file is $ENVKIT_SITE, else the `site:` key of envkit's config file, else site.yaml in envkit's config
    directory (~/.config/envkit/site.yaml). `envkit survey` writes it on a Slurm cluster; it can also be written
    by hand from saved `envkit detect --json` outputs (the README shows the format). `--partition NAME` on list,
    create, lock, verify, doctor and job then targets a partition's nodes.

    Exit codes: 0 shown (also when there is no site file), 2 the site file is broken.
    """
    with reported_errors():
        loaded = current_site()
        if builds:
            _show_builds(loaded, manifests, reasons, json_output)
            return
        if reasons:
            from envkit.errors import BadInputError

            raise BadInputError("--reasons goes with --builds", hint="envkit site --builds --reasons")
        if json_output:
            print_json(site_json(loaded))
        else:
            typer.echo(site_text(loaded))


def _show_builds(loaded, manifests, reasons: bool, json_output: bool) -> None:
    from envkit.catalog.cache import cached_catalog
    from envkit.machines.fleet import fleet_of
    from envkit.pick.site_builds import rows_json, rows_text, site_rows

    catalog = cached_catalog(manifests_dir(manifests), (), user_dirs().cache)
    partitions = [(entry["partition"].name, fleet_of(entry["machines"])) for entry in _partitions(loaded)
                  if entry["machines"]]
    rows = site_rows(partitions, list(catalog.manifests.values()), catalog.tables)
    if json_output:
        print_json({"site": str(loaded.path), "manifests": list(catalog.manifests), "partitions": rows_json(rows)})
    elif loaded.missing:
        typer.echo(site_text(loaded))
    elif not rows:
        typer.echo(f"Site file: {loaded.path}\nNo partition in it has nodes to judge.")
    else:
        typer.echo(f"Site file: {loaded.path}\n" + rows_text(rows, list(catalog.manifests), reasons))


def _partitions(loaded) -> list[dict[str, Any]]:
    from envkit.machines.fleet import distinct, named
    from envkit.site import machine_names

    out = []
    for partition in loaded.partitions.values():
        machines = [named(node.profile._replace(name=name), name, nodes=node.count)
                    for node, name in zip(partition.nodes, machine_names(partition))]
        out.append({
            "partition": partition,
            "machines": machines,
            "configs": [(c, c.node_count) for c in distinct(machines)],
        })
    return out


def site_json(loaded) -> dict[str, Any]:
    return {
        "site": str(loaded.path),
        "exists": not loaded.missing,
        "shared": str(loaded.shared) if loaded.shared is not None else None,
        "partitions": [
            {
                "name": entry["partition"].name,
                "surveyed": entry["partition"].surveyed,
                "nodes": [
                    {"name": machine.name, "node": node.node, "count": node.count, "members": list(node.members),
                     "profile_file": node.profile_file,
                     "profile": node.profile.to_dict()}
                    for machine, node in zip(entry["machines"], entry["partition"].nodes)
                ],
                "configurations": [
                    {"machines": list(config.names), "nodes": count,
                     "cuda_driver": str(config.profile.cuda_driver) if config.profile.cuda_driver else None,
                     "libc": config.profile.libc, "gpus": _gpus(config.profile)}
                    for config, count in entry["configs"]
                ],
                "unreachable": [{"node": n, "reason": r} for n, r in entry["partition"].unreachable],
                "error": entry["partition"].error,
            }
            for entry in _partitions(loaded)
        ],
    }


def _gpus(profile) -> str:
    if not profile.gpus:
        return "no GPU"
    counts: dict[str, int] = {}
    for gpu in profile.gpus:
        counts[gpu.description] = counts.get(gpu.description, 0) + 1
    return ", ".join(f"{n}x {key}" if n > 1 else key for key, n in counts.items())


def site_text(loaded) -> str:
    from envkit.machines.fleet import names_text
    from envkit.text.words import counted

    if loaded.missing:
        return (f"No site file at {loaded.path}.\n"
                "Run `envkit survey` on a Slurm login node, set $ENVKIT_SITE to the file your admin published, or "
                "write one by hand from saved `envkit detect --json` outputs (the README shows the format).")
    lines = [f"Site file: {loaded.path}"]
    if loaded.shared is not None:
        lines.append(f"Shared environments: {loaded.shared} (`envkit envs` lists them)")
    if not loaded.partitions:
        lines.append("No partitions in it.")
    for entry in _partitions(loaded):
        partition = entry["partition"]
        if partition.surveyed:
            when = f"surveyed {partition.surveyed}"
        else:  # survey writes a partition it could not survey with its error, and no time
            when = "not surveyed (the survey failed)" if partition.error else "not surveyed (written by hand)"
        configs = entry["configs"]
        lines.append("")
        lines.append(f"{partition.name}: {counted(partition.node_count, 'node')}, "
                     f"{counted(len(configs), 'configuration')}; {when}")
        for config, count in configs:
            driver = f"CUDA {config.profile.cuda_driver}" if config.profile.cuda_driver else "no NVIDIA driver"
            version = f"driver {config.profile.driver_version}, " if config.profile.driver_version else ""
            libc = f", {config.profile.libc}" if config.profile.libc else ""
            lines.append(f"  {names_text(config.names)} ({counted(count, 'node')}): {version}{driver}{libc}; "
                         f"{_gpus(config.profile)}")
            lines += [f"    note from {machine.name}: {note}" for machine in config.machines
                      for note in machine.profile.notes]  # what the node said about itself when surveyed
        for node, reason in partition.unreachable:
            lines.append(f"  unreachable: {node}: {reason}")
        if partition.error:
            lines.append(f"  error: {partition.error}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    app.command()(site)
