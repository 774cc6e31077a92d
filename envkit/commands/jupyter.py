"""``envkit jupyter``: JupyterLab from an environment on a node of a Slurm partition, started by sbatch; listing
and stopping the user's servers."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands.images import NoFitCheckOption
from envkit.commands.output import print_json, reported_errors
from envkit.commands.places import user_dirs
from envkit.commands.on_node import PARTITION_HELP, CpusOption, GpusOption, QueueOption, TimeOption
from envkit.commands.options import JsonOption, ManifestsOption, seconds_between

SERVER_TIMEOUT = 600.0


def jupyter(
    env: Annotated[Optional[str], typer.Argument(metavar="ENV", help="The environment to serve (`envkit envs` "
                                                 "lists them), or an image (a path: ./torch.sqfs).",
                                                 show_default=False)] = None,
    partition: Annotated[Optional[str], typer.Option("--partition", "-p", metavar="P", show_default=False,
                                                     help=PARTITION_HELP)] = None,
    gpus: GpusOption = None,
    cpus: CpusOption = None,
    time: TimeOption = None,
    timeout: QueueOption = 300.0,
    server_timeout: Annotated[float, typer.Option("--server-timeout", metavar="SECONDS",
                                                  callback=seconds_between(1, 86400),
                                                  help="Seconds from the job's start (the quick check included) "
                                                       "for the server to answer.")] = SERVER_TIMEOUT,
    list_servers: Annotated[bool, typer.Option("--list", help="List your running Jupyter servers (job, node, "
                                               "port, time left).")] = False,
    stop: Annotated[Optional[str], typer.Option("--stop", metavar="JOB", help="End the Jupyter server of job JOB.",
                                                show_default=False)] = None,
    json_output: JsonOption = False,
    manifests: ManifestsOption = None,
    no_fit_check: NoFitCheckOption = False,
) -> None:
    """Start JupyterLab from ENV on a node of partition P in a batch job, and print its URL and the ssh tunnel.

    envkit checks the environment's build against the partition as `envkit job` does (exit 1, with the reasons,
    when it would not run there), then submits a job that runs the quick check (`envkit verify ENV --on-node`: the
    framework sees the GPUs the job got), picks a free port on the node's address as Slurm knows it (NodeAddr), and
    starts the server there with a token envkit made: the token goes through a private file (mode 600) and the
    environment, never an argv or the script. envkit waits until the server answers, then prints the job, the URL
    (with the token: for you alone), the `ssh -N -L` command that brings it to a laptop, and how to stop it. A job
    that does not start within --timeout, or whose server does not answer, is cancelled (exit 1).

    `envkit jupyter --list` shows your servers; `envkit jupyter --stop JOB` ends one. Example:
    `envkit jupyter torch-cu126 -p gpu-a100 --gpus 2 --time 4:00:00`.
    """
    with reported_errors():
        from envkit.errors import BadInputError

        base = user_dirs().data / "jupyter"
        if list_servers or stop is not None:
            if env is not None or partition is not None or (list_servers and stop is not None):
                raise BadInputError("--list and --stop JOB take no ENV, no --partition and not each other",
                                    hint="`envkit jupyter --list`, or `envkit jupyter --stop JOB`.")
            if list_servers:
                _list(base, json_output)
            else:
                _stop(base, stop, json_output)
            return
        if env is None or partition is None:
            raise BadInputError("give the environment and the partition: envkit jupyter ENV -p P",
                                hint="`envkit envs` lists the environments, `envkit site` the partitions.")
        from envkit.commands.images import as_argument

        _start(as_argument(env), partition, gpus, cpus, time, timeout, server_timeout, json_output, manifests, base,
               fit_check=not no_fit_check)


def _start(env: str, partition_spec: str, gpus, cpus, time, timeout: float, server_timeout: float,
           json_output: bool, manifests, base: Path, fit_check: bool = True) -> None:
    import shlex

    from envkit.commands.on_node import prepare
    from envkit.errors import EnvkitError
    from envkit.slurm import jupyter_job as jj

    record, spec, slurm = prepare(env, partition_spec, gpus, cpus, time, manifests, jj.JOB_NAME, fit_check)
    prefix = Path(record.prefix)
    program = jj.server_program(prefix) if "image" not in record.extra else _image_program(record)
    if program is None:
        import os
        import shutil

        from envkit.backends.tools import installed_uv
        from envkit.create.storage import package_cache
        from envkit.state.config import load_config

        uv = shutil.which("uv") or str(installed_uv() or "uv")  # the user's uv, else the one installed with envkit
        dirs = user_dirs()
        cache = package_cache(load_config(os.environ, dirs), dirs, os.environ).uv  # envkit's, not ~/.cache/uv
        adds = shlex.join([uv, "pip", "install", "--cache-dir", str(cache), "--python", str(prefix / "bin" / "python"),
                           "jupyterlab"])
        raise EnvkitError(f"{env} has no Jupyter (no jupyter-lab or jupyter-server in {prefix / 'bin'}); envkit does "
                          "not change an environment without being asked", hint=f"Add JupyterLab to it: {adds}")
    from envkit.system.signals import interrupting_signals

    with interrupting_signals():  # a closed terminal or a `kill` while waiting cancels the job as Ctrl-C does
        _submit_and_wait(env, program, spec, slurm, base, timeout, server_timeout, json_output, not fit_check)


def _image_program(record):
    """The program of an image's environment that starts a Jupyter server, read from the image (not mounted)."""
    import os

    from envkit.slurm.jupyter_job import SERVER_PROGRAMS
    from envkit.travel.opened import read_member

    image = Path(record.extra["image"])
    return next((name for name in SERVER_PROGRAMS if read_member(image, f"bin/{name}", os.environ) is not None), None)


