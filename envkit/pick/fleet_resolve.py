"""Which builds fit a whole fleet, and how to split a fleet that no GPU build fits. Pure functions: no I/O.

- Each distinct configuration is resolved once (envkit.pick.resolve); a build fits the fleet only when it fits every
  configuration. Its reasons name the machines they hold for (``deepten: needs driver CUDA >= 12.1 ...``), and
  ``fails_on`` lists the machines it does not fit.
- Machines without a GPU in a fleet that has GPU machines (a login node, a front-end) do not veto GPU builds: such
  an environment is meant for the GPU machines, and a CUDA build of a framework imports and runs on the CPU there.
  They are still judged for Python, and listed as ``cpu_only``. A fleet of GPU-less machines only is judged as one
  GPU-less machine is: CPU builds.
- Groups, when no GPU build fits every GPU configuration: the fewest groups of configurations such that each group
  has a GPU build fitting all of its machines. This is minimum set cover, solved exactly: the sets are, per GPU
  build, the configurations it fits (only the maximal ones kept); covers of 1, 2, ... sets are tried in order, the
  sets ordered by their best build's rank, so the first cover found is the smallest and prefers newer builds. Each
  configuration goes to the first set of the cover that holds it; each group then gets the newest GPU build that fits
  all of its machines. The configurations no GPU build fits are one more group, with the best build that fits them all
  (a CPU build); a group each when none fits them all. The number of distinct configurations is small (a site has a
  handful), and with more than 16 sets the search falls back to the greedy cover (at most ln(n)+1 times the minimum).
- Platforms: one environment's packages are built for one platform, so a fleet of x86_64 and aarch64 machines (a
  Grace partition beside an x86_64 one, a login node of another CPU) is split by platform first: each platform's
  machines are resolved as a fleet of their own, no build fits the whole fleet, and the groups are each platform's.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, NamedTuple, Optional, Sequence

from envkit.catalog.model import Manifest, Tables
from envkit.machines.fleet import Config, Fleet, names_text, profile_key
from envkit.machines.profile import MachineProfile
from envkit.pick.resolve import Candidate, Request, Resolution, rank, resolve

EXACT_LIMIT = 16  # maximal sets up to which the cover is searched exhaustively


class Group(NamedTuple):
    """Machines that share one build (the newest that fits them all), or None."""

    machines: tuple[str, ...]
    selected: Optional[Candidate]  # the build for this group; None when nothing fits it


class FleetResolution(NamedTuple):
    """A manifest resolved for a fleet: the merged verdicts, where each build fails, and the groups."""

    resolution: Resolution  # merged: a candidate is compatible when it fits every machine
    fails_on: Mapping[str, tuple[str, ...]]  # build id -> the machines it does not fit
    machines: tuple[str, ...]
    cpu_only: tuple[str, ...] = ()  # GPU-less machines in a fleet with GPU machines
    groups: tuple[Group, ...] = ()  # only when no GPU build fits every GPU machine
    per_config: tuple[tuple[MachineProfile, Resolution], ...] = ()  # each distinct configuration's own resolution
    platforms: tuple[str, ...] = ()  # where the fleet's machines are of several platforms: those, split by

    @property
    def manifest(self) -> Manifest:
        return self.resolution.manifest

    @property
    def selected(self) -> Optional[Candidate]:
        return self.resolution.selected

    def resolution_for(self, profile: MachineProfile) -> Optional[Resolution]:
        """The resolution of ``profile`` alone (what resolve gives for it), when it is one of the fleet's
        configurations: the plan of a fleet's environment reuses it instead of resolving that profile again."""
        key = profile_key(profile)
        return next((r for p, r in self.per_config if profile_key(p) == key), None)

    @property
    def split(self) -> bool:
        """Whether the fleet needs more than one environment to use all its GPUs."""
        return len(self.groups) > 1


