"""A fleet: the machines an environment is for (several profile files, a directory of them, a site partition).

Low in the layers, beside profile.py: a fleet is a tuple of named profiles. Identical profiles are judged once, so
machines are grouped by the facts resolution looks at (:func:`profile_key`: the driver, its CUDA, the C library, the
platform and a Jetson's L4T release, every GPU's name and architecture; not the name, not where the facts came from, not
the GPUs' memory, which a node reports a little differently with ECC or MIG settings). A machine's name is its profile's
``name``, else its file's name (without the suffix).

Reading profiles is the only I/O here (:func:`load_profiles`); everything else is pure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Hashable, NamedTuple, Optional, Sequence

from envkit.errors import ProfileError
from envkit.machines.profile import MachineProfile
from envkit.text.words import counted

PROFILE_SUFFIXES = (".yaml", ".yml", ".json")
THIS_MACHINE = "this machine"  # the name of the detected machine when its profile gives none


class Machine(NamedTuple):
    """A named machine of a fleet, and the profile file it came from."""

    name: str
    profile: MachineProfile
    file: Optional[str] = None  # the profile file it was read from, if any
    nodes: int = 1  # how many nodes it stands for: a site file entry's ``count`` (envkit.site), else 1


class Config(NamedTuple):
    """One distinct machine configuration of a fleet and the machines that share it."""

    profile: MachineProfile  # the first machine's, named after it
    machines: tuple[Machine, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.machines)

    @property
    def has_gpus(self) -> bool:
        return bool(self.profile.gpus)

    @property
    def node_count(self) -> int:
        return sum(m.nodes for m in self.machines)


class Fleet(NamedTuple):
    """The machines a command resolves for: this one, or the profiles and partition named."""

    machines: tuple[Machine, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.machines)

    @property
    def node_count(self) -> int:
        """The nodes its machines stand for: more than the machines where a site file entry stands for several."""
        return sum(m.nodes for m in self.machines)

    @property
    def counts_nodes(self) -> bool:
        """Whether it is counted in nodes, not machines: a site file entry in it stands for several (its count)."""
        return self.node_count != len(self.machines)

    @property
    def single(self) -> Optional[MachineProfile]:
        """The one machine's profile when the fleet is one machine."""
        return self.machines[0].profile if len(self.machines) == 1 else None

    def configs(self) -> tuple[Config, ...]:
        """The distinct configurations, in the order their first machine comes."""
        return distinct(self.machines)

    def planning_profile(self) -> MachineProfile:
        """The profile one environment for every machine is planned with: the one machine's, else that of the GPU
        machine whose driver supports the lowest CUDA (a conda solve must hold there too)."""
        if self.single is not None:
            return self.single
        configs = [c for c in self.configs() if c.has_gpus] or list(self.configs())
        return min(configs, key=lambda c: tuple(c.profile.cuda_driver or (0, 0))).profile


def profile_key(profile: MachineProfile) -> Hashable:
    """The facts resolution looks at; equal keys resolve the same way."""
    return (
        str(profile.cuda_driver) if profile.cuda_driver else None,
        str(profile.driver_version) if profile.driver_version else None,
        profile.libc,
        profile.platform,
        str(profile.l4t) if profile.l4t else None,
        tuple((g.name, str(g.compute_capability) if g.compute_capability else None) for g in profile.gpus),
        str(profile.amdgpu) if profile.amdgpu else None,  # (AMD GPUs: an AMD GPU's target is its arch)
        tuple(g.gfx for g in profile.gpus if g.is_amd),
    )


def distinct(machines: Sequence[Machine]) -> tuple[Config, ...]:
    groups: dict[Hashable, list[Machine]] = {}
    for machine in machines:
        groups.setdefault(profile_key(machine.profile), []).append(machine)
    return tuple(Config(profile=group[0].profile._replace(name=group[0].name), machines=tuple(group))
                 for group in groups.values())


