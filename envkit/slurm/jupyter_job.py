"""The batch job of ``envkit jupyter``: its script, built by one pure function, and the files it writes.

The job runs in a private directory on the shared home (mode 700, made by envkit before it submits): it reads the
token from ``token`` (mode 600) into ``JUPYTER_TOKEN``, where Jupyter takes it from, so the token is never in an argv,
in the script or in Slurm's copy of the job; it runs the quick check first (``envkit verify ENV --on-node``, into
``check.txt``); then it picks a free port on the node's address as Slurm knows it (``NodeAddr``), writes
``NODE ADDRESS PORT ATTEMPT`` to ``connection``, and starts the server on exactly that port (``port_retries=0``). A
port another program took between choosing and binding is chosen again, up to :data:`PORT_ATTEMPTS` times.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

JOB_NAME = "envkit-jupyter"
PORT_ATTEMPTS = 5
TOKEN_FILE = "token"
CONNECTION_FILE = "connection"
CHECK_FILE = "check.txt"
CHECK_STATUS_FILE = "check.status"
JOB_FILE = "job"  # the job id, written by envkit once sbatch took the job
LOG_FILE = "job.log"  # the job's own output (sbatch --output)
PORT_IN_USE = "is already in use"  # Jupyter's words when it cannot bind its port

# The stdlib-only program that finds a port free on the given address (the kernel's choice for port 0).
# The working directory's entry leaves sys.path first (python -c puts it there): a socket.py where the job starts
# must not run (envkit.system.launch).
_FREE_PORT = ("import sys; sys.path[:] = [p for p in sys.path if p]; import socket; s = socket.socket(); "
              "s.bind((sys.argv[1], 0)); print(s.getsockname()[1]); s.close()")
# NodeAddr of the node this job runs on, from scontrol; the host's first address when Slurm does not say.
_NODE_ADDRESS = ('addr="$(scontrol show node -o "$SLURMD_NODENAME" 2>/dev/null | tr " " "\\n" '
                 '| sed -n "s/^NodeAddr=//p" | head -n 1)"')


@dataclass(frozen=True)
class JupyterJob:
    directives: tuple[tuple[str, str], ...]  # (key, value) of each #SBATCH line, already validated
    directory: Path  # the private directory of this server
    envkit: tuple[str, ...]  # the argv of envkit on the node (this same Python: a shared home)
    env: str  # the environment's name
    server: str  # the program of the environment that starts the server (jupyter-lab or jupyter-server)
    check: bool = True  # run `envkit verify ENV --on-node` first
    root: bool = False  # the user is root: Jupyter refuses to run as root without --allow-root
    unchecked: bool = False  # an image started with --no-fit-check: the node's run and check skip its fit too


class Connection(NamedTuple):
    node: str
    address: str
    port: int
    attempt: int


def jupyter_script(job: JupyterJob) -> str:
    """The whole script, ending with a newline. Pure: the same job gives the same text; no secret is in it."""
    q = shlex.quote
    unchecked = ("--no-fit-check",) if job.unchecked else ()
    run = " ".join(q(part) for part in (*job.envkit, "run", *unchecked, job.env, "--"))
    server = [job.server, "--no-browser", '--ip="$addr"', '--port="$port"', "--ServerApp.port_retries=0"]
    if job.root:
        server.append("--allow-root")
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH --{key}={value}" for key, value in job.directives]
    lines += [
        "",
        "# Written by envkit jupyter. The token is read from a private file into the environment, never written here.",
        "set -uo pipefail",
        "umask 077",
        'export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"',
        f"dir={q(str(job.directory))}",
        f'IFS= read -r JUPYTER_TOKEN < "$dir/{TOKEN_FILE}" || exit 3',
        "export JUPYTER_TOKEN",
        _NODE_ADDRESS,
        '[ -n "$addr" ] || addr="$(hostname -i | cut -d " " -f 1)"',
    ]
    if job.check:
        verify = " ".join(q(part) for part in (*job.envkit, "verify", *unchecked, job.env, "--on-node"))
        lines += [f'{verify} > "$dir/{CHECK_FILE}" 2>&1',
                  f'echo "$?" > "$dir/{CHECK_STATUS_FILE}"']
    lines += [
        f"for attempt in $(seq 1 {PORT_ATTEMPTS}); do",
        f'    port="$({q(job.envkit[0])} -c {q(_FREE_PORT)} "$addr")" || exit 4',
        f'    echo "${{SLURMD_NODENAME:-$(hostname)}} $addr $port $attempt" > "$dir/{CONNECTION_FILE}.new"',
        f'    mv -f "$dir/{CONNECTION_FILE}.new" "$dir/{CONNECTION_FILE}"',
        f'    {run} {" ".join(server)} > "$dir/server-$attempt.log" 2>&1',
        '    status="$?"',
        f'    grep -q {q(PORT_IN_USE)} "$dir/server-$attempt.log" || exit "$status"',
        "done",
        "exit 5",
    ]
    return "\n".join(lines) + "\n"


def read_connection(text: str) -> Optional[Connection]:
    """The job's ``connection`` file, or None while it is not (wholly) written."""
    parts = text.split()
    if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
        return None
    port = int(parts[2])
    return Connection(parts[0], parts[1], port, int(parts[3])) if 0 < port < 65536 else None


def server_url(address: str, port: int, token: str, lab: bool) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{port}/{'lab' if lab else ''}?token={token}"


def tunnel_command(port: int, node_address: str, user: str, login_host: str) -> str:
    return shlex.join(["ssh", "-N", "-L", f"{port}:{node_address}:{port}", f"{user}@{login_host}"])


SERVER_PROGRAMS = ("jupyter-lab", "jupyter-server")  # what starts a Jupyter server, JupyterLab's first


def server_program(prefix: Path) -> Optional[str]:
    """The environment's program that starts a Jupyter server (JupyterLab's first), or None when it has none."""
    for name in SERVER_PROGRAMS:
        if (prefix / "bin" / name).is_file():
            return name
    return None


def last_lines(text: str, count: int = 3) -> list[str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-count:]