def _submit_and_wait(env: str, program: str, spec, slurm, base: Path, timeout: float, server_timeout: float,
                     json_output: bool, unchecked: bool = False) -> None:
    import getpass
    import os
    import socket
    import sys
    from dataclasses import replace

    from envkit.slurm import jupyter_job as jj
    from envkit.slurm.jupyter_server import cancel, forget, new_directory, servers, wait_for_server
    from envkit.slurm.script import directives, overriding_variables
    from envkit.system.launch import python_module

    servers(slurm, base)  # the private directories of servers that ended go first, their tokens with them
    directory, token = new_directory(base)
    try:
        spec = replace(spec, output=str(directory / jj.LOG_FILE))
        job = jj.JupyterJob(directives=tuple(directives(spec)), directory=directory,
                            envkit=tuple(python_module(sys.executable, "envkit")), env=env, server=program,
                            root=os.geteuid() == 0, unchecked=unchecked)
        script = jj.jupyter_script(job)
        mask = os.umask(0o077)  # sbatch passes it on (SLURM_UMASK): what the job writes is the user's alone
        try:
            job_id = slurm.submit(script, [name for name in overriding_variables(spec) if name in os.environ])
        finally:
            os.umask(mask)
    except BaseException:
        forget(directory)
        raise
    (directory / jj.JOB_FILE).write_text(job_id + "\n", encoding="ascii")
    if not json_output:
        typer.echo(f"envkit: submitted job {job_id} to {spec.partition} ({spec.gpus} GPU(s)); waiting for it to start "
                   f"(at most {timeout:g} s) and for its Jupyter server to answer", err=True)
    try:
        server = wait_for_server(slurm, job_id, directory, token, timeout, server_timeout,
                                 on_start=lambda name: None if json_output else typer.echo(
                                     f"envkit: job {job_id} started on {name or 'its node'}", err=True))
    except BaseException:
        cancel(slurm, job_id)
        (directory / jj.TOKEN_FILE).unlink(missing_ok=True)
        raise
    connection = server.connection
    lab = program == "jupyter-lab"
    url = jj.server_url(connection.address, connection.port, token, lab)
    local = jj.server_url("localhost", connection.port, token, lab)
    tunnel = jj.tunnel_command(connection.port, connection.address, getpass.getuser(), socket.gethostname())
    stop = f"envkit jupyter --stop {job_id}"
    if json_output:
        print_json({"job": job_id, "node": connection.node, "address": connection.address, "port": connection.port,
                    "url": url, "local_url": local, "tunnel": tunnel, "stop": stop,
                    "check": {"status": server.check_status, "report": server.check}})
        return
    if server.check is not None:
        verdict = "passed" if server.check_status == 0 else f"did not pass (exit status {server.check_status})"
        typer.echo(f"The check on {connection.node} {verdict}:")
        for line in server.check.rstrip().splitlines():
            typer.echo(f"  {line}")
        typer.echo("")
    typer.echo(f"Jupyter is running in job {job_id} on node {connection.node} ({connection.address}), port "
               f"{connection.port}.")
    typer.echo(f"  URL (for you alone: it holds the token): {url}")
    typer.echo(f"  From a laptop: {tunnel}")
    typer.echo(f"    then open {local}")
    typer.echo(f"  Stop it: {stop}")


def _list(base: Path, json_output: bool) -> None:
    from envkit.slurm.client import Slurm
    from envkit.slurm.jupyter_server import servers

    slurm = Slurm()
    slurm.require_answer("your Jupyter servers cannot be listed")  # (with no server directory, nothing asks it)
    running = servers(slurm, base)
    if json_output:
        print_json({"servers": [{"job": s.job, "state": s.state.lower(), "node": s.node, "time_left": s.time_left,
                                 "address": s.connection.address if s.connection else None,
                                 "port": s.connection.port if s.connection else None} for s in running]})
        return
    if not running:
        typer.echo("No Jupyter servers of yours are running (`envkit jupyter ENV -p P` starts one).")
        return
    rows = [("JOB", "STATE", "NODE", "PORT", "TIME LEFT")]
    rows += [(s.job, s.state.lower(), s.node or "-", str(s.connection.port) if s.connection else "-", s.time_left)
             for s in running]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def _stop(base: Path, job: str, json_output: bool) -> None:
    from envkit.errors import BadInputError, EnvkitError, UnknownNameError
    from envkit.slurm.client import Slurm
    from envkit.slurm.jupyter_server import cancel, forget, server_directory

    if not job.isdigit() or len(job) > 12:
        raise BadInputError(f"--stop {job!r}: give the job id of a Jupyter server, a number",
                            hint="`envkit jupyter --list` shows them.")
    directory = server_directory(base, job)
    if directory is None:
        raise UnknownNameError(f"job {job} is not a Jupyter server envkit started for you",
                               hint="`envkit jupyter --list` shows yours; `scancel` ends other jobs.")
    slurm = Slurm()
    slurm.require_answer(f"Jupyter server job {job} cannot be stopped")
    if not cancel(slurm, job):
        raise EnvkitError(f"job {job} was cancelled but has not ended yet", hint=f"`squeue -j {job}` shows it.")
    forget(directory)
    if json_output:
        print_json({"job": job, "stopped": True})
    else:
        typer.echo(f"Stopped the Jupyter server of job {job}.")


def register(app: typer.Typer) -> None:
    app.command()(jupyter)
