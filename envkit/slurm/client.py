"""The Slurm programs envkit calls (sinfo, srun, sbatch, scancel), each through envkit.system.process with a time limit.

Whether Slurm is here is asked once per :class:`Slurm` (``shutil.which("sinfo")``); the job id of a submission is
read from ``sbatch --parsable`` in one place. A job that cannot start within its time limit is withdrawn (``srun
--immediate``) and, should srun itself be cut off or envkit be stopped by a signal, cancelled by its unique job
name: never left queued.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from envkit.errors import EnvkitError
from envkit.system.process import Captured, run_captured

QUERY_TIMEOUT = 30.0  # sinfo hangs while slurmctld is not answering
_JOB_ID = re.compile(r"^([0-9]+)(?:;\S+)?$")
# srun's own words when it never got an allocation (the job did not start).
_NOT_STARTED = ("Unable to allocate resources", "Job allocation", "Requested partition configuration not available",
                "Invalid partition", "invalid partition")
_EXEC_FAILED = re.compile(r"execve\(\): (?P<what>.*)$", re.MULTILINE)


class SlurmError(EnvkitError):
    """A Slurm program failed or is missing: carries Slurm's own message."""


class SlurmUnreachable(SlurmError):
    """sinfo is here but does not answer (no controller, no configuration): nothing was queued."""


def not_answering(error: SlurmUnreachable) -> str:
    """The words for a Slurm that does not answer, with what sinfo said: one phrase, every command's."""
    return f"Slurm does not answer here ({error.message})"


@dataclass(frozen=True)
class StepResult:
    """One ``srun`` run: what it printed, and whether the job ever started on a node."""

    started: bool
    returncode: Optional[int]  # None: cut off
    stdout: str
    stderr: str
    job_name: str

    @property
    def ok(self) -> bool:
        return self.started and self.returncode == 0

    @property
    def waited(self) -> bool:
        """Whether the job was queued (or its nodes busy) until its start time limit: a timeout, not a refusal."""
        return "queued and waiting" in self.stderr or "busy" in self.stderr

    def envkit_missing(self) -> Optional[str]:
        """Why the node could not run this envkit (same interpreter path), with what to do; None when it could."""
        failed = exec_failure(self.stderr)
        if failed is None and "No module named envkit" not in self.stderr:
            return None
        return (f"the node cannot run envkit ({failed or 'No module named envkit'}): install envkit where the nodes "
                f"see the same path ({sys.executable}), such as a shared home")

    def why(self) -> str:
        """Slurm's (or the program's) own last words, one line."""
        if self.returncode is None:
            return "cut off at its time limit (the job was cancelled)"
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        slurm = [line for line in lines if line.startswith(("srun:", "slurmstepd")) and "queued and waiting" not in line]
        program = [line for line in lines if not line.startswith(("srun:", "slurmstepd"))]
        words = (program[-2:] + slurm[-1:]) if self.started and program else slurm[-2:]
        return "; ".join(words) if words else f"exit status {self.returncode}"


def unique_job_name(purpose: str) -> str:
    return f"envkit-{purpose}-{uuid.uuid4().hex[:10]}"


