"""A Jupyter server's job, from the login node: its private directory, waiting until it answers, listing, stopping.

envkit never connects to a node on its own: Slurm starts the server, and envkit asks it once it is there (an HTTP
request for ``/api/status`` with the token in a header, each with a short time limit, no proxy) whether it answers.
Whatever goes wrong while waiting (the job never starts, ends, or its server never answers; Ctrl-C), the job is
cancelled before the error is raised: never left running.
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from envkit.errors import EnvkitError
from envkit.slurm.client import Slurm, SlurmError
from envkit.slurm.jupyter_job import (CHECK_FILE, CHECK_STATUS_FILE, CONNECTION_FILE, JOB_FILE, LOG_FILE, TOKEN_FILE,
                                      Connection, last_lines, read_connection)
from envkit.system.signals import raise_lost_signal

POLL = 0.2  # seconds between looks at the queue, the connection file and the server
ASK_TIMEOUT = 2.0  # seconds for one request to the server
_WAITING = ("PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED")
_RUNNING = ("RUNNING", "COMPLETING")


@dataclass(frozen=True)
class Server:
    job: str
    directory: Path
    connection: Connection
    check: Optional[str]  # the quick check's report, as the job wrote it
    check_status: Optional[int]


def new_directory(base: Path) -> tuple[Path, str]:
    """A private directory for one server under ``base`` (mode 700), and the token, written there in a file only
    its owner can read (mode 600, made so: never widened later)."""
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    directory = base / uuid.uuid4().hex[:16]
    directory.mkdir(mode=0o700)
    token = secrets.token_hex(24)
    descriptor = os.open(directory / TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return directory, token


def read_token(directory: Path) -> str:
    return (directory / TOKEN_FILE).read_text(encoding="ascii").strip()


def _squeue(slurm: Slurm, args: list[str]) -> str:
    done = slurm._run([slurm._program("squeue"), "-h", *args], slurm.query_timeout)
    if done.returncode is None:
        raise SlurmError(f"squeue did not answer within {slurm.query_timeout:g} s")
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return ""
        raise SlurmError(f"squeue failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def job_state(slurm: Slurm, job: str) -> Optional[str]:
    """The job's state (PENDING, RUNNING, COMPLETED, ...), or None when Slurm no longer knows it."""
    rows = _squeue(slurm, ["-t", "all", "-j", job, "-o", "%T"]).split()
    return rows[0] if rows else None


def cancel(slurm: Slurm, job: str, wait: float = 30.0) -> bool:
    """scancel the job and wait until it has left the running states; whether it did within ``wait`` seconds."""
    try:
        slurm._run([slurm._program("scancel"), job], slurm.query_timeout)
    except SlurmError:
        return False
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        state = job_state(slurm, job)
        if state is None or state not in (*_WAITING, *_RUNNING):
            return True
        time.sleep(POLL)
    return False


