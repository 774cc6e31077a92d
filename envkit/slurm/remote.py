"""The post-install check on a node of a partition, through srun: ``envkit verify ENV --partition P``.

The node runs this same envkit (same interpreter path: a cluster's shared home) with the check's options; its report
and exit status come back as they are. A check that could not start (no access, the queue time over the limit, a
node that cannot run envkit) is *not run*: never PASS or FAIL, and its job is cancelled.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from envkit.errors import UnknownNameError
from envkit.slurm.client import Slurm
from envkit.slurm.sinfo import PartitionInfo
from envkit.slurm.survey import gpu_partitions
from envkit.system.launch import python_module

CHECK_GRACE = 120.0  # seconds on top of the probe's own limit for envkit to start and answer on the node


@dataclass(frozen=True)
class NodeCheck:
    returncode: Optional[int]  # the node's envkit exit status; None when the check did not run
    stdout: str
    stderr: str
    not_run: Optional[str] = None  # why the check did not run

    @property
    def ran(self) -> bool:
        return self.not_run is None


def partition_gpus(slurm: Slurm, partition: str, node: Optional[str] = None) -> int:
    """The most GPUs a node of ``partition`` has (sinfo), or those ``node`` has; exit 2 when there is no such
    partition, or no such node in it."""
    [info] = gpu_partitions(slurm, [partition])
    return node_gpus(info, node)


def node_gpus(info: PartitionInfo, node: Optional[str] = None) -> int:
    """The GPUs of ``node`` in the partition (the most any of its nodes has when None); UnknownNameError (exit 2),
    naming the partition's nodes, for a node that is not in it: srun would only refuse the job."""
    if node is None:
        return max(row.gpus for row in info.nodes)
    row = next((row for row in info.nodes if row.node == node), None)
    if row is None:
        raise UnknownNameError(f"partition {info.name!r} has no node {node!r}; its nodes are: "
                               f"{', '.join(info.node_names)}", hint=f"`sinfo -N -p {info.name}` lists them.")
    return row.gpus


def envkit_argv(args: Sequence[str]) -> list[str]:
    return python_module(sys.executable, "envkit", *args)  # never the working directory's envkit


def check_on_node(slurm: Slurm, partition: str, args: Sequence[str], gpus: Optional[int], start_timeout: float,
                  probe_timeout: float, node: Optional[str] = None) -> NodeCheck:
    step = slurm.srun(envkit_argv(args), partition=partition, gpus=gpus, start_timeout=start_timeout,
                      run_timeout=probe_timeout + CHECK_GRACE, purpose="verify", node=node)
    if not step.started:
        why = (f"the job did not start within {start_timeout:g} s (cancelled)" if step.waited
               else "the job could not start")
        return NodeCheck(None, step.stdout, step.stderr, f"{why}: {step.why()}")
    if step.returncode is None:
        return NodeCheck(None, step.stdout, step.stderr,
                         f"the check did not finish within {probe_timeout + CHECK_GRACE:g} s (the job was cancelled)")
    missing = step.envkit_missing()
    if missing is not None:
        return NodeCheck(None, step.stdout, step.stderr, missing)
    if step.returncode != 0 and not step.stdout.strip():
        # A check that ran prints its report (PASS or FAIL) on stdout: without one, srun itself failed (an error
        # srun does not word as a refused allocation) or envkit stopped on the node before checking.
        return NodeCheck(None, step.stdout, step.stderr,
                         f"no report came back (srun's exit status {step.returncode}): {step.why()}")
    return NodeCheck(step.returncode, step.stdout, step.stderr)