def fleet_of(machines: Sequence[Machine]) -> Fleet:
    """A fleet with unique names: the same machine given twice counts once (as the most nodes it was said to stand
    for); two different machines that share a name are told apart by their files. A machine without a file (a site
    file's node, which ``--partition NAME:NODE`` selects by its name) keeps its name: the one with a file gives way."""
    where: dict[str, int] = {}  # name -> position in out
    out: list[Machine] = []
    for machine in machines:
        if machine.name in where:
            position = where[machine.name]
            first = out[position]
            if profile_key(first.profile) == profile_key(machine.profile):
                out[position] = first._replace(nodes=max(first.nodes, machine.nodes))
                continue
            if first.file and not machine.file:
                out[position] = _labelled(first, first.file)
                where[out[position].name] = position
            else:
                machine = _labelled(machine, machine.file or str(len(out) + 1))
        where[machine.name] = len(out)
        out.append(machine)
    return Fleet(tuple(out))


def _labelled(machine: Machine, label: str) -> Machine:
    name = f"{machine.name} ({label})"
    return machine._replace(name=name, profile=machine.profile._replace(name=name))


def named(profile: MachineProfile, fallback: str, file: Optional[str] = None, nodes: int = 1) -> Machine:
    name = profile.name or fallback
    return Machine(name=name, profile=profile._replace(name=name), file=file, nodes=nodes)


def profile_files(path: Path) -> list[Path]:
    """A profile file as it is, or every ``*.yaml``/``*.yml``/``*.json`` in a directory (sorted); a directory
    with none is an error (exit 2)."""
    if not path.is_dir():
        return [path]
    try:
        files = sorted(p for p in path.iterdir() if p.suffix in PROFILE_SUFFIXES and p.is_file())
    except OSError as exc:
        raise ProfileError(f"cannot read the profile directory {path}: {exc.strerror or exc}") from None
    if not files:
        raise ProfileError(f"the directory {path} holds no machine profiles (*.yaml or *.json files)",
                           hint="Save one per machine there with `envkit detect --json > NAME.json`.")
    return files


def load_profiles(paths: Sequence[Path], cache_dir: Optional[Path] = None) -> list[Machine]:
    """The machines in profile files and directories of them. A broken file is an error naming it (exit 2). A
    directory's profiles are parsed together and cached as one entry (envkit.state.filecache), so a warm run over
    hundreds of nodes reads one cache file and stats each profile."""
    machines: list[Machine] = []
    for path in paths:
        files = profile_files(path)
        if path.is_dir():
            machines.extend(_directory(files, cache_dir))
        else:
            machines.append(_one(files[0], cache_dir))
    return machines


def _one(path: Path, cache_dir: Optional[Path]) -> Machine:
    from envkit.machines.profile import read_profile

    return named(read_profile(path, cache_dir), path.stem, str(path))


def _directory(files: list[Path], cache_dir: Optional[Path]) -> list[Machine]:
    from envkit.state.filecache import cached

    def parse() -> list[Machine]:
        return [_one(path, None) for path in files]

    # The cache keys each file by its path as given, which the machines keep (the commands envkit prints name them):
    # a path spelled from another directory, or through a link, is another entry.
    return cached(cache_dir, "profiles", files, PROFILES_CODE, parse)


# The code that makes a directory's Machines from its files: every envkit module that loading them imports, the
# cache's own included (tests/test_filecache.py checks), so that a fix to any of them is a miss.
PROFILES_CODE = ("machines/__init__.py", "machines/fleet.py", "machines/profile.py", "machines/platforms.py",
                 "machines/amd.py", "versions.py", "errors.py",
                 "state/__init__.py", "state/yamltext.py", "state/filecache.py", "state/files.py", "text/__init__.py",
                 "text/words.py", "text/terminal.py", "text/jsonout.py")


def size_text(fleet: Fleet) -> str:
    """How many machines ``fleet`` is, in words: "4 machines", or "11 nodes" where a site file entry stands for
    several nodes (its ``count``)."""
    if fleet.counts_nodes:
        return counted(fleet.node_count, "node")
    return counted(len(fleet.machines), "machine")


def names_text(names: Sequence[str], most: int = 4) -> str:
    """Machine names for a sentence: all of a few, the first ones and a count of many."""
    if len(names) <= most:
        return ", ".join(names)
    return f"{', '.join(names[:most - 1])} and {len(names) - most + 1} more"


def fleet_json(fleet: Fleet) -> list[dict[str, Any]]:
    """The machines judged, each as commands print it (with the GPUs hidden from this process), its file and the
    nodes it stands for."""
    return [{**m.profile.seen_dict(), "name": m.name, "file": m.file, "nodes": m.nodes} for m in fleet.machines]
