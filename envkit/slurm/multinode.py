"""Across nodes: the launch lines of ``envkit job --nodes N`` per framework, and the pure parts of ``envkit verify
--nodes N`` (the rendezvous port of a job, the first node's address from scontrol, srun's labelled output).

Slurm is the engine: every node's process is started by ``srun`` (one task per node), the rendezvous is the first
node of the allocation at the address Slurm has for it (``NodeAddr``), and the port is derived from the job id, so
every node computes the same one without talking to the others. A user's MASTER_ADDR or MASTER_PORT wins.
"""

from __future__ import annotations

import re
import shlex
from typing import Optional, Sequence

from envkit.errors import BadInputError

PORT_BASE = 20000  # below Linux's ephemeral ports (32768-60999): a port no outgoing connection holds by chance
PORT_SPAN = 10000
MULTI_NODE_FRAMEWORKS = ("torch", "tensorflow", "jax")
_LABELLED = re.compile(r"^\s*(?P<task>[0-9]+): ?(?P<text>.*)$")
# Run by bash -c on each node: TF_CONFIG with this task's index, then the command ("$@").
_TF_CONFIG = ('export TF_CONFIG="{\\"cluster\\": {\\"worker\\": $ENVKIT_TF_WORKERS}, \\"task\\": {\\"type\\": '
              '\\"worker\\", \\"index\\": $SLURM_PROCID}}"; exec "$@"')
_NODE_ADDR = re.compile(r"(?:^|\s)NodeAddr=(?P<addr>\S+)")
_NODE_NAME = re.compile(r"(?:^|\s)NodeName=(?P<name>\S+)")

# The job script's shell lines that find the rendezvous: the allocation's first node, its NodeAddr, and the port.
RENDEZVOUS_LINES = (
    'first_node="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
    'first_addr="$(scontrol show node -o "$first_node" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')"',
    'export MASTER_ADDR="${MASTER_ADDR:-${first_addr:-$first_node}}"',
    f'export MASTER_PORT="${{MASTER_PORT:-$(( {PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN} ))}}"',
)


def rendezvous_port(job_id: str) -> int:
    """The port of a job's rendezvous, the same on every node: derived from the job id (``SLURM_JOB_ID``)."""
    if not job_id.isdigit():
        raise BadInputError(f"SLURM_JOB_ID {job_id!r} is not a job id")
    return PORT_BASE + int(job_id) % PORT_SPAN


def node_address(scontrol_node: str) -> Optional[str]:
    """``NodeAddr`` from ``scontrol show node -o NAME``: the address Slurm reaches the node at (it resolves where a
    node's name may not); None when the text has none."""
    found = _NODE_ADDR.search(scontrol_node)
    return found.group("addr") if found else None


def node_addresses(scontrol_nodes: str) -> dict[str, str]:
    """Each node's ``NodeAddr`` from ``scontrol show node -o NAME,NAME...`` (one line per node), by ``NodeName``."""
    found = {}
    for line in scontrol_nodes.splitlines():
        name, address = _NODE_NAME.search(line), node_address(line)
        if name and address:
            found[name.group("name")] = address
    return found


def labelled_lines(text: str) -> dict[int, list[str]]:
    """srun --label's output, by task: ``{0: [lines], 1: [...]}``; unlabelled lines (srun's own) under -1."""
    tasks: dict[int, list[str]] = {}
    for line in text.splitlines():
        found = _LABELLED.match(line)
        task, rest = (int(found.group("task")), found.group("text")) if found else (-1, line)
        tasks.setdefault(task, []).append(rest)
    return tasks


