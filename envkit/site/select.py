"""Choosing from the site file: ``--partition NAME[:NODE,...]`` parsed, a partition's entries with the names
`envkit site` shows, the profiles (and node counts) of the entries chosen, and the Slurm node a name stands for."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from envkit.errors import BadInputError, UnknownNameError
from envkit.machines.profile import MachineProfile
from envkit.site.model import Partition, Site, SiteNode, valid_name


def check_partition_name(name: str, hint: str = "`envkit site` lists the partitions.") -> str:
    """``name`` if it is a partition name (see :data:`envkit.site.model._NAME`); BadInputError (exit 2) otherwise."""
    if not valid_name(name):
        raise BadInputError(f"--partition {name!r} is not a partition name (letters, digits, '_', '.', '+', '-', not "
                            "starting with '-')", hint=hint)
    return name


def parse_partition_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``NAME`` or ``NAME:NODE,...`` (from ``--partition``) as (name, nodes); BadInputError (exit 2) for an empty
    or malformed one: a name that could read as an option, ``NAME:`` with no node, an empty node between commas."""
    name, colon, rest = spec.partition(":")
    nodes = tuple(rest.split(",")) if colon else ()
    if not valid_name(name) or any(not node or node.startswith("-") for node in nodes):
        raise BadInputError(f"--partition {spec!r}: expected NAME or NAME:NODE,... (letters, digits, '_', '.', '+', "
                            "'-', not starting with '-')", hint="`envkit site` lists the partitions and their nodes.")
    return name, nodes


def machine_names(partition: Partition) -> list[str]:
    """Each entry's name in a fleet: its profile's name, else its Slurm node name, else its profile file, else
    ``PARTITION#N``. A name several entries share (one profile file, a profile ``name`` copied) gives way to each
    one's Slurm node name, else ``PARTITION#N``: the names tell entries apart in a fleet and in ``NAME:NODE``."""
    first = [entry.profile.name or entry.node or (Path(entry.profile_file).stem if entry.profile_file else None)
             or f"{partition.name}#{i + 1}" for i, entry in enumerate(partition.nodes)]
    nodes = [entry.node for entry in partition.nodes]
    names = []
    for i, (name, node) in enumerate(zip(first, nodes)):
        if first.count(name) > 1:  # shared: the entry's own node name, where no other entry goes by it
            name = node if node and node not in first and nodes.count(node) == 1 else f"{partition.name}#{i + 1}"
        names.append(name)
    return names


def get_partition(site: Site, name: str) -> Partition:
    """The partition called ``name``; UnknownNameError (exit 2) listing the partitions there are."""
    partition = site.partitions.get(name)
    if partition is not None:
        return partition
    if site.missing:
        raise UnknownNameError(
            f"unknown partition {name!r}: there is no site file at {site.path}",
            hint="Run `envkit survey` on the cluster's login node, write one by hand (see the README), or set "
                 "$ENVKIT_SITE to the site file your admin published.",
        )
    there = ", ".join(sorted(site.partitions)) or "none"
    raise UnknownNameError(f"unknown partition {name!r} in site file {site.path}; the partitions there are: {there}",
                           hint="Run `envkit site` to see them.")


def partition_profiles(site: Site, name: str, nodes: Sequence[str] = ()) -> list[MachineProfile]:
    """One profile per node configuration in the partition, each named (see :func:`machine_names`). With ``nodes``
    (``--partition NAME:NODE,...``), only the entries named so: by the name `envkit site` shows, or by their Slurm
    node name (``node:``); UnknownNameError (exit 2) for a name that is neither."""
    return [profile for profile, _ in partition_nodes(site, name, nodes)]


