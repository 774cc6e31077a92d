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


def _print_version(value: bool) -> None:
    if value:
        from envkit import __version__

        typer.echo(f"envkit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", envvar="ENVKIT_DEBUG", help="Show tracebacks for errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print envkit's version and exit."),
    ] = False,
) -> None:
    global _debug
    _debug = debug


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
        for line in getattr(error, "tail", ()):  # an installer's last lines, where it failed
            typer.echo(f"  | {line}", err=True)
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
        profile = read_profile(machine, _dirs().cache)
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
        from envkit.catalog.cache import cached_catalog
        from envkit.resolve import parse_python_request, resolve

        catalog = cached_catalog(_manifests_dir(manifests), names or (), _dirs().cache)
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
        help="Also run a real all-reduce across all GPUs, check its sum and report the bus bandwidth (torch: NCCL, "
        "one process per GPU; TensorFlow: a MirroredStrategy all-reduce; JAX: a psum under pmap). Needs at least "
        "2 GPUs; not built for MXNet.",
    ),
]
BenchOption = Annotated[
    bool,
    typer.Option("--bench", help="Also time a matrix multiply on each GPU and report TFLOP/s in float32 and float16 "
                 "(torch, TensorFlow and JAX; not MXNet)."),
]


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
    expected=None,
    environ=None,
):
    """Probe an environment's Python, judge the result for the machine, print the report; returns the report."""
    import os

    from envkit.catalog import load_tables
    from envkit.probe.check import check_environment
    from envkit.probe.runner import ProbeOptions, check_request

    options = ProbeOptions(framework=framework, multi_gpu=multi_gpu, bench=bench, timeout=probe_timeout)
    check_request(python, options)
    directory = _manifests_dir(manifests)
    tables = load_tables(directory)
    profile = _machine(tables, machine, cuda, gpu_arch, timeout)  # bad input fails here, before the long part
    on_target = _on_target(machine, cuda, gpu_arch)
    report = check_environment(python, options, profile, environ or os.environ, tables=tables, on_target=on_target,
                               manifest_for=lambda name: _framework_manifest(directory, tables, name),
                               expected=expected)
    _print_report(report, json_output)
    return report


def _print_report(report, json_output: bool) -> None:
    if json_output:
        from envkit.probe.render import report_json

        _print_json(report_json(report))
    else:
        from envkit.probe.render import report_text

        typer.echo(report_text(report))


def _on_target(machine: Optional[Path], cuda: Optional[str], gpu_arch: Optional[List[str]]) -> bool:
    """Whether the machine judged against is this one (no profile file, no overrides)."""
    return machine is None and cuda is None and not gpu_arch


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
        report = _check_environment(target, framework, machine, cuda, gpu_arch, manifests, json_output, multi_gpu,
                                    bench, timeout, probe_timeout)
        raise typer.Exit(0 if report.ok else 1)


EnvArgument = Annotated[
    Optional[str],
    typer.Argument(metavar="ENV", help="An environment envkit made (`envkit envs` lists them).", show_default=False),
]