def check_nodes(nodes: int, named: Sequence[str], available: Optional[int], partition: str) -> int:
    """``nodes`` if a job can have that many nodes of ``partition``: BadInputError (exit 2) for fewer than 1, more
    than ``available`` (sinfo's count, None when unknown), more than the nodes ``P:NODE,...`` names, or a node
    named twice (by one name, or by two that stand for one Slurm node: ``named`` are then their Slurm names)."""
    if nodes < 1:
        raise BadInputError(f"--nodes {nodes}: a job needs at least 1 node", hint="Give --nodes 2 or more to run "
                            "across nodes.")
    twice = next((node for i, node in enumerate(named) if node in named[:i]), None)
    if twice is not None:  # (Slurm would run the job on fewer nodes than asked, and the check would not run)
        raise BadInputError(f"--partition {partition}:{','.join(named)} names the node {twice} twice",
                            hint="Name each node once.")
    if named and nodes > len(named):
        raise BadInputError(f"--nodes {nodes}: --partition {partition}:{','.join(named)} names only {len(named)} "
                            "node(s)", hint=f"Name {nodes} nodes, or give the partition alone.")
    if available is not None and nodes > available:
        raise BadInputError(f"--nodes {nodes}: partition {partition} has {available} node(s) (sinfo)",
                            hint=f"Ask for {available} or fewer.")
    return nodes


def launch_lines(framework: Optional[str], activate: Sequence[str], command: Sequence[str], nodes: int,
                 per_gpu: bool, gpus: Optional[int]) -> list[str]:
    """The script's lines that start ``command`` on every node of an allocation of ``nodes`` nodes, one srun task per
    node, with the framework's own distributed launch set up from Slurm's variables. Pure."""
    run = " ".join(shlex.quote(part) for part in activate)
    user = " ".join(shlex.quote(part) for part in command)
    srun = f"srun --nodes={nodes} --ntasks-per-node=1 --kill-on-bad-exit=1"
    lines = ["", f"# {nodes} nodes, one task per node (srun). The rendezvous: the allocation's first node at the "
                 "address Slurm has for it",
             "# (NodeAddr), on a port derived from the job id. MASTER_ADDR and MASTER_PORT set before sbatch win;",
             "# NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME pick the network the frameworks use.",
             *RENDEZVOUS_LINES]
    if framework == "torch":
        nproc = str(gpus) if per_gpu and gpus is not None else ("gpu" if per_gpu else "1")
        torchrun = ["torchrun", '--nnodes="$SLURM_NNODES"', f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
                    '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"', '--rdzv-id="envkit-$SLURM_JOB_ID"']
        rest = list(command[1:])
        if command[0] in ("python", "python3") and rest and (rest[0] == "-m" or not rest[0].startswith("-")):
            user = " ".join(shlex.quote(part) for part in rest)  # torchrun runs it with the environment's Python
        else:
            torchrun.append("--no-python")
        lines.append(f"{srun} {run} {' '.join(torchrun)} {user}")
    elif framework == "tensorflow":
        lines += [
            "# TF_CONFIG for MultiWorkerMirroredStrategy: every node a worker at its NodeAddr, this task's index.",
            'workers=""',
            'for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do',
            '  addr="$(scontrol show node -o "$node" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')"',
            '  workers="${workers:+$workers,}\\"${addr:-$node}:$MASTER_PORT\\""',
            "done",
            'export ENVKIT_TF_WORKERS="[$workers]"',
            f"{srun} bash -c {shlex.quote(_TF_CONFIG)} envkit-job {run} {user}",
        ]
    elif framework == "jax":
        lines += [
            "# jax.distributed.initialize() reads Slurm's variables itself (one process per node, task 0 the "
            "coordinator),",
            "# and the coordinator's address from JAX_COORDINATOR_ADDRESS: the first node's NodeAddr, not its name.",
            'export JAX_COORDINATOR_ADDRESS="${JAX_COORDINATOR_ADDRESS:-$MASTER_ADDR:$MASTER_PORT}"',
            f"{srun} {run} {user}",
        ]
    else:
        raise BadInputError(f"--nodes runs PyTorch, TensorFlow or JAX across nodes; this environment has "
                            f"{framework or 'an unknown framework'}", hint="Leave out --nodes to run on one node.")
    return lines
