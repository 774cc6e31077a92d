"""Pure parsers of ``sinfo`` output: partitions, their nodes, and the GPUs (GRES ``gpu``) each node has.

envkit asks ``sinfo -h -N -o FORMAT`` with :data:`SINFO_FORMAT`: one line per (node, partition), fields separated by
``|``, so no hostlist expression (``gpu-a[1-2]``) has to be expanded here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envkit.text.terminal import printable
from envkit.versions import is_ascii_number

# partition (no '*' for the default) | availability | node | GRES | features | state
SINFO_FORMAT = "%R|%a|%N|%G|%f|%t"
_FIELDS = 6
_GRES_ITEM = re.compile(r"^gpu(?::(?P<type>[^:(]+))?(?::(?P<count>[0-9]+))?(?:\(.*\))?$")


@dataclass(frozen=True)
class NodeRow:
    partition: str
    available: str  # "up", "down", "drain", "inact"
    node: str
    gres: str  # as sinfo prints it, "(null)" when none
    features: str
    state: str  # compact state: idle, mix, alloc, down*, drain, ...

    @property
    def gpus(self) -> int:
        return gpu_count(self.gres)

    @property
    def configuration(self) -> tuple[str, str]:
        """What makes two nodes the same for a survey: their GRES and their features."""
        return (self.gres, self.features)


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    available: str
    nodes: tuple[NodeRow, ...]

    @property
    def has_gpus(self) -> bool:
        return any(row.gpus > 0 for row in self.nodes)

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(row.node for row in self.nodes)


def parse_sinfo(text: str) -> list[NodeRow]:
    """The rows of ``sinfo -h -N -o SINFO_FORMAT``; ValueError naming the first line that does not fit."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != _FIELDS:
            raise ValueError(f"sinfo line {number} has {len(fields)} fields, expected {_FIELDS}: {line!r}")
        # (escaped: a name sinfo prints reaches the user's terminal, and never an escape sequence with it)
        partition, available, node, gres, features, state = (printable(field.strip()) for field in fields)
        row = NodeRow(partition, available, node, gres, features, state)
        try:
            row.gpus  # (a count no node has is refused here, with its line, not later)
        except ValueError as error:
            raise ValueError(f"sinfo line {number}: {error}") from None
        rows.append(row)
    return rows


def gpu_count(gres: str) -> int:
    """How many GPUs a node's GRES string gives: ``gpu:a100:4(S:0-1),shard:8`` -> 4, ``gpu:2`` -> 2,
    ``(null)`` -> 0. A ``gpu`` entry without a count is one GPU, as Slurm reads it."""
    total = 0
    for item in _split_gres(gres):
        match = _GRES_ITEM.match(item)
        if match is None:
            continue
        count = match.group("count")
        if count is None and match.group("type") is not None and is_ascii_number(match.group("type")):
            count = match.group("type")  # gpu:2 parses its count as the type group
        if count is not None and len(count) > _MOST_DIGITS:
            raise ValueError(f"GRES {item[:40]!r}: a GPU count of {len(count)} digits")
        total += int(count) if count is not None else 1
    return total


_MOST_DIGITS = 6  # of a node's GPU count: more is no node, and int() of thousands of digits is refused


def _split_gres(gres: str) -> list[str]:
    """Split on the commas between entries, not those inside an entry's ``(S:0,1)`` socket list."""
    items, depth, current = [], 0, ""
    for char in gres:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        items.append(current.strip())
    return items


def partitions(rows: list[NodeRow]) -> dict[str, PartitionInfo]:
    """Rows grouped by partition, in the order sinfo lists them; each node once per partition."""
    grouped: dict[str, list[NodeRow]] = {}
    seen: set[tuple[str, str]] = set()  # (partition, node): one look-up per row, not a scan of the members so far
    for row in rows:
        members = grouped.setdefault(row.partition, [])
        if (row.partition, row.node) not in seen:
            seen.add((row.partition, row.node))
            members.append(row)
    return {name: PartitionInfo(name, members[0].available, tuple(members)) for name, members in grouped.items()}


def distinct_configurations(partition: PartitionInfo) -> list[tuple[NodeRow, int]]:
    """One node per distinct (GRES, features) among the partition's GPU nodes, with how many nodes share it.

    The representative is the first node in that configuration that is usable now (idle or mixed), else the
    first one."""
    groups: dict[tuple[str, str], list[NodeRow]] = {}
    for row in partition.nodes:
        if row.gpus > 0:
            groups.setdefault(row.configuration, []).append(row)
    chosen = []
    for members in groups.values():
        usable = [row for row in members if usable_state(row.state)]
        chosen.append(((usable or members)[0], len(members)))
    return chosen


def configuration_members(partition: PartitionInfo, row: NodeRow) -> tuple[str, ...]:
    """The names of the partition's GPU nodes that share ``row``'s configuration (GRES and features), in sinfo's
    order: the nodes a survey's entry for that configuration stands for."""
    return tuple(dict.fromkeys(other.node for other in partition.nodes
                               if other.gpus > 0 and other.configuration == row.configuration))


def usable_state(state: str) -> bool:
    """Whether a node in this compact sinfo state can start a job now or soon (idle, mixed, allocated)."""
    base = state.rstrip("*~#!%$@^-")
    return base in ("idle", "mix", "alloc", "comp", "plnd") and not state.endswith("*")
