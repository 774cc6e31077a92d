"""The srun command line of ``envkit shell``: an interactive shell in an environment on a node, built by one pure
function of its parameters (every value validated as for an sbatch directive: none can be read as an option)."""

from __future__ import annotations

from typing import Sequence

from envkit.slurm.script import JobSpec, directives

JOB_NAME = "envkit-shell"

# Run on the node before the shell: OMP_NUM_THREADS as `envkit job` sets it, and which node and GPUs the job got.
_ANNOUNCE = ('export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"; '
             'echo "envkit: job ${SLURM_JOB_ID:-?} on node ${SLURMD_NODENAME:-$(hostname)}, GPUs: '
             '${CUDA_VISIBLE_DEVICES:-none}; leave the shell (exit) to end the job" >&2; exec "$@"')


def shell_argv(srun: str, spec: JobSpec, start_timeout: float, shell: str) -> list[str]:
    """``srun --pty ... -- bash -c ANNOUNCE envkit-shell ACTIVATE... SHELL``. ``spec.activate`` runs a command
    inside the environment (`envkit run ENV --`); ``spec.command`` is ignored (the shell is the command)."""
    argv = [srun, "--pty", "--nodes=1", "--ntasks=1", f"--immediate={max(1, int(start_timeout))}"]
    argv += [f"--{key}={value}" for key, value in directives(spec) if key != "output"]
    return [*argv, "--", "/bin/bash", "-c", _ANNOUNCE, JOB_NAME, *spec.activate, shell]


def login_shell(candidates: Sequence[str]) -> str:
    """The first absolute path of ``candidates`` (the user's $SHELL first), else /bin/bash."""
    return next((path for path in candidates if path.startswith("/") and "\n" not in path), "/bin/bash")