def ask(connection: Connection, token: str, timeout: float = ASK_TIMEOUT) -> Optional[int]:
    """The HTTP status of the server's ``/api/status`` with the token, or None when it does not answer."""
    import urllib.error
    import urllib.request

    host = f"[{connection.address}]" if ":" in connection.address else connection.address
    request = urllib.request.Request(f"http://{host}:{connection.port}/api/status",
                                     headers={"Authorization": f"token {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the node, never through a proxy
    try:
        with opener.open(request, timeout=timeout) as response:
            response.read(65536)
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, ValueError):
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _said(directory: Path, connection: Optional[Connection]) -> str:
    """The last words of the server (or of the job), for an error."""
    if connection is not None:
        words = last_lines(_read(directory / f"server-{connection.attempt}.log"))
        if words:
            return " | ".join(words)
    words = last_lines(_read(directory / LOG_FILE))
    return " | ".join(words) if words else "it printed nothing"


def wait_for_server(slurm: Slurm, job: str, directory: Path, token: str, queue_timeout: float,
                    server_timeout: float, on_start: Optional[Callable[[str], None]] = None) -> Server:
    """Until the job's server answers with its token; EnvkitError (exit 1) when the job stays pending past
    ``queue_timeout`` seconds, ends, or its server does not answer within ``server_timeout`` seconds of the job's
    start. The caller cancels the job on any error (see :func:`cancel`)."""
    queued = time.monotonic()
    started: Optional[float] = None
    connection: Optional[Connection] = None
    while True:
        raise_lost_signal()  # a SIGTERM whose Interrupted a finalizer swallowed (envkit.system.signals) ends the wait
        state = job_state(slurm, job)
        now = time.monotonic()
        if state in _WAITING:
            if now - queued > queue_timeout:
                raise EnvkitError(f"job {job} did not start within {queue_timeout:g} s (it is cancelled)",
                                  hint="The partition is busy: try later, a longer --timeout, or fewer --gpus.")
        elif state in _RUNNING:
            if started is None:
                started = now
                if on_start is not None:
                    on_start(_node_of(slurm, job))
            connection = read_connection(_read(directory / CONNECTION_FILE)) or connection
            answer = ask(connection, token) if connection is not None else None
            if answer in (401, 403):
                raise EnvkitError(f"the Jupyter server of job {job} refuses envkit's token (HTTP {answer}): a Jupyter "
                                  "configuration of yours sets another token or password (the job is cancelled)",
                                  hint="Take c.ServerApp.token / c.IdentityProvider.token and the password out of "
                                       "your jupyter_server_config, then run this again.")
            if connection is not None and answer == 200:
                status = _read(directory / CHECK_STATUS_FILE).strip()
                check = _read(directory / CHECK_FILE) if status else None
                return Server(job, directory, connection, check, int(status) if status.isdigit() else None)
            if now - started > server_timeout:
                raise EnvkitError(f"the Jupyter server of job {job} did not answer within {server_timeout:g} s of "
                                  f"the job's start (the job is cancelled): {_said(directory, connection)}",
                                  hint=f"Its output is in {directory}.")
        else:  # (a job that ended between two looks was never seen running: its connection file is read here)
            connection = read_connection(_read(directory / CONNECTION_FILE)) or connection
            what = f"ended ({state.lower()})" if state else "is gone"
            raise EnvkitError(f"job {job} {what} before its Jupyter server answered: {_said(directory, connection)}",
                              hint=f"Its output is in {directory}.")
        time.sleep(POLL)


def _node_of(slurm: Slurm, job: str) -> str:
    try:
        return _squeue(slurm, ["-j", job, "-o", "%N"]).strip()
    except SlurmError:
        return ""


@dataclass(frozen=True)
class Running:
    job: str
    node: str
    time_left: str
    state: str
    directory: Path
    connection: Optional[Connection]


def _directories(base: Path) -> dict[str, Path]:
    """job id -> private directory, for each server envkit submitted (its ``job`` file written)."""
    jobs: dict[str, Path] = {}
    for directory in sorted(base.iterdir()) if base.is_dir() else ():
        job = _read(directory / JOB_FILE).strip()
        if job.isdigit():
            jobs[job] = directory
    return jobs


def _queued(slurm: Slurm) -> dict[str, list[str]]:
    """job id -> [state, node, time left] of this user's Jupyter jobs that Slurm queues or runs."""
    from envkit.slurm.jupyter_job import JOB_NAME

    out = {}
    for line in _squeue(slurm, ["--me", f"--name={JOB_NAME}", "-o", "%i|%T|%N|%L"]).splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[1] in (*_WAITING, *_RUNNING):
            out[parts[0]] = parts[1:]
    return out


def servers(slurm: Slurm, base: Path) -> list[Running]:
    """The user's Jupyter servers that Slurm still runs or queues: the private directories under ``base`` whose job
    is in the queue. The directories of jobs that ended are deleted (their tokens with them)."""
    jobs = _directories(base)
    if not jobs:
        return []
    queued = _queued(slurm)
    out = []
    for job, directory in jobs.items():
        if job not in queued:
            forget(directory)
            continue
        state, node, left = queued[job]
        out.append(Running(job, node, left, state, directory, read_connection(_read(directory / CONNECTION_FILE))))
    return out


def server_directory(base: Path, job: str) -> Optional[Path]:
    """The private directory of the user's server job ``job``, or None when envkit started no such server."""
    if not base.is_dir():
        return None
    return next((directory for directory in base.iterdir() if _read(directory / JOB_FILE).strip() == job), None)


def forget(directory: Path) -> None:
    """Delete a server's private directory (its token with it)."""
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
