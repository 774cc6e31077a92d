"""The site file: named partitions (or machine groups) and the profiles of the nodes in them.

``envkit survey`` (Slurm) writes it; an admin or a user can also write it by hand from saved ``envkit detect --json``
outputs. ``--partition NAME`` then targets that partition's profiles as a fleet. Format (YAML; JSON accepted too)::

    version: 1
    partitions:
      gpu-4-a100:
        surveyed: "2026-11-22T17:00:00Z"   # optional, ISO 8601 UTC, when survey last wrote it
        nodes:                             # one entry per distinct node configuration (or per node)
          - node: a100-01                  # Slurm node name (optional when hand-written)
            count: 12                      # optional, default 1 (at most 1,000,000): nodes of this configuration
            profile: {...}                 # inline machine profile exactly as `envkit detect --json` prints it
          - profile_file: v100-node.yaml   # OR a saved profile file, relative to the site file
        unreachable:                       # optional: what survey could not reach and why
          - {node: a100-07, reason: "timeout: the job did not start within 120 s (cancelled)"}
        error: "partition is down"         # optional: the whole partition could not be surveyed this time

Where it is: ``$ENVKIT_SITE``, else the config's ``site:`` key, else ``site.yaml`` in envkit's user config directory.
A missing file is an error only when a partition is asked for; an empty one is always an error (nothing writes one:
it is a truncated copy, not a site without partitions). Writing keeps the other partitions as they were
(``save_site(with_partition(load_site(path), partition), path)``), but not the comments of a hand-written file.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from envkit.errors import BadInputError, ProfileError, UnknownNameError
from envkit.machine import MachineProfile, not_text, profile_from_dict, read_profile
from envkit.words import described

SITE_VARIABLE = "ENVKIT_SITE"
VERSION = 1
_TOP_KEYS = ("version", "partitions")
_PARTITION_KEYS = ("surveyed", "nodes", "unreachable", "error")
_NODE_KEYS = ("node", "count", "profile", "profile_file")
# Partition and node names reach sbatch/srun argv: a plain name, never something that reads as an option.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
# The most nodes one entry may stand for. The largest machine has about 160,000 nodes (Fugaku: 158,976); a million
# is six times that, room for any real cluster, while a count beyond it is a typo (or 10^21) that would otherwise
# be summed into the partition's node count and printed.
MAX_NODE_COUNT = 1_000_000
_HINT = "Fix the site file, or point $ENVKIT_SITE at another one (the README describes the format)."
_EMPTY_HINT = ("A site file holds `version: 1` and `partitions:`, each partition's `nodes` with an inline `profile` "
               "(as `envkit detect --json` prints it) or a `profile_file`; `envkit survey` writes one where there is "
               "no file (delete the empty one), and the README shows the format.")


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


def valid_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name))


def check_partition_name(name: str, hint: str = "`envkit site` lists the partitions.") -> str:
    """``name`` if it is a partition name (see :data:`_NAME`); BadInputError (exit 2) otherwise."""
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


def site_path(environ: Mapping[str, str], config: Any, dirs: Any) -> Path:
    """``$ENVKIT_SITE``, else the config's ``site:`` key, else ``site.yaml`` in the user config directory."""
    named = environ.get(SITE_VARIABLE)
    if named is not None:
        if not named.strip():
            raise BadInputError(f"${SITE_VARIABLE} is empty", hint="Unset it, or give the path of a site file.")
        from envkit.files import user_path

        try:
            return user_path(named)
        except ValueError as exc:
            raise BadInputError(f"${SITE_VARIABLE} {named!r} {exc}") from None
    configured = getattr(config, "site", None)
    if configured is not None:
        return Path(configured)
    return Path(dirs.config) / "site.yaml"


