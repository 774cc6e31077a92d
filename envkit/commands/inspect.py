"""What this machine is and which builds fit it: ``envkit detect`` and ``envkit list``."""

from typing import Annotated, List, NamedTuple, Optional

import typer

from envkit.commands import completion
from envkit.commands.output import (echo_report, json_text, keep_json_for_tests, print_json, reported_errors,
                                    stdout_is_terminal)
from envkit.commands.places import manifests_dir, user_dirs
from envkit.commands.targets import fleet_for, group_command, machine_for, target_args
from envkit.commands.options import (JsonOption, ManifestsOption, PythonOption, TargetOptions, TimeoutOption,
                                     with_options)


def detect(
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
    timeout: TimeoutOption = 10.0,
) -> None:
    """Show this machine's NVIDIA driver, the highest CUDA it supports and every GPU's compute capability.

    Each fact names the probe that gave it: NVML first, then /proc/driver/nvidia/version, then nvidia-smi.
    No NVIDIA driver is normal (a CPU-only machine): the profile then has no GPUs. Save the --json output to a
    file and pass it to --machine on another machine (a Slurm login node, say) to resolve for this one.
    """
    with reported_errors():
        from envkit.catalog.cache import machine_tables_on_use
        from envkit.catalog.layout import manifest_names

        directory = manifests_dir(manifests)
        manifest_names(directory)  # one that is not there is an error now, not when a table is first needed
        tables = machine_tables_on_use(directory, user_dirs().cache)
        profile = machine_for(tables, TargetOptions(manifests=manifests, timeout=timeout))
        if json_output:  # as list --json prints the machine it judged: with the GPUs CUDA_VISIBLE_DEVICES hides
            print_json(profile.seen_dict())
        else:
            from envkit.pick.render import profile_text

            typer.echo(profile_text(profile))


@with_options
def list_builds(
    names: Annotated[
        Optional[List[str]],
        typer.Argument(metavar="[MANIFEST]...", help="Manifests to show (torch, tensorflow, jax, mxnet, ...). "
                       "Default: all.", show_default=False, autocompletion=completion.manifest_names),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also show the builds that do not fit, with the reasons why.")
    ] = False,
    json_output: JsonOption = False,
    python: PythonOption = None,
    target: TargetOptions = TargetOptions(),
) -> None:
    """Show the builds that fit this machine, the one envkit would pick (*), and with --all why the others don't.

    A GPU build fits when the driver supports its CUDA (natively, or through CUDA minor-version compatibility),
    it has kernels for EVERY GPU in the machine, and it publishes a Python envkit can provide.

    For several machines (--machine repeated, a directory of profiles, --partition) a build fits only when it fits
    every machine; the builds that do not say on which machines and why. When no GPU build fits them all, the
    machines are split into the fewest groups, each with the newest GPU build that fits all of its machines, and
    the command that creates each group's environment.

    Examples: `envkit list torch`, `envkit list --all --machine a100-node.yaml`,
    `envkit list tensorflow --cuda 11.2 --gpu-arch 7.5`, `envkit list torch --machine lab-profiles/`,
    `envkit list torch --partition gpu-4-a100`.
    """
    with reported_errors():
        from envkit.catalog.cache import cached_answer, machine_tables_on_use
        from envkit.catalog.layout import check_names

        directory, cache = manifests_dir(target.manifests), user_dirs().cache
        available = check_names(directory, names or ())  # a mistyped name is said at once, before detection
        fleet = fleet_for(machine_tables_on_use(directory, cache), target)
        request = ListingRequest(tuple(names or ()), show_all, json_output, json_output and stdout_is_terminal(),
                                 python, target)

        def listing() -> str:
            from envkit.catalog.cache import cached_catalog

            return listing_of(request, fleet, cached_catalog(directory, request.names, cache))

        # The listing is a pure function of the catalog, the machines and the request: asked again with none of them
        # changed (the same manifests, driver and GPUs, options, and envkit), it is the answer kept in the cache.
        text = cached_answer(directory, request.names or available, cache, "listing", listing,
                             extra=(repr(fleet), repr(request)))
        if json_output:
            keep_json_for_tests(text)
            typer.echo(text)
        else:
            echo_report(text)


class ListingRequest(NamedTuple):
    """What `envkit list` was asked, besides the machines: all that listing_of reads of it."""

    names: tuple[str, ...]
    show_all: bool
    json_output: bool
    indented: bool  # JSON for a terminal
    python: Optional[str]
    target: TargetOptions


def listing_of(request: ListingRequest, fleet, catalog) -> str:
    """`envkit list`'s output for ``fleet`` from ``catalog`` (pure)."""
    from envkit.pick.fleet_resolve import resolve_fleet
    from envkit.pick.resolve import parse_python_request

    python, target = request.python, request.target
    parsed = parse_python_request(python, catalog.tables.python)
    results = [resolve_fleet(m, fleet, catalog.tables, parsed) for m in catalog.manifests.values()]
    warnings = _profile_warnings(fleet, catalog.tables)
    if request.json_output:
        from envkit.pick.render_fleet import fleet_listing_json

        data = fleet_listing_json(fleet, results)
        data["warnings"] = list(warnings)
        return json_text(data, request.indented)
    from envkit.pick.render_fleet import fleet_listing_text

    text = fleet_listing_text(fleet, results, request.show_all, target_args(target, python),
                              lambda name, group: group_command(fleet, target, name, group, python))
    if not warnings:
        return text
    head, _, rest = text.partition("\n\n")  # after the machines, before the first manifest
    return "\n".join([head, *(f"Warning: {warning}." for warning in warnings)]) + "\n\n" + rest


def _profile_warnings(fleet, tables) -> tuple[str, ...]:
    """What the machines' profiles claim that no driver does (a GPU on a branch past the last that drives it)."""
    from envkit.machines.fleet import names_text
    from envkit.pick.resolve import impossible_driver

    configs = fleet.configs()
    return tuple(warning if len(configs) == 1 else f"{names_text(config.names)}: {warning}"
                 for config in configs for warning in impossible_driver(config.profile, tables))


def register(app: typer.Typer) -> None:
    app.command()(detect)
    app.command("list")(list_builds)
