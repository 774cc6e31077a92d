"""The build an environment holds: its own packages, at their exact versions and local labels, as constraints that
no addition can move (docs/lab-user.md, "Add your packages").

What is held is read from the environment as installed: the packages the build names (``torch==2.13.*`` ->
``torch==2.13.0+cu126``), and, following their own requirements, every package one of them pins exactly
(torch's ``triton==3.4.0``, jax's ``jaxlib``, the CUDA libraries of ``jax[cuda12]`` and ``tensorflow[and-cuda]``).
What the held packages ask of their other dependencies (torch's ``sympy>=1.13.3``) is kept as a range, so that an
addition cannot break the framework by moving one of them out of it. In an environment conda made, every Python
package conda installed is held (pip installing over conda's packages is the classic way such environments break).
The framework's own packages that the build does not have (a torch build without torchvision) can come from
nowhere else: any other one would be another build, so they are written as absent.

Pure functions, except :func:`installed`, which reads the environment's ``*.dist-info`` metadata.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple, Optional, Sequence

# Installers' own packages: conda brings them, and holding them would only refuse additions that want a newer one.
_NEVER_HELD = ("pip", "setuptools", "wheel")
CONDA = "conda"


class Dist(NamedTuple):
    """One installed distribution, as its ``*.dist-info`` says."""

    name: str  # as its METADATA writes it
    version: str
    requires: tuple[str, ...]  # its Requires-Dist lines
    installer: str  # what its INSTALLER file says (uv, pip, conda), "" when it has none
    dist_info: Path


class Held(NamedTuple):
    """What an environment holds: each a (name, text) pair, sorted by name."""

    exact: tuple[tuple[str, str], ...]  # (name, installed version): never moved
    ranges: tuple[tuple[str, str], ...]  # (name, specifier): what the held packages ask of their dependencies
    absent: tuple[tuple[str, str], ...]  # (name, why): the framework's packages this build has not: from nowhere

    def names(self) -> set[str]:
        return {normalized(name) for name, _ in (*self.exact, *self.absent)}

    def pins(self) -> list[str]:
        """``torch==2.13.0+cu126``, ... (what the record keeps)."""
        return [f"{name}=={version}" for name, version in self.exact]

    def version_of(self, name: str) -> Optional[str]:
        return next((version for held, version in self.exact if normalized(held) == normalized(name)), None)

    def absent_why(self, name: str) -> Optional[str]:
        return next((why for held, why in self.absent if normalized(held) == normalized(name)), None)


def normalized(name: str) -> str:
    """A project name as PEP 503 normalizes it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def site_packages(prefix: Path) -> Optional[Path]:
    """The environment's ``lib/pythonX.Y/site-packages`` (None when there is not exactly one)."""
    found = [path for path in prefix.glob("lib/python*/site-packages")
             if re.fullmatch(r"python[0-9]+\.[0-9]+", path.parent.name)]
    return found[0] if len(found) == 1 else None


def installed(prefix: Path) -> dict[str, Dist]:
    """Every distribution installed in the environment, by normalized name."""
    where = site_packages(prefix)
    out: dict[str, Dist] = {}
    if where is None:
        return out
    for dist_info in sorted(where.glob("*.dist-info")):
        fields = _metadata(dist_info / "METADATA")
        if "name" not in fields or "version" not in fields:
            continue
        try:
            installer = (dist_info / "INSTALLER").read_text(encoding="utf-8").strip()
        except OSError:
            installer = ""
        out[normalized(fields["name"][0])] = Dist(fields["name"][0], fields["version"][0],
                                                  tuple(fields.get("requires-dist", ())), installer, dist_info)
    return out


def _metadata(path: Path) -> dict[str, list[str]]:
    """The header fields of a METADATA file (up to its first blank line), each with all its values."""
    out: dict[str, list[str]] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t"):
            continue  # a folded continuation (a long License): nothing envkit reads
        key, _, value = line.partition(":")
        out.setdefault(key.strip().lower(), []).append(value.strip())
    return out


def python_version(prefix: Path) -> Optional[str]:
    """The environment's Python as X.Y.Z: pyvenv.cfg's version (a venv), else conda-meta's python record."""
    try:
        for line in (prefix / "pyvenv.cfg").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version_info", "version") and re.fullmatch(r"\d+\.\d+\.\d+.*", value.strip()):
                return re.match(r"\d+\.\d+\.\d+", value.strip())[0]
    except OSError:
        pass
    for record in prefix.glob("conda-meta/python-[0-9]*.json"):
        found = re.match(r"python-(\d+\.\d+\.\d+)", record.name)
        if found:
            return found[1]
    where = site_packages(prefix)
    return f"{where.parent.name[len('python'):]}.0" if where is not None else None


def marker_environment(python: str) -> dict[str, str]:
    """PEP 508's marker variables for an environment of CPython ``python`` (X.Y.Z) on this machine."""
    return {
        "implementation_name": sys.implementation.name, "implementation_version": python,
        "os_name": os.name, "platform_machine": platform.machine(), "platform_release": platform.release(),
        "platform_system": platform.system(), "platform_version": platform.version(),
        "python_full_version": python, "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(python.split(".")[:2]), "sys_platform": sys.platform,
    }


