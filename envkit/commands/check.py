"""The post-install check: ``envkit verify`` (an environment envkit made) and ``envkit doctor`` (any environment)."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands.common import (find_record, machine_for, manifests_dir, print_json, reported_errors,
                                    user_dirs)
from envkit.commands.options import CheckOptions, EnvArgument, JsonOption, TargetOptions, with_options


def check_environment(python: Path, check: CheckOptions, target: TargetOptions, json_output: bool,
                      expected=None, environ=None):
    """Probe an environment's Python, judge the result for the machine, print the report; returns the report."""
    import os

    from envkit.catalog import load_tables
    from envkit.probe.check import check_environment as run_check
    from envkit.probe.runner import ProbeOptions, check_request

    options = ProbeOptions(framework=check.framework, multi_gpu=check.multi_gpu, bench=check.bench,
                           timeout=check.probe_timeout)
    check_request(python, options)
    directory = manifests_dir(target.manifests)
    tables = load_tables(directory)
    profile = machine_for(tables, target)  # bad input fails here, before the long part
    report = run_check(python, options, profile, environ or os.environ, tables=tables, on_target=target.on_target,
                       manifest_for=lambda name: _framework_manifest(directory, tables, name), expected=expected)
    _print_report(report, json_output)
    return report


def _print_report(report, json_output: bool) -> None:
    if json_output:
        from envkit.probe.render import report_json

        print_json(report_json(report))
    else:
        from envkit.probe.render import report_text

        typer.echo(report_text(report))


def _framework_manifest(directory: Path, tables, framework: Optional[str]):
    """The manifest named after the framework (torch.yaml for torch), if the manifests directory has one."""
    from envkit.catalog import manifest_names
    from envkit.catalog.load import SUFFIX, load_manifest

    if framework is None or framework not in manifest_names(directory):
        return None
    return load_manifest(directory / f"{framework}{SUFFIX}", tables)


@with_options
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
    json_output: JsonOption = False,
    check: CheckOptions = CheckOptions(),
    target: TargetOptions = TargetOptions(),
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
    with reported_errors():
        import os

        from envkit.probe.runner import default_python, locate_python

        located = locate_python(python, os.environ) if python is not None else default_python(os.environ)
        report = check_environment(located, check, target, json_output)
        raise typer.Exit(0 if report.ok else 1)


@with_options
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
    json_output: JsonOption = False,
    check: CheckOptions = CheckOptions(),
    target: TargetOptions = TargetOptions(),
) -> None:
    """Check an environment: PASS only when every GPU the build should drive ran the computations correctly.

    By name (ENV), the environment is judged against the build `envkit create` made it from, and the result is
    stored in its record (`envkit envs` shows it). With --prefix, any environment directory is checked, as
    `envkit doctor --python PREFIX/bin/python` would.

    Exit codes: 0 PASS, 1 FAIL, 2 bad input. Example: `envkit verify torch-cu126`.
    """
    with reported_errors():
        import dataclasses
        import os

        from envkit.errors import BadInputError

        if (env is None) == (prefix is None):
            raise BadInputError("give an environment name or --prefix PATH (one of them)",
                                hint="`envkit envs` lists the environments envkit made.")
        record = None
        expected = None
        if env is not None:
            record = find_record(env, settled=True)
            prefix = Path(record.prefix)
            recorded_framework, expected = _recorded_build(record, target.manifests)
            if check.framework == "auto" and recorded_framework is not None:
                check = dataclasses.replace(check, framework=recorded_framework)
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
        report = check_environment(python, check, target, json_output, expected=expected, environ=environ)
        if record is not None and target.on_target:
            _store_verify(record, report)
        raise typer.Exit(0 if report.ok else 1)


def _store_verify(record, report) -> None:
    """Into the record, unless the environment was replaced while the check ran (then it judged the old one)."""
    from envkit import records
    from envkit.create.lock import name_lock
    from envkit.probe.check import verify_summary

    dirs = user_dirs()
    with name_lock(dirs.locks, record.name):
        current = records.load(dirs.records, record.name)
        if current is not None and current.created == record.created and current.prefix == record.prefix:
            records.save(records.with_verify(current, verify_summary(report)), dirs.records)


def _recorded_build(record, manifests: Optional[Path]):
    """(the framework, the build) a recorded environment was made from, if its manifest still has them."""
    from envkit.catalog import load_tables, manifest_names
    from envkit.catalog.load import SUFFIX, load_manifest

    directory = manifests_dir(manifests)
    if record.manifest not in manifest_names(directory):
        return None, None
    manifest = load_manifest(directory / f"{record.manifest}{SUFFIX}", load_tables(directory))
    return manifest.framework, next((b for b in manifest.builds if b.id == record.build), None)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.command()(verify)
