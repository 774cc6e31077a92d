"""The site file's model: a Site of named Partitions, each of SiteNode entries (a profile and how many nodes share it),
the names a partition or node may have, and SiteError, which names the file and the field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from envkit.errors import BadInputError
from envkit.machines.profile import MachineProfile

SITE_VARIABLE = "ENVKIT_SITE"
VERSION = 1
# Partition and node names reach sbatch/srun argv: a plain name, never something that reads as an option.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
# The most nodes one entry may stand for. The largest machine has about 160,000 nodes (Fugaku: 158,976); a million
# is six times that, room for any real cluster, while a count beyond it is a typo (or 10^21) that would otherwise
# be summed into the partition's node count and printed.
MAX_NODE_COUNT = 1_000_000
_HINT = "Fix the site file, or point $ENVKIT_SITE at another one (the README describes the format)."


class SiteError(BadInputError):
    """The site file cannot be read or says something envkit cannot use. Names the file and the field."""

    def __init__(self, path: Path, where: str, problem: str, hint: str = _HINT) -> None:
        super().__init__(f"site file {path}: {where}: {problem}" if where else f"site file {path}: {problem}",
                         hint=hint)
        self.path = path
        self.where = where


@dataclass(frozen=True)
class SiteNode:
    node: Optional[str]  # the Slurm node name; None when hand-written without one
    count: int  # how many nodes share this configuration
    profile: MachineProfile
    profile_file: Optional[str] = None  # as written in the file (relative to it), when the profile came from one
    # The Slurm names of every node the entry stands for (survey writes them: the nodes of one configuration), so
    # that ``P:NODE`` names any of them; empty: only ``node``.
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[SiteNode, ...] = ()
    surveyed: Optional[str] = None  # ISO 8601 UTC
    unreachable: tuple[tuple[str, str], ...] = ()  # (node, reason)
    error: Optional[str] = None

    @property
    def node_count(self) -> int:
        return sum(node.count for node in self.nodes)


@dataclass(frozen=True)
class Site:
    path: Path
    partitions: Mapping[str, Partition]
    missing: bool = False  # no file at ``path`` (an empty site)
    shared: Optional[Path] = None  # the site's shared directory (envkit.shared), when the file names it


def valid_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))