def _applies(marker, environment: Mapping[str, str], extras: Iterable[str]) -> bool:
    if marker is None:
        return True
    return any(marker.evaluate({**environment, "extra": extra}) for extra in ("", *extras))


def _exact(specifier) -> bool:
    return len(specifier) == 1 and next(iter(specifier)).operator in ("==", "===") and \
        "*" not in next(iter(specifier)).version


def held_packages(named: Sequence[str], companions: Sequence[str], present: Mapping[str, Dist],
                  environment: Mapping[str, str], conda: bool = False, framework: str = "") -> Held:
    """What an environment holds (see the module's docstring). ``named``: the requirements the build installs
    (``torch==2.13.*``, ``jax[cuda12]==0.6.*``); ``companions``: the framework's other packages (torchvision,
    torchaudio), absent where neither named nor installed; ``present``: :func:`installed`; ``environment``:
    :func:`marker_environment`; ``conda``: the environment was made by conda, whose Python packages are all held
    (and ``framework``, when conda installed it without Python metadata pip could see, is absent to pip)."""
    from packaging.requirements import InvalidRequirement, Requirement

    pending: list[tuple[str, frozenset[str]]] = []
    absent: dict[str, str] = {}
    for text in named:
        requirement = Requirement(text)
        key = normalized(requirement.name)
        if not _applies(requirement.marker, environment, ()):
            absent[key] = (f"the build leaves {requirement.name} out for Python {environment['python_version']}")
        elif key in present:
            pending.append((key, frozenset(requirement.extras)))
    if conda:
        pending += [(key, frozenset()) for key, dist in present.items()
                    if dist.installer == CONDA and key not in _NEVER_HELD]
        if framework and normalized(framework) not in present:
            absent[normalized(framework)] = f"conda installed {framework} without Python metadata pip can see"
    held: dict[str, set[str]] = {}
    ranges: dict[str, list[str]] = {}
    while pending:
        key, extras = pending.pop()
        if key in held and extras <= held[key]:
            continue
        held.setdefault(key, set()).update(extras)
        for line in present[key].requires:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue  # a dependency that cannot be read constrains nothing envkit can write
            if not _applies(requirement.marker, environment, held[key]):
                continue
            dependency = normalized(requirement.name)
            if _exact(requirement.specifier) and dependency in present:
                pending.append((dependency, frozenset(requirement.extras)))
            elif str(requirement.specifier):
                ranges.setdefault(dependency, []).append(str(requirement.specifier))
    for name in companions:
        key = normalized(name)
        if key not in held and key not in present and key not in absent:
            absent[key] = "the build has none: any other one would be another build"
    exact = sorted((present[key].name, present[key].version) for key in held)
    merged = sorted((key, ",".join(dict.fromkeys(",".join(specs).split(","))))
                    for key, specs in ranges.items() if key not in held)
    return Held(tuple(exact), tuple(merged), tuple(sorted(absent.items())))


def held_of(prefix: Path, named: Sequence[str], companions: Sequence[str], conda: bool, framework: str) -> Held:
    """What the environment at ``prefix`` holds, as installed now (:func:`held_packages`)."""
    environment = marker_environment(python_version(prefix) or "3.0.0")
    return held_packages(named, companions, installed(prefix), environment, conda=conda, framework=framework)


HEADER = "# envkit: the build of this environment is held."


def constraints_text(held: Held, build: str, name: str) -> str:
    """The constraints file every installer of the environment reads: envkit add, pip (its pip.conf) and uv
    (UV_CONSTRAINT, set by envkit run, bin/activate and the modulefiles)."""
    lines = [HEADER,
             f"# {name} is the build {build}: changing it is a new environment (envkit create).",
             "# envkit writes this file; docs/lab-user.md, \"Add your packages\", says how it holds and where it "
             "cannot.",
             "# The build's own packages, at their exact versions:"]
    lines += [f"{name_}=={version}" for name_, version in held.exact]
    if held.ranges:
        lines.append("# What they ask of their dependencies:")
        lines += [f"{name_}{spec}" for name_, spec in held.ranges]
    if held.absent:
        lines.append("# The framework's packages this build has not (no version can come from elsewhere):")
        for name_, why in held.absent:
            lines += [f"# {name_}: {why}", f"{name_}<0"]
    return "\n".join(lines) + "\n"


def read_constraints(text: str) -> Held:
    """The Held a constraints file of :func:`constraints_text` states (comments give the absent ones' reasons)."""
    exact, ranges, absent = [], [], []
    why = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            name, colon, rest = line[1:].strip().partition(": ")
            why = rest if colon and re.fullmatch(r"[A-Za-z0-9._-]+", name) else ""
            continue
        found = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)", line)
        if not found:
            continue
        name, spec = found[1], found[2].strip()
        if spec == "<0":
            absent.append((name, why or "the build has none"))
        elif spec.startswith("==") and "," not in spec and "*" not in spec:
            exact.append((name, spec[2:]))
        elif spec:
            ranges.append((name, spec))
    return Held(tuple(exact), tuple(ranges), tuple(absent))


def moved(held: Held, present: Mapping[str, Dist]) -> list[str]:
    """The held packages that are not installed at their held version any more (changed outside envkit)."""
    out = []
    for name, version in held.exact:
        dist = present.get(normalized(name))
        if dist is None or dist.version != version:
            out.append(f"{name} is {dist.version if dist else 'not installed'}, not {version}")
    return out
