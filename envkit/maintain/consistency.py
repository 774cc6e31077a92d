"""Consistency checks the schema alone cannot make: across builds, manifests and the tables. Pure functions.

- a Python range that claims Pythons python.yaml does not list (or has no upper bound);
- a build id used by two manifests;
- a CUDA major with GPU builds but no min_compute_capability row in cuda.yaml (its arch lists cannot be checked),
  and cuda.yaml rows that contradict each other (a newer toolkit needing an older driver, a compatibility floor or
  architecture row for a CUDA major without any driver row);
- companion packages (torchvision, torchaudio) pinned to a line the manifest's ``companions`` rule does not pair
  with the framework's version (the rule is data, in the manifest: see envs/README.md).

The per-build checks (a CUDA without a driver row, SASS below what the toolkit builds for, a range that admits no
Python, duplicate ids within a manifest) are the catalog's own and come from its loader.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Optional

from envkit.catalog.model import Build, Manifest, Tables
from envkit.maintain.problems import Problem, SourceFile

# Pythons looked at when a range is judged: 3.0 to 3.99 (a range open at the top admits 3.99).
_MINORS = range(0, 100)


def check_consistency(
    tables: Tables, manifests: Mapping[str, Manifest], sources: Mapping[str, SourceFile]
) -> list[Problem]:
    problems: list[Problem] = []
    problems += _cuda_table(tables, sources.get("cuda.yaml"))
    problems += _architecture_rows(tables, manifests, sources)
    problems += _duplicate_ids(manifests, sources)
    for manifest in manifests.values():
        source = sources.get(f"{manifest.name}.yaml")
        problems += _python_ranges(manifest, tables, source)
        problems += _companions(manifest, source, tables.python.versions)
    return problems


def _problem(source: Optional[SourceFile], manifest: Optional[str], build: Optional[str], field: Optional[str],
             message: str) -> Problem:
    from envkit.maintain.yamlmarks import line_in_build

    if source is None:
        return Problem("", None, build, field, message)
    line = line_in_build(source.tree, source.data, manifest or "", build, field)
    return Problem(str(source.path), line, build, field, message)


# --- cuda.yaml ----------------------------------------------------------------------------------------------------

def _cuda_table(tables: Tables, source: Optional[SourceFile]) -> list[Problem]:
    table = tables.cuda
    problems = []
    ordered = sorted(table.min_driver.items())
    for (older, older_driver), (newer, newer_driver) in zip(ordered, ordered[1:]):
        if newer_driver < older_driver:
            problems.append(_problem(source, None, None, f"min_driver.{newer}",
                                     f"CUDA {newer} needs driver {newer_driver}, older than CUDA {older}'s "
                                     f"{older_driver}: a newer toolkit never needs an older driver"))
    majors = {cuda.major for cuda in table.min_driver}
    for key, rows in (("minor_version_compatibility", table.minor_compat_floor),
                      ("min_compute_capability", table.min_compute_capability)):
        for major in sorted(set(rows) - majors):
            problems.append(_problem(source, None, None, f"{key}.{major}",
                                     f"CUDA {major} has no row in min_driver: add its toolkits' driver versions"))
    return problems


def _architecture_rows(tables: Tables, manifests: Mapping[str, Manifest],
                       sources: Mapping[str, SourceFile]) -> list[Problem]:
    """One problem per CUDA major that GPU builds target but min_compute_capability has no row for."""
    known = tables.cuda.min_compute_capability
    unchecked: dict[int, list[str]] = {}
    for manifest in manifests.values():
        for build in manifest.builds:
            if build.cuda is not None and build.cuda.major not in known:
                unchecked.setdefault(build.cuda.major, []).append(build.id)
    problems = []
    for major, builds in sorted(unchecked.items()):
        named = ", ".join(builds[:3]) + (f" and {len(builds) - 3} more" if len(builds) > 3 else "")
        problems.append(_problem(
            sources.get("cuda.yaml"), None, None, "min_compute_capability",
            f"no row for CUDA {major}, so the arch lists of {named} cannot be checked: add the oldest architecture "
            f"CUDA {major} builds for"))
    return problems


# --- across manifests ---------------------------------------------------------------------------------------------

def _duplicate_ids(manifests: Mapping[str, Manifest], sources: Mapping[str, SourceFile]) -> list[Problem]:
    owner: dict[str, str] = {}
    problems = []
    for manifest in manifests.values():
        for build in manifest.builds:
            first = owner.setdefault(build.id, manifest.name)
            if first != manifest.name:
                problems.append(_problem(sources.get(f"{manifest.name}.yaml"), manifest.name, build.id, "id",
                                         f"the build id {build.id!r} is also a build of {first}.yaml: "
                                         "give one of them an id of its own"))
    return problems


# --- Python ranges ------------------------------------------------------------------------------------------------

def _python_ranges(manifest: Manifest, tables: Tables, source: Optional[SourceFile]) -> list[Problem]:
    from packaging.version import Version

    listed = set(tables.python.versions)
    problems = []
    for build in manifest.builds:
        claimed = [Version(f"3.{minor}") for minor in _MINORS if build.python.contains(Version(f"3.{minor}"))]
        unknown = [v for v in claimed if v not in listed]
        if not unknown:
            continue
        owner, field = _written_at(build, source, "python")
        if Version("3.99") in unknown:
            newer = [v for v in unknown if v > max(listed)]
            message = (f"{str(build.python)!r} admits every Python from {newer[0]} up, beyond python.yaml: bound it "
                       "by the newest Python with packages (<3.N)")
        else:
            message = (f"{str(build.python)!r} claims Python {', '.join(str(v) for v in unknown)}, which python.yaml "
                       "does not list: add it there, or narrow the range")
        problems.append(_problem(source, manifest.name, owner, field, message))
    return problems


def _written_at(build: Build, source: Optional[SourceFile], *keys: str) -> tuple[Optional[str], str]:
    """(build id, field) of where a build's setting is written: in the build itself (build id, "pip.packages"),
    else in its release (None, "releases[3].pip.packages"), else in the manifest (None, "pip.packages")."""
    from envkit.maintain.yamlmarks import build_path

    field = ".".join(keys)
    where = build_path(source.data, build.manifest, build.id) if source is not None else None
    if where is None:
        return build.id, field
    release = where.split(".")[0]
    for owner, path in ((build.id, where), (None, release)):
        data = _at(source.data, path)
        for key in keys:
            data = data.get(key) if isinstance(data, dict) else None
        if data is not None:
            return owner, field if owner else f"{release}.{field}"
    return None, field


def _at(data: Any, where: str) -> Any:
    for part in re.findall(r"[^.\[\]]+|\[[0-9]+\]", where):
        data = data[int(part[1:-1])] if part.startswith("[") else data[part]
    return data


# --- companion packages -------------------------------------------------------------------------------------------

def _companions(manifest: Manifest, source: Optional[SourceFile], pythons: Iterable[Any] = ()) -> list[Problem]:
    """Each build's companion pins against the manifest's rule: ``companions: {package: [rule, ...]}``, each rule
    ``{framework: "<range>", version: "X.Y"}`` or ``{framework: "<range>", major: M, minor_offset: K}`` (the
    companion's line is M.(framework minor + K)), with an optional ``python: "<range>"``, the Pythons that line
    publishes wheels for: a build claiming a Python of python.yaml (``pythons``) outside it must leave the companion
    out there (an environment marker on its pin), so that whatever Python is asked, the build installs."""
    data = source.data if source is not None else None
    raw = data.get("companions") if isinstance(data, dict) else None
    if raw is None:
        return []
    rules, problems = _parse_rules(raw, source)
    for build in manifest.builds:
        for position, requirement in enumerate(build.pip.packages if build.pip else ()):
            package, line = _pinned_line(requirement)
            if package not in rules or line is None:
                continue
            owner, field = _written_at(build, source, "pip", "packages")
            rule = _rule_for(rules[package], build)
            expected = _target(rule, build) if rule is not None else None
            if expected is not None and expected != line:
                problems.append(_problem(
                    source, manifest.name, owner, f"{field}[{position}]",
                    f"{requirement!r} does not pair with {manifest.name} {build.version}: the companions rule "
                    f"gives {package} {expected}"))
            elif rule is not None and rule[2] is not None:
                problem = _companion_pythons(requirement, package, line, rule[2], build, pythons)
                if problem:
                    problems.append(_problem(source, manifest.name, owner, f"{field}[{position}]", problem))
    return problems


def _companion_pythons(requirement: str, package: str, line: str, published: Any, build: Build,
                       pythons: Iterable[Any]) -> Optional[str]:
    """Why a companion pin cannot install for a Python its build claims, or None. ``published``: the Pythons the
    companion's line has wheels for (its rule's ``python``). A pin whose environment marker leaves those Pythons
    out (``torchaudio==2.11.* ; python_version < "3.15"``) installs without the companion there."""
    from packaging.requirements import Requirement

    claimed = [v for v in pythons if build.python.contains(v)]
    if claimed and not any(published.contains(v) for v in claimed):
        return (f"{package} {line} publishes Python {published}, none of the Pythons {build.id} claims "
                f"({', '.join(str(v) for v in claimed)}): the companions rule's python range excludes them all")
    marker = Requirement(requirement).marker
    lacking = [v for v in claimed if not published.contains(v)
               and (marker is None or marker.evaluate({"python_version": str(v), "python_full_version": f"{v}.0"}))]
    if not lacking:
        return None
    which = ", ".join(str(v) for v in lacking)
    served = [v for v in claimed if v not in lacking]
    pin = requirement.split(";")[0].strip()
    if served and min(lacking) > max(served):
        marker_text = f"'{pin} ; python_version < \"{min(lacking)}\"'"
    elif served and max(lacking) < min(served):
        marker_text = f"'{pin} ; python_version >= \"{min(served)}\"'"
    else:
        marker_text = "on python_version"
    return (f"{package} {line} has no wheel for Python {which}, which {build.id} claims: leave it out there with an "
            f"environment marker ({marker_text}, and say so in the build's notes) or narrow the build's python")


def _parse_rules(raw: Any, source: Optional[SourceFile]
                 ) -> tuple[dict[str, list[tuple[Any, str, Any]]], list[Problem]]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    def bad(field: str, message: str) -> Problem:
        return _problem(source, None, None, field, message)

    if not isinstance(raw, dict):
        return {}, [bad("companions", "expected a mapping of package name -> list of rules")]
    rules: dict[str, list[tuple[Any, str, Any]]] = {}
    problems = []
    for package, entries in raw.items():
        if not isinstance(entries, list):
            problems.append(bad(f"companions.{package}", "expected a list of rules"))
            continue
        for position, entry in enumerate(entries):
            field = f"companions.{package}[{position}]"
            if not isinstance(entry, dict) or set(entry) - {"framework", "version", "major", "minor_offset", "python"}:
                problems.append(bad(field, "a rule is {framework: RANGE, version: X.Y} or "
                                           "{framework: RANGE, major: M, minor_offset: K}, and may add python: RANGE"))
                continue
            try:
                when = SpecifierSet(str(entry.get("framework", "")))
            except InvalidSpecifier:
                problems.append(bad(f"{field}.framework", f"{entry.get('framework')!r} is not a version range"))
                continue
            published = None
            if "python" in entry:
                try:
                    published = SpecifierSet(str(entry["python"]))
                except InvalidSpecifier:
                    problems.append(bad(f"{field}.python", f"{entry['python']!r} is not a Python range like "
                                                           "'>=3.10,<3.15'"))
                    continue
            if isinstance(entry.get("version"), str) and re.fullmatch(r"[0-9]+\.[0-9]+", entry["version"]):
                rules.setdefault(str(package), []).append((when, entry["version"], published))
            elif isinstance(entry.get("major"), int) and isinstance(entry.get("minor_offset"), int):
                rules.setdefault(str(package), []).append((when, f"{entry['major']}+{entry['minor_offset']}",
                                                           published))
            else:
                problems.append(bad(field, "give version: \"X.Y\" (quoted), or major and minor_offset (numbers)"))
    return rules, problems


def _rule_for(rules: Iterable[tuple[Any, str, Any]], build: Build) -> Optional[tuple[Any, str, Any]]:
    """The first rule whose framework range holds the build's version."""
    return next((rule for rule in rules if rule[0].contains(build.version, prereleases=True)), None)


def _target(rule: tuple[Any, str, Any], build: Build) -> str:
    """The companion line a rule gives the build: its fixed X.Y, or M.(framework minor + K)."""
    target = rule[1]
    if "+" not in target:
        return target
    major, offset = target.split("+")
    return f"{major}.{build.version.minor + int(offset)}"


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([0-9]+)\.([0-9]+)(?:[.*+].*)?$")


def _pinned_line(requirement: str) -> tuple[Optional[str], Optional[str]]:
    """('torchvision', '0.29') from 'torchvision==0.29.*' or 'torchvision==0.29.1+cu126'; (name, None) otherwise."""
    match = _PIN.match(requirement.strip())
    if match is None:
        name = re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
        return (name.group(0).lower() if name else None), None
    return match.group(1).lower(), f"{match.group(2)}.{match.group(3)}"
