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


def _seconds_between(low: float, high: float):
    """A typer callback that takes a finite number of seconds in [low, high] (nan and inf are refused)."""

    def check(value: float) -> float:
        import math

        if not math.isfinite(value) or not low <= value <= high:
            raise typer.BadParameter(f"give seconds between {low:g} and {high:g}")
        return value

    return check


TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout", callback=_seconds_between(0.1, 600), help="Seconds each hardware probe may take before it is cut off."
    ),
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


# --- the post-install check: doctor and verify --------------------------------------------------------------------

FrameworkOption = Annotated[
    str,
    typer.Option(
        "--framework",
        metavar="NAME",
        help="The framework to check: torch, tensorflow, jax, mxnet, or auto (the first of those installed).",
    ),
]
ProbeTimeoutOption = Annotated[
    float,
    typer.Option(
        "--probe-timeout",
        callback=_seconds_between(1, 3600),
        help="Seconds the check may take (importing the framework, the computations) before it is stopped.",
    ),
]
MultiGpuOption = Annotated[
    bool,
    typer.Option(
        "--multi-gpu",
        help="Also run an NCCL all-reduce across all GPUs, one process per GPU, and report the bus bandwidth "
        "(torch only; needs at least 2 GPUs).",
    ),
]
BenchOption = Annotated[
    bool,
    typer.Option("--bench", help="Also time a matrix multiply on each GPU and report TFLOP/s (torch only)."),
]


def _command_exists(name: str) -> bool:
    return any((info.name or info.callback.__name__.replace("_", "-")) == name for info in app.registered_commands)


def _check_environment(
    python: Path,
    framework: str,
    machine: Optional[Path],
    cuda: Optional[str],
    gpu_arch: Optional[List[str]],
    manifests: Optional[Path],
    json_output: bool,
    multi_gpu: bool,
    bench: bool,
    timeout: float,
    probe_timeout: float,
) -> None:
    """Probe an environment's Python, judge the result for the machine, print the report, exit 0 (PASS) or 1."""
    import os

    from envkit.catalog import load_tables
    from envkit.probe.diagnose import diagnose
    from envkit.probe.runner import ProbeOptions, check_request, run_probe

    options = ProbeOptions(framework=framework, multi_gpu=multi_gpu, bench=bench, timeout=probe_timeout)
    check_request(python, options)
    directory = _manifests_dir(manifests)
    tables = load_tables(directory)
    profile = _machine(tables, machine, cuda, gpu_arch, timeout)  # bad input fails here, before the long part
    result = run_probe(python, options, os.environ)
    manifest = _framework_manifest(directory, tables, result.framework or (framework if framework != "auto" else None))
    on_target = machine is None and cuda is None and not gpu_arch
    report = diagnose(result, profile, manifest=manifest, tables=tables, on_target=on_target)
    create_available = _command_exists("create")
    if json_output:
        from envkit.probe.render import report_json

        _print_json(report_json(report, create_available))
    else:
        from envkit.probe.render import report_text

        typer.echo(report_text(report, create_available))
    raise typer.Exit(0 if report.ok else 1)


def _framework_manifest(directory: Path, tables, framework: Optional[str]):
    """The manifest named after the framework (torch.yaml for torch), if the manifests directory has one."""
    from envkit.catalog import manifest_names
    from envkit.catalog.load import SUFFIX, load_manifest

    if framework is None or framework not in manifest_names(directory):
        return None
    return load_manifest(directory / f"{framework}{SUFFIX}", tables)


@app.command()
def doctor(
    python: Annotated[
        Optional[Path],
        typer.Option(
            "--python",
            metavar="PATH",
            help="The Python of the environment to check. Default: the active one ($VIRTUAL_ENV, then "
            "$CONDA_PREFIX), else python3 on PATH.",
            show_default=False,
        ),
    ] = None,
    framework: FrameworkOption = "auto",
    json_output: JsonOption = False,
    machine: MachineOption = None,
    cuda: CudaOption = None,
    gpu_arch: GpuArchOption = None,
    manifests: ManifestsOption = None,
    multi_gpu: MultiGpuOption = False,
    bench: BenchOption = False,
    timeout: TimeoutOption = 10.0,
    probe_timeout: ProbeTimeoutOption = 300.0,
) -> None:
    """Check an environment envkit did not make: what is installed, whether it runs here, what to use instead.

    Runs a small probe with the environment's own Python: it imports the framework, lists its GPUs, and runs a
    matrix product and a convolution on the CPU and on EVERY GPU, comparing each GPU's result with the CPU's.
    Every known failure (driver too old, a CPU-only build, no kernels for a GPU, GPUs hidden by
    CUDA_VISIBLE_DEVICES or a Slurm job without GPUs, an import that fails, wrong results) gets a cause and a next
    step. With --machine, --cuda or --gpu-arch the build is judged for that machine, from its CUDA and GPU code: the
    computations still run here.

    Exit codes: 0 PASS, 1 FAIL, 2 bad input. Example: `envkit doctor --python ~/envs/dl/bin/python`.
    """
    with _reported_errors():
        import os

        from envkit.probe.runner import default_python, locate_python

        target = locate_python(python, os.environ) if python is not None else default_python(os.environ)
        _check_environment(target, framework, machine, cuda, gpu_arch, manifests, json_output, multi_gpu, bench,
                           timeout, probe_timeout)


@app.command()
def verify(
    prefix: Annotated[
        Path,
        typer.Option(
            "--prefix",
            metavar="PATH",
            help="The environment's directory (a conda prefix or a venv): checks PATH/bin/python.",
            show_default=False,
        ),
    ],
    framework: FrameworkOption = "auto",
    json_output: JsonOption = False,
    machine: MachineOption = None,
    cuda: CudaOption = None,
    gpu_arch: GpuArchOption = None,
    manifests: ManifestsOption = None,
    multi_gpu: MultiGpuOption = False,
    bench: BenchOption = False,
    timeout: TimeoutOption = 10.0,
    probe_timeout: ProbeTimeoutOption = 300.0,
) -> None:
    """Check the environment at --prefix: PASS only when every GPU ran the computations correctly.

    The same check as `envkit doctor --python PREFIX/bin/python`. Verifying an environment by name, against the
    build it was made from, needs the records of `envkit create`, which is not built yet; so is storing the result.

    Exit codes: 0 PASS, 1 FAIL, 2 bad input.
    """
    with _reported_errors():
        from envkit.errors import BadInputError

        python = prefix / "bin" / "python"
        if not python.exists():
            raise BadInputError(f"--prefix {prefix}: no environment there ({python} does not exist)",
                                hint="Give the directory of a conda environment or a venv.")
        _check_environment(python, framework, machine, cuda, gpu_arch, manifests, json_output, multi_gpu, bench,
                           timeout, probe_timeout)


def main() -> None:
    app(prog_name="envkit")
