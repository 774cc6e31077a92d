"""``envkit shell``: an interactive shell in an environment on a node of a Slurm partition (srun --pty)."""

from typing import Annotated

import typer

from envkit.commands.output import reported_errors
from envkit.commands.images import NoFitCheckOption
from envkit.commands.on_node import PARTITION_HELP, CpusOption, GpusOption, QueueOption, TimeOption
from envkit.commands.options import ManifestsOption, RunInArgument

PartitionOption = Annotated[str, typer.Option("--partition", "-p", metavar="P", help=PARTITION_HELP)]


def shell(
    env: RunInArgument,
    partition: PartitionOption = ...,  # type: ignore[assignment]
    gpus: GpusOption = None,
    cpus: CpusOption = None,
    time: TimeOption = None,
    timeout: QueueOption = 300.0,
    manifests: ManifestsOption = None,
    no_fit_check: NoFitCheckOption = False,
) -> None:
    """An interactive shell with ENV activated, on a node of partition P (on NODE with P:NODE), through
    `srun --pty`.

    envkit first checks the environment's build against the partition's nodes in the site file, as `envkit job`
    does, and refuses (exit 1, with the reasons) when it would not run there. The job asks for the GPUs and CPUs
    given (OMP_NUM_THREADS follows --cpus), says which node and GPUs it got, and ends when you leave the shell.
    ENV may be an image `envkit pack` made (a path: ./torch.sqfs): the node mounts it (`envkit run FILE`).

    Example: `envkit shell torch-cu126 -p gpu-a100 --gpus 2 --cpus 8 --time 2:00:00`.
    """
    with reported_errors():
        import os
        import sys
        from dataclasses import replace

        from envkit.commands.on_node import prepare
        from envkit.slurm.interactive import JOB_NAME, login_shell, shell_argv
        from envkit.system.launch import python_module

        from envkit.commands.images import as_argument

        env = as_argument(env)  # an image by its absolute path, for the node
        record, spec, slurm = prepare(env, partition, gpus, cpus, time, manifests, JOB_NAME, not no_fit_check)
        unchecked = ["--no-fit-check"] if no_fit_check else []  # (the node's run skips it too)
        spec = replace(spec, activate=(*python_module(sys.executable, "envkit", "run", *unchecked, env), "--"))
        argv = shell_argv(slurm._program("srun"), spec, timeout, login_shell([os.environ.get("SHELL", "")]))
        typer.echo(f"envkit: asking partition {spec.partition} for {spec.gpus} GPU(s) for {env}, waiting at most "
                   f"{timeout:g} s for it to start (then srun withdraws the job); the shell starts when it does",
                   err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(argv[0], argv, dict(os.environ))  # srun takes the terminal; leaving its shell ends the job


def register(app: typer.Typer) -> None:
    app.command()(shell)