@app.command()
def verify(
    env: EnvArgument = None,
    prefix: Annotated[
        Optional[Path],
        typer.Option(
            "--prefix",
            metavar="PATH",
            help="Check the environment in this directory (a conda prefix or a venv) instead: PATH/bin/python.",
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
    """Check an environment: PASS only when every GPU the build should drive ran the computations correctly.

    By name (ENV), the environment is judged against the build `envkit create` made it from, and the result is
    stored in its record (`envkit envs` shows it). With --prefix, any environment directory is checked, as
    `envkit doctor --python PREFIX/bin/python` would.

    Exit codes: 0 PASS, 1 FAIL, 2 bad input. Example: `envkit verify torch-cu126`.
    """
    with _reported_errors():
        import os

        from envkit.errors import BadInputError

        if (env is None) == (prefix is None):
            raise BadInputError("give an environment name or --prefix PATH (one of them)",
                                hint="`envkit envs` lists the environments envkit made.")
        record = None
        expected = None
        if env is not None:
            record = _record(env)
            prefix = Path(record.prefix)
            recorded_framework, expected = _recorded_build(record, manifests)
            if framework == "auto" and recorded_framework is not None:
                framework = recorded_framework
        assert prefix is not None
        from envkit.backends.base import python_of

        python = python_of(prefix)
        if not python.exists():
            raise BadInputError(f"no environment at {prefix} ({python} does not exist)",
                                hint="Give the directory of a conda environment or a venv.")
        environ = None
        if record is not None:  # as `envkit run` would run it: the environment activated
            from envkit.activation import activated_environ

            environ = activated_environ(prefix, record.kind, record.name, os.environ)
        report = _check_environment(python, framework, machine, cuda, gpu_arch, manifests, json_output, multi_gpu,
                                    bench, timeout, probe_timeout, expected=expected, environ=environ)
        if record is not None and _on_target(machine, cuda, gpu_arch):
            _store_verify(record, report)
        raise typer.Exit(0 if report.ok else 1)


def _store_verify(record, report) -> None:
    """Into the record, unless the environment was replaced while the check ran (then it judged the old one)."""
    from envkit import records
    from envkit.create.lock import name_lock
    from envkit.probe.check import verify_summary

    dirs = _dirs()
    with name_lock(dirs.locks, record.name):
        current = records.load(dirs.records, record.name)
        if current is not None and current.created == record.created and current.prefix == record.prefix:
            records.save(records.with_verify(current, verify_summary(report)), dirs.records)


def _dirs():
    import os

    from envkit.userdirs import user_dirs

    return user_dirs(os.environ)


def _record(name: str):
    """The record of an environment envkit made, or exit 2 naming the ones that exist."""
    from envkit import records
    from envkit.errors import UnknownNameError

    dirs = _dirs()
    record = records.load(dirs.records, name) if _plain_name(name) else None
    if record is None:
        known = [r.name for r in records.load_all(dirs.records)]
        raise UnknownNameError(
            f"envkit made no environment named {name!r}",
            hint=f"Its environments: {', '.join(known)}." if known else "It has made none yet: `envkit create torch`.",
        )
    return record


def _plain_name(name: str) -> bool:
    from envkit.errors import BadInputError
    from envkit.records import check_name

    try:
        check_name(name)
    except BadInputError:
        return False
    return True


def _recorded_build(record, manifests: Optional[Path]):
    """(the framework, the build) a recorded environment was made from, if its manifest still has them."""
    from envkit.catalog import load_tables, manifest_names
    from envkit.catalog.load import SUFFIX, load_manifest

    directory = _manifests_dir(manifests)
    if record.manifest not in manifest_names(directory):
        return None, None
    manifest = load_manifest(directory / f"{record.manifest}{SUFFIX}", load_tables(directory))
    return manifest.framework, next((b for b in manifest.builds if b.id == record.build), None)


# --- making environments: create, envs, remove, run -----------------------------------------------------------------

@app.command()
def create(
    manifest: Annotated[
        str, typer.Argument(metavar="MANIFEST", help="What to install: torch, tensorflow, jax, mxnet (`envkit list`).")
    ],
    name: Annotated[
        Optional[str],
        typer.Option("--name", "-n", metavar="ENV", help="The environment's name. Default: the manifest and the "
                     "variant, e.g. torch-cu126.", show_default=False),
    ] = None,
    build: Annotated[
        Optional[str],
        typer.Option("--build", metavar="ID", help="Install this build (an id from `envkit list MANIFEST`) instead "
                     "of the newest one that fits.", show_default=False),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option("--python", metavar="X.Y", help="The environment's Python. Default: python.yaml's default, or "
                     "the closest the build publishes.", show_default=False),
    ] = None,
    backend: Annotated[
        str,
        typer.Option("--backend", metavar="auto|conda|rattler|venv",
                     help="conda: your conda, mamba or micromamba. rattler: envkit's embedded conda engine (no "
                     "conda needed; brings old Pythons, cudatoolkit). venv: a virtual environment from a Python on "
                     "this machine, installed with uv. auto: the plan says which and why."),
    ] = "auto",
    prefix: Annotated[
        Optional[Path],
        typer.Option("--prefix", metavar="PATH", help="Create the environment in this directory (must not exist).",
                     show_default=False),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and the exact commands; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before creating.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an environment of the same name (kept if the new one fails).")
    ] = False,
    json_output: JsonOption = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip the post-install check.")] = False,
    jupyter: Annotated[
        bool, typer.Option("--jupyter", help="Also install ipykernel and register a Jupyter kernel named after it.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the installers' own output.")] = False,
    machine: MachineOption = None,
    cuda: CudaOption = None,
    gpu_arch: GpuArchOption = None,
    manifests: ManifestsOption = None,
    timeout: TimeoutOption = 10.0,
    probe_timeout: ProbeTimeoutOption = 300.0,
) -> None:
    """Create an environment with the newest build of MANIFEST that runs on this machine, check it, record it.

    envkit picks the build as `envkit list MANIFEST` does, shows the plan (where, which Python, which packages from
    which index or channels, the commands), creates the environment without sudo, installs the build from its own
    index only, runs the post-install GPU check, and prints how to activate it. A failure or Ctrl-C leaves nothing
    half-made behind.

    Packages are fetched from the upstream URLs in the manifests, or from mirrors set in envkit's config file
    ($ENVKIT_CONFIG, else ~/.config/envkit/config.yaml; key `mirrors:` maps an upstream URL prefix to a mirror).
    Set ENVKIT_INSTALLER=pip to install with pip instead of uv.

    Examples: `envkit create torch`, `envkit create tensorflow --dry-run`,
    `envkit create torch --machine a100-node.yaml --name torch-a100` (on a login node, for a GPU partition).

    Exit codes: 0 created and checked, 1 failed (nothing left behind) or the check failed, 2 bad input.
    """
    with _reported_errors():
        import os
        import sys

        from envkit.catalog.cache import cached_catalog
        from envkit.config import load_config
        from envkit.create.execute import AlreadyExists, check_available
        from envkit.create.prepare import CreateRequest, prepare
        from envkit.create.render import plan_json, plan_text
        from envkit.resolve import parse_python_request

        dirs = _dirs()
        config = load_config(os.environ, dirs)
        directory = _manifests_dir(manifests)
        catalog = cached_catalog(directory, [manifest], dirs.cache)
        tables = catalog.tables
        request = parse_python_request(python, tables.python)
        profile = _machine(tables, machine, cuda, gpu_arch, timeout)
        on_target = _on_target(machine, cuda, gpu_arch)
        the_manifest = catalog.manifests[manifest]
        prepared = prepare(
            CreateRequest(build_id=build, name=name, backend=backend, prefix=prefix, jupyter=jupyter,
                          verify=not no_verify),
            the_manifest, tables, profile, on_target, request, config, dirs, os.environ,
        )
        if dry_run:
            _print_json(plan_json(prepared)) if json_output else typer.echo(plan_text(prepared))
            try:
                check_available(prepared.plan, dirs, force, os.environ)
            except AlreadyExists as taken:  # a dry run changes nothing, but says what the real run would meet
                typer.echo(f"envkit: note: the real run would stop here: {taken.message}", err=True)
            return
        check_available(prepared.plan, dirs, force, os.environ)
        if not json_output:
            typer.echo(plan_text(prepared))
        elif not yes and sys.stdin.isatty():
            typer.echo(plan_text(prepared), err=True)  # the question needs the plan; stdout stays JSON
        if not yes and sys.stdin.isatty() and not typer.confirm("Create it?", default=True, err=True):
            typer.echo("envkit: nothing created", err=True)
            raise typer.Exit(1)
        outcome = _execute(prepared, the_manifest, tables, dirs, force, verbose, probe_timeout)
        _print_outcome(prepared, outcome, json_output)
        failed = outcome.report is not None and not outcome.report.ok
        raise typer.Exit(1 if failed else 0)


def _execute(prepared, manifest, tables, dirs, force: bool, verbose: bool, probe_timeout: float):
    import os
    import sys

    from envkit.create.execute import execute, step_count
    from envkit.create.progress import Progress

    plan = prepared.plan
    progress = Progress(sys.stderr, step_count(plan), verbose=verbose, live=sys.stderr.isatty())

    def checker(plan, python):
        from envkit.activation import activated_environ
        from envkit.probe.check import check_environment
        from envkit.probe.runner import ProbeOptions

        options = ProbeOptions(framework=manifest.framework, timeout=probe_timeout)
        environ = activated_environ(plan.prefix, plan.kind, plan.name, os.environ)  # as `envkit run` runs it
        return check_environment(python, options, plan.profile, environ, manifest_for=lambda _: manifest,
                                 tables=tables, on_target=plan.on_target, expected=plan.build)

    return execute(prepared, dirs, progress, force, checker, os.environ)


def _print_outcome(prepared, outcome, json_output: bool) -> None:
    if json_output:
        from envkit.create.render import outcome_json

        _print_json(outcome_json(prepared, outcome))
    else:
        from envkit.create.render import outcome_text

        typer.echo(outcome_text(prepared, outcome))


@app.command("envs")
def list_envs(json_output: JsonOption = False) -> None:
    """List the environments envkit made: build, backend, Python, the last check's result, where they are."""
    with _reported_errors():
        from envkit import records
        from envkit.records_render import envs_json, envs_text

        found = records.load_all(_dirs().records)
        if json_output:
            _print_json(envs_json(found))
        else:
            typer.echo(envs_text(found))


@app.command()
def remove(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment to delete (`envkit envs` lists them).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete an environment envkit made: its directory, its Jupyter kernel and its record."""
    with _reported_errors():
        import os
        import sys

        from envkit.create.remove import remove_environment
        from envkit.errors import BadInputError

        record = _record(env)
        if not yes:
            if not sys.stdin.isatty():
                raise BadInputError(f"not removing {env} without confirmation", hint="Add --yes to remove it.")
            if not typer.confirm(f"Delete {env} at {record.prefix}?", default=False, err=True):
                typer.echo("envkit: nothing removed", err=True)
                raise typer.Exit(1)
        for line in remove_environment(record, _dirs(), os.environ):
            typer.echo(line)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False}
)
def run(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment to run in (`envkit envs` lists them).")],
    command: Annotated[
        Optional[List[str]], typer.Argument(metavar="-- CMD...", help="The command and its arguments.",
                                            show_default=False)
    ] = None,
) -> None:
    """Run a command inside an environment, activated as `conda activate` or `source bin/activate` would do it.

    Example: `envkit run torch-cu126 -- python train.py --epochs 3`. The exit code is the command's.
    """
    with _reported_errors():
        import os
        import shutil

        from envkit.activation import activated_argv, activated_environ
        from envkit.errors import BadInputError, EnvkitError

        record = _record(env)
        argv = [a for a in (command or [])]
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            raise BadInputError("give the command to run after --", hint=f"e.g. envkit run {env} -- python -V")
        prefix = Path(record.prefix)
        if not (prefix / "bin").is_dir():
            raise EnvkitError(f"environment {env} is gone from {prefix}",
                              hint=f"`envkit remove {env} --yes` forgets it; `envkit create` makes it again.")
        environ = activated_environ(prefix, record.kind, record.name, os.environ)
        if shutil.which(argv[0], path=environ["PATH"]) is None:
            raise BadInputError(f"{argv[0]}: no such command in {env} or on PATH")
        full = activated_argv(prefix, record.kind, argv)
        os.execvpe(full[0], full, environ)


def main() -> None:
    app(prog_name="envkit")