def resolve_fleet(manifest: Manifest, fleet: Fleet, tables: Tables, request: Request = Request()) -> FleetResolution:
    """The one-machine pick (envkit.pick.resolve) is asked here and only here: each configuration's resolution, then
    its ranking of the verdicts the fleet weighs (the merged verdicts, and the groups' order of preference). Merging
    and grouping below are the fleet's own set logic on what it answered."""
    configs = fleet.configs()
    platforms = tuple(dict.fromkeys(config.profile.platform for config in configs))
    if len(platforms) > 1:
        return _by_platform(manifest, fleet, platforms, tables, request)
    per_config = [resolve(manifest, config.profile, tables, request) for config in configs]
    each = tuple((config.profile, resolution) for config, resolution in zip(configs, per_config))
    if len(configs) == 1:  # one configuration, however many machines: exactly the single-machine answer
        resolution = per_config[0]
        fails = {c.build.id: configs[0].names for c in resolution.incompatible}
        return FleetResolution(resolution, fails, fleet.names, per_config=each)
    gpu = [i for i, config in enumerate(configs) if config.has_gpus]
    judged = gpu if gpu else list(range(len(configs)))
    cpu_only = tuple(name for i, config in enumerate(configs) if i not in judged for name in config.names)
    by_build = [{c.build.id: c for c in r.candidates} for r in per_config]
    merged, fails_on = [], {}
    for build in manifest.builds:
        verdicts = [(configs[i], by_build[i][build.id]) for i in range(len(configs))]
        candidate, failing = _merge(verdicts, judged_ids={id(configs[i]) for i in judged}, gpu_build=build.is_gpu)
        merged.append(candidate)
        if failing:
            fails_on[build.id] = failing
    resolution = Resolution(manifest=manifest, candidates=tuple(rank(merged, has_gpus=bool(gpu))))
    groups: tuple[Group, ...] = ()
    fits_all_gpus = any(c.compatible and c.build.is_gpu for c in merged)
    if len(gpu) > 1 and not fits_all_gpus:
        gpu_resolutions = [per_config[i] for i in gpu]
        # each GPU build's verdict on each GPU configuration it fits, ranked: a build's place is its last there
        fitting = rank([c for r in gpu_resolutions for c in r.candidates if c.compatible and c.build.is_gpu],
                       has_gpus=True)
        order = {c.build.id: place for place, c in enumerate(fitting)}
        groups = _groups([configs[i] for i in gpu], gpu_resolutions, order)
    return FleetResolution(resolution, fails_on, fleet.names, cpu_only, groups, each)


def _by_platform(manifest: Manifest, fleet: Fleet, platforms: tuple[str, ...], tables: Tables, request: Request
                 ) -> FleetResolution:
    """A fleet of several platforms: each platform's machines resolved as a fleet, and their groups together. No
    build fits the whole fleet; each build's reasons say where it fits and where it does not."""
    parts = []
    for platform in platforms:
        machines = tuple(m for m in fleet.machines if m.profile.platform == platform)
        parts.append((platform, machines, resolve_fleet(manifest, Fleet(machines), tables, request)))
    lead = ("one environment's packages are built for one platform, and these machines are of "
            + " and ".join(f"{platform} ({names_text([m.name for m in machines])})"
                           for platform, machines, _ in parts))
    merged, fails_on = [], {}
    for build in manifest.builds:
        reasons, failing, python = [lead], [], None
        for platform, machines, part in parts:
            candidate = next(c for c in part.resolution.candidates if c.build.id == build.id)
            python = python or candidate.python
            names = names_text([m.name for m in machines])
            if candidate.compatible:
                reasons.append(f"{names}: fits ({platform})")
                continue
            failing += part.fails_on.get(build.id, ())
            one = len(part.per_config) == 1  # (a fleet of several configurations names the machines already)
            reasons += [f"{names}: {text}" if one else text for text in candidate.reasons]
        merged.append(Candidate(build, False, None, python, tuple(reasons)))
        fails_on[build.id] = tuple(failing) or fleet.names
    groups: list[Group] = []
    for _, machines, part in parts:
        groups += part.groups or [Group(tuple(m.name for m in machines), part.selected)]
    resolution = Resolution(manifest=manifest, candidates=tuple(merged))
    return FleetResolution(resolution, fails_on, fleet.names, tuple(n for *_, part in parts for n in part.cpu_only),
                           tuple(groups), tuple(pair for *_, part in parts for pair in part.per_config), platforms)