def partition_nodes(site: Site, name: str, nodes: Sequence[str] = ()) -> list[tuple[MachineProfile, int]]:
    """:func:`partition_profiles`, each with the number of nodes its entry stands for (its ``count``)."""
    partition = get_partition(site, name)
    if not partition.nodes:
        why = f" ({partition.error})" if partition.error else ""
        raise BadInputError(f"partition {name!r} in site file {site.path} has no node profiles{why}",
                            hint="Survey it again (`envkit survey`), or add its node profiles to the site file.")
    entries = _entries(partition)
    if nodes:
        unknown = [wanted for wanted in nodes if not _named(partition, entries, wanted)]
        if unknown:
            there = ", ".join(shown if entry.node in (None, shown) else f"{shown} (node {entry.node})"
                              for entry, shown in entries)
            raise UnknownNameError(f"partition {name!r} has no node {unknown[0]!r}; it has: {there}",
                                   hint="`envkit site` lists the partitions and their nodes.")
        chosen = {id(entry) for wanted in nodes for entry, _ in _named(partition, entries, wanted)}
        entries = [(entry, shown) for entry, shown in entries if id(entry) in chosen]
    return [(entry.profile._replace(name=shown), entry.count) for entry, shown in entries]


def _entries(partition: Partition) -> list[tuple[SiteNode, str]]:
    """The partition's node entries, each with the name `envkit site` shows for it."""
    return list(zip(partition.nodes, machine_names(partition)))


def _named(partition: Partition, entries: list[tuple[SiteNode, str]], wanted: str) -> list[tuple[SiteNode, str]]:
    """The entries ``wanted`` names: by the name `envkit site` shows, or by their Slurm ``node:`` or one of their
    ``members`` (a node survey merged into the configuration of another). BadInputError (exit 2) when it is one
    entry's shown name and another's node: either reading would be a guess."""
    by_name = [(entry, shown) for entry, shown in entries if shown == wanted]
    by_node = [(entry, shown) for entry, shown in entries if entry.node == wanted or wanted in entry.members]
    crossed = by_name and any(all(entry is not e for e, _ in by_name) for entry, _ in by_node)
    if crossed:
        slurm = by_name[0][0].node
        raise BadInputError(f"partition {partition.name!r}: {wanted!r} is the name of one node entry"
                            f"{f' (node {slurm})' if slurm else ''} and the Slurm node of another",
                            hint=f"Rename that entry's profile in the site file (its `name: {wanted}`): a profile "
                                 "named as another entry's Slurm node cannot be told from it.")
    return by_name or by_node


def slurm_node(site: Site, name: str, node: str) -> str:
    """The Slurm node name of ``node`` in partition ``name`` (``--partition NAME:NODE`` on a Slurm cluster): the
    ``node:`` of the entry ``node`` names (see :func:`partition_profiles`), else ``node`` as given (a Slurm name, or
    one the site file does not know). BadInputError (exit 2) when it names an entry without ``node:`` that stands
    for several nodes: its name is a configuration's, not a node's, and Slurm would refuse it (see
    :func:`not_a_slurm_node`)."""
    partition = site.partitions.get(name)
    if partition is None:
        return node
    named = _named(partition, _entries(partition), node)
    if any(node in entry.members for entry, _ in named):
        return node  # a Slurm node of the configuration, by its own name
    slurm = next((entry.node for entry, _ in named if entry.node is not None), None)
    if slurm is not None:
        return slurm
    several = next((entry for entry, _ in named if entry.count > 1), None)
    if several is not None:
        raise not_a_slurm_node(site, name, node, f"and stands for {several.count} nodes: its name is a "
                               "configuration's, not a Slurm node's")
    return node


def unnamed_entry(site: Site, name: str, node: str) -> bool:
    """Whether ``node`` picks an entry of partition ``name`` that has no ``node:``: then the Slurm node is ``node``
    as given, which only Slurm can confirm."""
    partition = site.partitions.get(name)
    if partition is None:
        return False
    named = _named(partition, _entries(partition), node)
    return bool(named) and all(entry.node is None for entry, _ in named)


def not_a_slurm_node(site: Site, name: str, node: str, why: str, nodes: Sequence[str] = ()) -> BadInputError:
    """The BadInputError (exit 2) for ``--partition NAME:NODE`` naming a site file entry without ``node:`` whose name
    is no Slurm node (``why``; ``nodes``: the partition's Slurm nodes, where Slurm said)."""
    which = f"; partition {name} has: {', '.join(nodes)}" if nodes else ""
    return BadInputError(f"--partition {name}:{node}: the site file's entry {node!r} has no `node:`, {why}",
                         hint=f"Add `node: NODE` to that entry in {site.path} (the Slurm name of one of its nodes"
                              f"{which}), or give the partition alone: --partition {name}")
