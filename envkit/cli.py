"""The envkit command line: parse options, call the library, render, exit with the right code.

Exit codes: 0 success, 1 the check or operation failed, 2 bad usage or bad input (a manifest, a profile, a name).
Errors are one sentence and a next step; ``--debug`` shows tracebacks. Imports stay lazy: ``envkit list`` is what
people run most, and its start-up time is measured by bench/list_startup.py.
"""

import contextlib
from pathlib import Path
from typing import Annotated, Iterator, List, Optional

import typer

app = typer.Typer(
    name="envkit",
    help=(
        "Deep-learning environments that really run on this machine's NVIDIA driver and GPUs.\n\n"
        "envkit detects the driver (the highest CUDA it supports) and every GPU's compute capability, and picks "
        "the newest PyTorch, TensorFlow, JAX or MXNet build from curated manifests that will run here.\n\n"
        "Start with `envkit detect`, then `envkit list torch --all`."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_debug = False


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", envvar="ENVKIT_DEBUG", help="Show tracebacks for errors.")
    ] = False,
    version: Annotated[bool, typer.Option("--version", help="Print envkit's version and exit.")] = False,
) -> None:
    global _debug
    _debug = debug
    if version:
        from envkit import __version__

        typer.echo(f"envkit {__version__}")
        raise typer.Exit(0)


@contextlib.contextmanager
def _reported_errors() -> Iterator[None]:
    """Turn envkit's errors into one clear message and its exit code; anything else is a bug, said plainly."""
    from envkit.errors import EnvkitError

    try:
        yield
    except EnvkitError as error:
        if _debug:  # the traceback, and still the exit code scripts rely on
            import traceback

            traceback.print_exc()
        typer.echo(f"envkit: error: {error.message}", err=True)
        if error.hint:
            typer.echo(f"  {error.hint}", err=True)
        raise typer.Exit(error.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("envkit: interrupted", err=True)
        raise typer.Exit(130) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as error:  # a bug in envkit: never a bare traceback unless asked for
        if _debug:
            raise
        typer.echo(f"envkit: internal error: {type(error).__name__}: {error}", err=True)
        typer.echo("  Rerun with --debug for the traceback, and report it.", err=True)
        raise typer.Exit(1) from None


# Options shared by every command that resolves builds.
ManifestsOption = Annotated[
    Optional[Path],
    typer.Option(
        "--manifests",
        envvar="ENVKIT_MANIFESTS",
        help="Read manifests from this directory instead of the shipped ones (try an edited copy of envs/).",
        show_default=False,
    ),
]
MachineOption = Annotated[
    Optional[Path],
    typer.Option(
        "--machine",
        help="Resolve for the machine described in this profile file (the output of `envkit detect --json` "
        "saved on another machine, or a Slurm partition's GPUs) instead of this one.",
        show_default=False,
    ),
]
CudaOption = Annotated[
    Optional[str],
    typer.Option("--cuda", metavar="X.Y", help="Take X.Y as the highest CUDA the driver supports.", show_default=False),
]
GpuArchOption = Annotated[
    Optional[List[str]],
    typer.Option(
        "--gpu-arch",
        metavar="X.Y",
        help="Take the machine's GPUs to be one GPU per value, of this compute capability (e.g. --gpu-arch 7.0 "
        "--gpu-arch 8.0 for a V100 and an A100). Repeatable.",
        show_default=False,
    ),
]
PythonOption = Annotated[
    Optional[str],
    typer.Option("--python", metavar="X.Y", help="Only builds that publish this Python version.", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
def _probe_timeout(value: float) -> float:
    import math

    if not math.isfinite(value) or not 0.1 <= value <= 600:
        raise typer.BadParameter("give seconds between 0.1 and 600")
    return value


TimeoutOption = Annotated[
    float,
    typer.Option("--timeout", callback=_probe_timeout, help="Seconds each hardware probe may take before it is cut off."),
]


def _manifests_dir(manifests: Optional[Path]) -> Path:
    from envkit.catalog import default_manifests_dir

    if manifests is None:
        return default_manifests_dir()
    if not str(manifests).strip() or manifests == Path(""):
        from envkit.errors import BadInputError

        raise BadInputError("--manifests (or ENVKIT_MANIFESTS) is empty: give a manifests directory")
    return manifests


def _machine(tables, machine: Optional[Path], cuda: Optional[str], gpu_archs: Optional[List[str]], timeout: float):
    """This machine (detected) or the one in a profile file, with the command-line overrides applied."""
    from envkit.machine import apply_overrides, parse_overrides, read_profile

    overrides = parse_overrides(cuda, gpu_archs or ())
    if machine is not None:
        profile = read_profile(machine)
    else:
        from envkit.detect import detect_machine

        profile = detect_machine(tables.cuda, tables.gpu_names, timeout=timeout)
    return apply_overrides(profile, overrides)


def _print_json(data: object) -> None:
    import json

    typer.echo(json.dumps(data, indent=2))


@app.command()
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
    with _reported_errors():
        from envkit.catalog import load_tables

        tables = load_tables(_manifests_dir(manifests))
        profile = _machine(tables, None, None, None, timeout)
        if json_output:
            _print_json(profile.to_dict())
        else:
            from envkit.render import profile_text

            typer.echo(profile_text(profile))


@app.command("list")
def list_builds(
    names: Annotated[
        Optional[List[str]],
        typer.Argument(help="Manifests to show (torch, tensorflow, jax, mxnet, ...). Default: all.", show_default=False),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also show the builds that do not fit, with the reasons why.")
    ] = False,
    json_output: JsonOption = False,
    machine: MachineOption = None,
    cuda: CudaOption = None,
    gpu_arch: GpuArchOption = None,
    python: PythonOption = None,
    manifests: ManifestsOption = None,
    timeout: TimeoutOption = 10.0,
) -> None:
    """Show the builds that fit this machine, the one envkit would pick (*), and with --all why the others don't.

    A GPU build fits when the driver supports its CUDA (natively, or through CUDA minor-version compatibility),
    it has kernels for EVERY GPU in the machine, and it publishes a Python envkit can provide.

    Examples: `envkit list torch`, `envkit list --all --machine a100-node.yaml`, `envkit list tensorflow --cuda 11.2`.
    """
    with _reported_errors():
        from envkit.catalog import load_catalog
        from envkit.resolve import parse_python_request, resolve

        catalog = load_catalog(_manifests_dir(manifests), names or ())
        request = parse_python_request(python, catalog.tables.python)
        profile = _machine(catalog.tables, machine, cuda, gpu_arch, timeout)
        resolutions = [resolve(m, profile, catalog.tables, request) for m in catalog.manifests.values()]
        if json_output:
            from envkit.render import listing_json

            _print_json(listing_json(profile, resolutions))
        else:
            from envkit.render import listing_text

            typer.echo(listing_text(profile, resolutions, show_all))


def main() -> None:
    app(prog_name="envkit")