def load_site(path: Path, cache_dir: Optional[Path] = None) -> Site:
    """The site file at ``path``, validated; an empty site (``missing=True``) when there is no file."""
    from envkit.filecache import cached

    try:
        path.stat()
    except FileNotFoundError:  # (a link to nothing yet included: survey writes through it)
        return Site(path=path, partitions={}, missing=True)
    except OSError as exc:  # a symlink loop, a directory it may not enter: not "no site file"
        raise SiteError(path, "", f"cannot be read: {exc.strerror or exc}") from None

    def parse() -> Any:
        from envkit.yamltext import parse_yaml

        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SiteError(path, "", f"cannot be read: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise SiteError(path, "", "is not UTF-8 text (YAML or JSON)") from None
        try:
            return parse_yaml(text)
        except ValueError as exc:
            raise SiteError(path, "", f"not valid YAML or JSON: {exc}") from None

    return site_from_dict(cached(cache_dir, "yaml", [path], ("yamltext.py",), parse), path, cache_dir)


def site_from_dict(data: Any, path: Path, cache_dir: Optional[Path] = None) -> Site:
    # No writer of a site file leaves it empty or without 'partitions' (survey writes both, atomically): such a
    # file is a mistake (a truncated copy, a failed `> site.yaml`), not a site without partitions.
    if data is None:
        raise SiteError(path, "", "is empty", hint=_EMPTY_HINT)
    if not isinstance(data, Mapping):
        raise SiteError(path, "", "expected a mapping with 'version' and 'partitions' keys")
    _no_unknown_keys(data, _TOP_KEYS, path, "")
    version = data.get("version", VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise SiteError(path, "version", f"this envkit reads version {VERSION}, the file says {version!r}")
    if "partitions" not in data:
        raise SiteError(path, "partitions", "missing (a mapping of partition names to their nodes; {} for none)",
                        hint=_EMPTY_HINT)
    raw = data["partitions"]
    if not isinstance(raw, Mapping):
        raise SiteError(path, "partitions",
                        f"expected a mapping of partition names to partitions, got {described(raw)}")
    partitions = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not valid_name(name):
            raise SiteError(path, f"partitions.{name}", not_text(name)
                            or "a partition name is letters, digits, '_', '.', '+', '-'")
        partitions[name] = _partition(name, entry, path, cache_dir)
    return Site(path=path, partitions=partitions)


def _no_unknown_keys(data: Mapping, keys: tuple[str, ...], path: Path, where: str) -> None:
    unknown = sorted(str(key) for key in data if key not in keys)
    if unknown:
        field = f"{where}.{unknown[0]}" if where else unknown[0]
        raise SiteError(path, field, f"unknown key (the keys are: {', '.join(keys)})")


def _partition(name: str, entry: Any, path: Path, cache_dir: Optional[Path]) -> Partition:
    where = f"partitions.{name}"
    if not isinstance(entry, Mapping):
        raise SiteError(path, where, f"expected a mapping with 'nodes', got {described(entry)}")
    _no_unknown_keys(entry, _PARTITION_KEYS, path, where)
    # A partition lists its nodes, or says why it has none (survey writes the error of one it could not reach).
    if "nodes" not in entry and entry.get("error") is None and not entry.get("unreachable"):
        raise SiteError(path, f"{where}.nodes", "missing (a list of the partition's nodes, or an 'error' saying why "
                        "there are none)")
    raw_nodes = entry.get("nodes", [])
    if not isinstance(raw_nodes, list):
        raise SiteError(path, f"{where}.nodes", f"expected a list of nodes, got {described(raw_nodes)}")
    nodes = tuple(_node(item, f"{where}.nodes[{i}]", path, cache_dir) for i, item in enumerate(raw_nodes))
    return Partition(
        name=name, nodes=nodes, surveyed=_surveyed(entry.get("surveyed"), path, f"{where}.surveyed"),
        unreachable=_unreachable(entry.get("unreachable"), path, f"{where}.unreachable"),
        error=_text(entry.get("error"), path, f"{where}.error"),
    )


def _node(item: Any, where: str, path: Path, cache_dir: Optional[Path]) -> SiteNode:
    if not isinstance(item, Mapping):
        raise SiteError(path, where, "expected a mapping with 'profile' or 'profile_file'")
    _no_unknown_keys(item, _NODE_KEYS, path, where)
    node = item.get("node")
    if node is not None and (not isinstance(node, str) or not valid_name(node)):
        raise SiteError(path, f"{where}.node", not_text(node) or "expected a node name (letters, digits, '_', '.', "
                        f"'+', '-', not starting with '-'), got {node!r}")
    count = item.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_NODE_COUNT:
        raise SiteError(path, f"{where}.count", f"expected a whole number of nodes from 1 to {MAX_NODE_COUNT} (more "
                        f"than any cluster has), got {count!r}")
    inline, file = item.get("profile"), item.get("profile_file")
    if (inline is None) == (file is None):
        raise SiteError(path, where, "give either 'profile' (inline) or 'profile_file', exactly one")
    if file is not None:
        if not isinstance(file, str) or not file.strip():
            raise SiteError(path, f"{where}.profile_file", not_text(file) or f"expected a file path, got {file!r}")
        from envkit.files import user_path

        try:
            profile = read_profile(path.parent / user_path(file), cache_dir)
        except ValueError as exc:
            raise SiteError(path, f"{where}.profile_file", f"{file!r} {exc}") from None
        except ProfileError as exc:
            raise SiteError(path, f"{where}.profile_file", exc.message) from None
        return SiteNode(node=node, count=count, profile=profile, profile_file=file)
    origin = f"{path}, {where}.profile"
    try:
        profile = profile_from_dict(inline, origin)
    except ProfileError as exc:
        problem = exc.message.removeprefix(f"machine profile {origin}: ")
        raise SiteError(path, f"{where}.profile", problem) from None
    # What the node said about itself when surveyed (survey writes it; profile_from_dict checked it is text and
    # keeps its own: the GPUs the job hid, which the site does not count).
    profile = profile._replace(notes=(*(inline.get("notes") or ()), *profile.notes))
    return SiteNode(node=node, count=count, profile=profile)


def _surveyed(value: Any, path: Path, where: str) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, _dt.date):  # YAML reads an unquoted timestamp as a datetime, a day as a date (midnight)
        moment = value if isinstance(value, _dt.datetime) else _dt.datetime.combine(value, _dt.time())
    else:
        if not isinstance(value, str):
            raise SiteError(path, where, f"expected an ISO 8601 time like '2026-11-22T17:00:00Z', got {value!r}")
        try:
            moment = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise SiteError(path, where, f"expected an ISO 8601 time like '2026-11-22T17:00:00Z', got {value!r}") \
                from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _unreachable(value: Any, path: Path, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SiteError(path, where, "expected a list of {node, reason}")
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise SiteError(path, f"{where}[{i}]", "expected {node: NAME, reason: TEXT}")
        _no_unknown_keys(entry, ("node", "reason"), path, f"{where}[{i}]")
        for key in ("node", "reason"):
            misread = not_text(entry.get(key))  # a number or true/false: YAML's reading of unquoted text
            if misread or not isinstance(entry.get(key), str):
                raise SiteError(path, f"{where}[{i}]" + (f".{key}" if misread else ""),
                                misread or "expected {node: NAME, reason: TEXT}")
        out.append((entry["node"], entry["reason"]))
    return tuple(out)


def _text(value: Any, path: Path, where: str) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise SiteError(path, where, not_text(value) or f"expected text, got {value!r}")


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
    """The entries ``wanted`` names: by the name `envkit site` shows, or by their Slurm ``node:``. BadInputError
    (exit 2) when it is one entry's shown name and another's node: either reading would be a guess."""
    by_name = [(entry, shown) for entry, shown in entries if shown == wanted]
    by_node = [(entry, shown) for entry, shown in entries if entry.node == wanted]
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
    one the site file does not know)."""
    partition = site.partitions.get(name)
    if partition is None:
        return node
    named = _named(partition, _entries(partition), node)
    return next((entry.node for entry, _ in named if entry.node is not None), node)


def site_to_dict(site: Site, inline_files: bool = False) -> dict[str, Any]:
    """The file form of ``site``, readable again by :func:`load_site`. Profiles that came from a ``profile_file``
    stay references unless ``inline_files`` (a copy written elsewhere, where the relative path would not hold)."""
    partitions: dict[str, Any] = {}
    for name, partition in site.partitions.items():
        entry: dict[str, Any] = {}
        if partition.surveyed is not None:
            entry["surveyed"] = partition.surveyed
        entry["nodes"] = [_node_dict(node, inline_files) for node in partition.nodes]
        if partition.unreachable:
            entry["unreachable"] = [{"node": node, "reason": reason} for node, reason in partition.unreachable]
        if partition.error is not None:
            entry["error"] = partition.error
        partitions[name] = entry
    return {"version": VERSION, "partitions": partitions}


def _node_dict(node: SiteNode, inline_files: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node.node is not None:
        out["node"] = node.node
    out["count"] = node.count
    if node.profile_file is not None and not inline_files:
        out["profile_file"] = node.profile_file
    else:
        out["profile"] = node.profile.to_dict()
    return out


def with_partition(site: Site, partition: Partition) -> Site:
    """``site`` with ``partition`` added or replaced; the other partitions as they were, in their order."""
    partitions = dict(site.partitions)
    partitions[partition.name] = partition
    return replace(site, partitions=partitions, missing=False)


def save_site(site: Site, path: Path) -> None:
    """Write ``site`` to ``path`` atomically (readers see the old file or the new, never half of it)."""
    import yaml  # lazy: only survey writes a site file

    from envkit.errors import EnvkitError
    from envkit.files import real_path, write_atomic

    same_place = real_path(path).parent == real_path(site.path).parent
    text = yaml.safe_dump(site_to_dict(site, inline_files=not same_place), sort_keys=False, allow_unicode=True)
    try:
        write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise EnvkitError(f"cannot write the site file {path}: {exc.strerror or exc}",
                          hint=f"Point ${SITE_VARIABLE} at a file you can write, or ask whoever keeps {path}.") from None
