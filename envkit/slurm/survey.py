"""``envkit survey``: the GPU partitions and their node configurations, detected on the nodes through srun.

Each partition is surveyed in its own thread (the survey takes about as long as its slowest partition), and within
it each node configuration (or, with ``all_nodes``, each node) in parallel. A node is detected by running
``envkit detect --json`` with the same interpreter as this envkit (a cluster's shared home) with all of the node's
GPUs requested; the answer is keyed by the node's own ``$SLURMD_NODENAME`` (the profile's name inside a job).
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from envkit.errors import BadInputError, ProfileError, UnknownNameError
from envkit.machines.profile import MachineProfile, profile_from_dict
from envkit.site import Partition, SiteNode
from envkit.slurm.client import Slurm, StepResult
from envkit.slurm.sinfo import (SINFO_FORMAT, NodeRow, PartitionInfo, configuration_members, distinct_configurations,
                                parse_sinfo, partitions as group_partitions)
from envkit.system.launch import python_module

DETECT_RUN_TIMEOUT = 120.0  # seconds envkit detect may run on a node once the job started
Progress = Callable[[str, str], None]  # (partition, message)


@dataclass(frozen=True)
class PartitionOutcome:
    name: str
    partition: Optional[Partition]  # what to write; None: nothing reached, keep the site file's entry as it was
    error: Optional[str]  # why the whole partition failed, when it did
    unreachable: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


def envkit_on_node() -> list[str]:
    """The argv that runs this envkit on a node: the same interpreter path (a cluster's shared home)."""
    return python_module(sys.executable, "envkit", "detect", "--json")  # not the working directory's


def gpu_partitions(slurm: Slurm, wanted: Sequence[str] = ()) -> list[PartitionInfo]:
    """The partitions to survey: ``wanted`` (exit 2 for a name that does not exist, listing those that do) or every
    partition with GPU nodes."""
    text = slurm.sinfo(SINFO_FORMAT)
    try:
        found = group_partitions(parse_sinfo(text))
    except ValueError as exc:
        from envkit.slurm.client import SlurmError

        raise SlurmError(f"sinfo's output was not understood: {exc}") from None
    if wanted:
        unknown = [name for name in wanted if name not in found]
        if unknown:
            raise UnknownNameError(f"no partition named {', '.join(map(repr, unknown))} on this cluster; the "
                                   f"partitions are: {', '.join(found) or 'none'}",
                                   hint="Run `sinfo -s` to see them.")
        chosen = [found[name] for name in dict.fromkeys(wanted)]
        no_gpus = [info.name for info in chosen if not info.has_gpus]
        if no_gpus:
            raise BadInputError(f"partition {', '.join(map(repr, no_gpus))} has no GPU nodes (no GRES gpu in sinfo)",
                                hint="Survey the GPU partitions: " + ", ".join(
                                    name for name, info in found.items() if info.has_gpus) + ".")
        return chosen
    return [info for info in found.values() if info.has_gpus]


def survey(slurm: Slurm, chosen: Sequence[PartitionInfo], *, all_nodes: bool, timeout: float,
           progress: Optional[Progress] = None, node_argv: Optional[list[str]] = None) -> list[PartitionOutcome]:
    """Survey every partition in ``chosen`` at once; one outcome each, in the same order."""
    say = progress or (lambda partition, message: None)
    argv = node_argv or envkit_on_node()
    if not chosen:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(chosen))) as pool:
        futures = [pool.submit(_survey_partition, slurm, info, all_nodes, timeout, say, argv) for info in chosen]
        return [future.result() for future in futures]


def _survey_partition(slurm: Slurm, info: PartitionInfo, all_nodes: bool, timeout: float, say: Progress,
                      argv: list[str]) -> PartitionOutcome:
    if info.available not in ("up",):
        say(info.name, f"skipped: the partition is {info.available}")
        return PartitionOutcome(info.name, None, f"partition is {info.available}")
    if all_nodes:
        targets = [(row, 1) for row in info.nodes if row.gpus > 0]
    else:
        targets = distinct_configurations(info)
    say(info.name, f"detecting {len(targets)} node(s): {', '.join(row.node for row, _ in targets)}")
    with ThreadPoolExecutor(max_workers=min(8, len(targets))) as pool:
        results = list(pool.map(lambda target: _detect_node(slurm, info.name, target[0], timeout, argv), targets))
    nodes, unreachable = [], []
    for (row, count), (profile, reason) in zip(targets, results):
        if profile is not None:
            members = () if all_nodes else configuration_members(info, row)
            nodes.append(SiteNode(node=row.node, count=count, profile=profile, members=members))
            amd = f", amdgpu {profile.amdgpu or 'unknown'}" if profile.amd_gpus else ""
            say(info.name, f"{row.node}: {len(profile.gpus)} GPU(s), CUDA {profile.cuda_driver or 'none'}{amd}")
        else:
            unreachable.append((row.node, reason or "unknown"))
            say(info.name, f"{row.node}: not reached: {reason}")
    if not nodes:
        why = "; ".join(f"{node}: {reason}" for node, reason in unreachable)
        return PartitionOutcome(info.name, None, f"no node could be surveyed ({why})", tuple(unreachable))
    surveyed = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    partition = Partition(name=info.name, nodes=tuple(nodes), surveyed=surveyed, unreachable=tuple(unreachable))
    say(info.name, f"done: {len(nodes)} {'node(s)' if all_nodes else 'configuration(s)'}"
        + (f", {len(unreachable)} not reached" if unreachable else ""))
    return PartitionOutcome(info.name, partition, None, tuple(unreachable))


def _detect_node(slurm: Slurm, partition: str, row: NodeRow, timeout: float,
                 argv: list[str]) -> tuple[Optional[MachineProfile], Optional[str]]:
    """(profile, None) or (None, why the node could not be surveyed)."""
    step = slurm.srun(argv, partition=partition, gpus=row.gpus, start_timeout=timeout,
                      run_timeout=DETECT_RUN_TIMEOUT, purpose="survey", node=row.node)
    return profile_from_step(step, row.node, timeout)


def profile_from_step(step: StepResult, node: str, timeout: float) -> tuple[Optional[MachineProfile], Optional[str]]:
    if not step.started:
        if step.waited:
            return None, f"timeout: the job did not start within {timeout:g} s (cancelled): {step.why()}"
        return None, f"the job could not start: {step.why()}"
    if step.returncode is None:
        return None, f"envkit detect did not finish within {DETECT_RUN_TIMEOUT:g} s on the node (job cancelled)"
    if step.returncode != 0:
        missing = step.envkit_missing()
        if missing is not None:
            return None, missing
        return None, f"envkit detect failed on the node: {step.why()}"
    try:
        data = json.loads(step.stdout)
        profile = profile_from_dict(data, f"survey of node {node}")
    except (ValueError, ProfileError) as exc:
        message = exc.message if isinstance(exc, ProfileError) else str(exc)
        return None, f"envkit detect on the node printed something unreadable: {message}"
    notes = data.get("notes") if isinstance(data, dict) else None
    if isinstance(notes, list) and all(isinstance(note, str) for note in notes):
        profile = profile._replace(notes=tuple(notes))  # what the node said about itself (its job's GPUs)
    if profile.name != node:
        return None, f"the job ran on {profile.name or 'an unnamed node'}, not on {node}"
    return profile, None
