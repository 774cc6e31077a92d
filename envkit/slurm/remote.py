"""The post-install check on a node of a partition, through srun: ``envkit verify ENV --partition P``.

The node runs this same envkit (same interpreter path: a cluster's shared home) with the check's options; its report
and exit status come back as they are. A check that could not start (no access, the queue time over the limit, a
node that cannot run envkit) is *not run*: never PASS or FAIL, and its job is cancelled.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from envkit.slurm.client import Slurm, exec_failure
from envkit.slurm.survey import gpu_partitions

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


def partition_gpus(slurm: Slurm, partition: str) -> int:
    """The most GPUs a node of ``partition`` has (sinfo); exit 2 when there is no such partition."""
    [info] = gpu_partitions(slurm, [partition])
    return max(row.gpus for row in info.nodes)


def envkit_argv(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "envkit", *args]


def check_on_node(slurm: Slurm, partition: str, args: Sequence[str], gpus: Optional[int], start_timeout: float,
                  probe_timeout: float, node: Optional[str] = None) -> NodeCheck:
    step = slurm.srun(envkit_argv(args), partition=partition, gpus=gpus, start_timeout=start_timeout,
                      run_timeout=probe_timeout + CHECK_GRACE, purpose="verify", node=node)
    if not step.started:
        waited = "queued and waiting" in step.stderr or "busy" in step.stderr
        why = (f"the job did not start within {start_timeout:g} s (cancelled)" if waited
               else "the job could not start")
        return NodeCheck(None, step.stdout, step.stderr, f"{why}: {step.why()}")
    if step.returncode is None:
        return NodeCheck(None, step.stdout, step.stderr,
                         f"the check did not finish within {probe_timeout + CHECK_GRACE:g} s (the job was cancelled)")
    failed = exec_failure(step.stderr)
    if failed is not None or "No module named envkit" in step.stderr:
        return NodeCheck(None, step.stdout, step.stderr,
                         f"the node cannot run envkit ({failed or 'No module named envkit'}): install envkit where the "
                         f"nodes see the same path ({sys.executable}), such as a shared home")
    return NodeCheck(step.returncode, step.stdout, step.stderr)