def _merge(verdicts: Sequence[tuple[Config, Candidate]], judged_ids: set[int], gpu_build: bool
           ) -> tuple[Candidate, tuple[str, ...]]:
    """One build's verdicts on every configuration as one candidate, its reasons prefixed by the machines."""
    first = verdicts[0][1]
    failing: list[str] = []
    reasons: dict[str, list[str]] = {}
    natives = []
    for config, candidate in verdicts:
        judged = id(config) in judged_ids or not gpu_build
        if judged and not candidate.compatible:
            failing.extend(config.names)
        if judged:
            natives.append(candidate.native)
    compatible = not failing
    for config, candidate in verdicts:
        judged = id(config) in judged_ids or not gpu_build
        if not judged:
            texts = ["no GPU: the environment runs there on the CPU only"]
        elif compatible or not candidate.compatible:
            texts = list(candidate.reasons)
        else:
            continue  # a machine it fits, beside machines it does not: the failures are the reasons
        for text in texts:
            reasons.setdefault(text, []).extend(config.names)
    native = None if not gpu_build else (False if False in natives else (True if natives else None))
    words = tuple(f"{names_text(names)}: {text}" for text, names in reasons.items())
    return Candidate(first.build, compatible, native, first.python, words), tuple(failing)


def _groups(configs: Sequence[Config], resolutions: Sequence[Resolution], order: Mapping[str, int]
            ) -> tuple[Group, ...]:
    """The fewest groups of GPU configurations, each with a GPU build that fits all of its machines (``order``: the
    GPU builds' places in the one-machine ranking, the best first)."""
    fits: dict[str, frozenset[int]] = {}
    for index, resolution in enumerate(resolutions):
        for candidate in resolution.compatible:
            if candidate.build.is_gpu:
                fits[candidate.build.id] = fits.get(candidate.build.id, frozenset()) | {index}
    # One set per distinct configuration set, named by its best build; only sets no other set contains.
    best: dict[frozenset[int], str] = {}
    for build_id, members in fits.items():
        if members not in best or order[build_id] < order[best[members]]:
            best[members] = build_id
    maximal = sorted((s for s in best if not any(s < other for other in best)), key=lambda s: order[best[s]])
    coverable = frozenset().union(*maximal) if maximal else frozenset()
    cover = _cover(maximal, coverable)
    assigned: list[list[int]] = [[] for _ in cover]
    for index in range(len(configs)):
        home = next((n for n, members in enumerate(cover) if index in members), None)
        if home is not None:
            assigned[home].append(index)
    groups = [_group(configs, resolutions, members) for members in assigned if members]
    # The machines no GPU build fits: one group, with the CPU build that fits them all (one environment serves
    # them; a group each made two of the same build, under one default name); a group each where none fits all.
    uncovered = [i for i in range(len(configs)) if i not in coverable]
    together = _group(configs, resolutions, uncovered) if uncovered else None
    if together is not None and (together.selected is not None or len(uncovered) == 1):
        groups.append(together)
    else:
        groups += [_group(configs, resolutions, [i]) for i in uncovered]
    return tuple(groups)


def _cover(sets: Sequence[frozenset[int]], universe: frozenset[int]) -> list[frozenset[int]]:
    if not universe:
        return []
    if len(sets) <= EXACT_LIMIT:
        for size in range(1, len(sets) + 1):
            for chosen in combinations(sets, size):
                if frozenset().union(*chosen) == universe:
                    return list(chosen)
    left, chosen_sets = set(universe), []
    while left:  # greedy: the set covering most of what is left (the better-ranked one on a tie)
        pick = max(sets, key=lambda s: len(s & left))
        chosen_sets.append(pick)
        left -= pick
    return chosen_sets


def _group(configs: Sequence[Config], resolutions: Sequence[Resolution], members: Sequence[int]) -> Group:
    """The group's machines and the newest build fitting them all (a GPU one first): the first such build in its
    first machine's resolution, which is already in the one-machine ranking's order."""
    names = tuple(name for i in members for name in configs[i].names)
    common = set.intersection(*({c.build.id for c in resolutions[i].compatible} for i in members))
    ranked = resolutions[members[0]].candidates
    return Group(machines=names, selected=next((c for c in ranked if c.build.id in common), None))
