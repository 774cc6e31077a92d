"""What this machine is and which builds fit it: ``envkit detect`` and ``envkit list``."""

from typing import Annotated, List, Optional

import typer

from envkit.commands.common import (machine_for, manifests_dir, print_json, reported_errors, target_args,
                                    user_dirs)
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
        from envkit.catalog import load_tables

        tables = load_tables(manifests_dir(manifests))
        profile = machine_for(tables, TargetOptions(manifests=manifests, timeout=timeout))
        if json_output:
            print_json(profile.to_dict())
        else:
            from envkit.render import profile_text

            typer.echo(profile_text(profile))


@with_options
def list_builds(
    names: Annotated[
        Optional[List[str]],
        typer.Argument(help="Manifests to show (torch, tensorflow, jax, mxnet, ...). Default: all.", show_default=False),
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

    Examples: `envkit list torch`, `envkit list --all --machine a100-node.yaml`, `envkit list tensorflow --cuda 11.2`.
    """
    with reported_errors():
        from envkit.catalog.cache import cached_catalog
        from envkit.resolve import parse_python_request, resolve

        catalog = cached_catalog(manifests_dir(target.manifests), names or (), user_dirs().cache)
        request = parse_python_request(python, catalog.tables.python)
        profile = machine_for(catalog.tables, target)
        resolutions = [resolve(m, profile, catalog.tables, request) for m in catalog.manifests.values()]
        if json_output:
            from envkit.render import listing_json

            print_json(listing_json(profile, resolutions))
        else:
            from envkit.render import listing_text

            typer.echo(listing_text(profile, resolutions, show_all, target_args(target)))


def register(app: typer.Typer) -> None:
    app.command()(detect)
    app.command("list")(list_builds)