class Slurm:
    """The Slurm client programs, as found on PATH once."""

    def __init__(self, env: Optional[Mapping[str, str]] = None, query_timeout: float = QUERY_TIMEOUT) -> None:
        self.env = dict(os.environ if env is None else env)
        self.query_timeout = query_timeout
        self._sinfo = shutil.which("sinfo", path=self.env.get("PATH"))

    @property
    def present(self) -> bool:
        return self._sinfo is not None

    def require(self) -> None:
        if not self.present:
            raise SlurmError("Slurm's sinfo is not on PATH: this is not a Slurm cluster's login node",
                             hint="Run envkit on the cluster's login node, or load Slurm (`module load slurm`).")

    def require_answer(self, what: str) -> None:
        """Slurm is here and its controller answers (sinfo); else SlurmUnreachable (exit 1) in one sentence: Slurm
        does not answer, and ``what`` therefore cannot be done. Asked before anything else of Slurm, whose own
        programs would say it in several lines (srun) or not at all (an empty queue)."""
        self.require()
        try:
            self.sinfo("%P")
        except SlurmUnreachable as error:
            raise SlurmUnreachable(f"{not_answering(error)}: {what}", hint=error.hint) from None

    def _program(self, name: str) -> str:
        path = shutil.which(name, path=self.env.get("PATH"))
        if path is None:
            self.require()  # no sinfo either: not a Slurm login node at all
            raise SlurmError(f"Slurm's {name} is not on PATH (sinfo is: {self._sinfo})",
                             hint="Check the cluster's Slurm installation, or load it whole (`module load slurm`).")
        return path

    def _run(self, argv: Sequence[str], timeout: float) -> Captured:
        try:
            return run_captured(argv, self.env, timeout)
        except OSError as exc:
            raise SlurmError(f"{argv[0]} could not be started: {exc.strerror or exc}") from None

    def sinfo(self, fmt: str, partitions: Sequence[str] = ()) -> str:
        argv = [self._program("sinfo"), "-h", "-N", "-o", fmt]
        if partitions:
            argv += ["-p", ",".join(partitions)]
        done = self._run(argv, self.query_timeout)
        if done.returncode is None:
            raise SlurmUnreachable(f"sinfo did not answer within {self.query_timeout:g} s: the Slurm controller is not "
                             "reachable", hint="Try again later, or ask the cluster's admins.")
        if done.returncode != 0:
            raise SlurmUnreachable(f"sinfo failed: {last_words(done.stderr, done.returncode)}",
                             hint="Check that `sinfo` works on its own here (Slurm's configuration, $SLURM_CONF), "
                                  "or ask the cluster's admins.")
        return done.stdout

    def srun(self, argv: Sequence[str], *, partition: str, gpus: Optional[int], start_timeout: float,
             run_timeout: float, purpose: str, node: Optional[str] = None,
             extra_env: Optional[Mapping[str, str]] = None, nodes: int = 1) -> StepResult:
        """Run ``argv`` as one task on a node of ``partition`` with ``gpus`` GPUs (one task on each of ``nodes``
        nodes, each line of output labelled with its task's number, when ``nodes`` is more than 1). A job that does
        not start within ``start_timeout`` seconds is withdrawn; one that runs past ``run_timeout`` more is cut off
        and cancelled."""
        name = unique_job_name(purpose)
        command = [self._program("srun"), f"--partition={partition}", f"--job-name={name}", f"--nodes={nodes}",
                   f"--ntasks={nodes}", f"--immediate={max(1, int(start_timeout))}", "--quiet"]
        if nodes > 1:
            command += ["--ntasks-per-node=1", "--label"]
        if gpus:
            command.append(f"--gpus-per-node={gpus}")
        if node is not None:
            command.append(f"--nodelist={node}")
        command += ["--", *argv]
        env = {**self.env, **(extra_env or {})}
        try:
            done = run_captured(command, env, start_timeout + run_timeout)
        except OSError as exc:
            raise SlurmError(f"srun could not be started: {exc.strerror or exc}") from None
        except BaseException:  # a signal (srun was stopped): its job, pending or running, is cancelled too
            from envkit.system.signals import cleaning_up

            with cleaning_up():
                self.cancel_named(name)
            raise
        if done.returncode is None:
            self.cancel_named(name)
        started = done.returncode == 0 or not any(marker in done.stderr for marker in _NOT_STARTED)
        return StepResult(started, done.returncode, done.stdout, done.stderr, name)

    def node_addresses(self, nodelist: str) -> list[str]:
        """The address Slurm has (``NodeAddr``) for each node of a job's ``nodelist`` (SLURM_JOB_NODELIST), in the
        job's order, or the node's name where scontrol does not say; empty when scontrol cannot expand the list."""
        from envkit.slurm.multinode import node_addresses

        scontrol = self._program("scontrol")
        if not nodelist or nodelist.startswith("-"):  # Slurm's own variable: never an option, but not trusted
            return []
        done = self._run([scontrol, "show", "hostnames", nodelist], self.query_timeout)
        names = done.stdout.split() if done.returncode == 0 else []
        if not names or any(name.startswith("-") for name in names):
            return []
        shown = self._run([scontrol, "show", "node", "-o", ",".join(names)], self.query_timeout)
        found = node_addresses(shown.stdout) if shown.returncode == 0 else {}
        return [found.get(name) or name for name in names]

    def cancel_named(self, name: str) -> None:
        """Cancel every job of this user named ``name`` (unique per run); quiet when there is none."""
        scancel = shutil.which("scancel", path=self.env.get("PATH"))
        if scancel is None:
            return
        try:
            run_captured([scancel, f"--name={name}"], self.env, self.query_timeout)
        except OSError:
            pass

    def submit(self, script: str, unset: Sequence[str] = ()) -> str:
        """Submit ``script`` with ``sbatch --parsable`` (the script on stdin), without the environment variables
        ``unset`` (those that would override its directives); the job id."""
        sbatch = self._program("sbatch")
        env = {key: value for key, value in self.env.items() if key not in unset}
        try:
            done = run_captured([sbatch, "--parsable"], env, self.query_timeout, input_text=script)
        except OSError as exc:
            raise SlurmError(f"sbatch could not be started: {exc.strerror or exc}") from None
        if done.returncode is None:
            raise SlurmError(f"sbatch did not answer within {self.query_timeout:g} s",
                             hint="Check with `squeue --me` whether the job was queued.")
        if done.returncode != 0:
            raise SlurmError(f"sbatch refused the job: {last_words(done.stderr, done.returncode)}",
                             hint="That is sbatch's own word on it; --print instead of --submit shows the script "
                                  "envkit gave it.")
        return parse_job_id(done.stdout)


def last_words(stderr: str, returncode: int) -> str:
    """A Slurm program's last line of stderr (its ``fatal:``/``error:`` line comes last), else its exit status."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {returncode}"


def parse_job_id(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` (``12345`` or ``12345;cluster``); SlurmError when it is not there."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    match = _JOB_ID.match(lines[-1]) if lines else None
    if match is None:
        raise SlurmError(f"sbatch did not print a job id (it printed {stdout.strip()!r})",
                         hint="Check with `squeue --me` whether the job was queued.")
    return match.group(1)


def exec_failure(stderr: str) -> Optional[str]:
    """What slurmstepd could not execute (``execve(): python: No such file or directory``), if that happened."""
    match = _EXEC_FAILED.search(stderr)
    return match.group("what").strip() if match else None
