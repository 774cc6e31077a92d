"""Why an addition cannot be installed beside the held build, read from the installer's own explanation (pure).

uv says ``Because oldtorch>=1.0 depends on torch==2.7.0 and torch==2.13.0+cu126, ...`` (``all versions of X``,
``X==1.0``, ``X<=0.9``), pip ``oldtorch 1.0 depends on torch==2.7.0`` under "The conflict is caused by". Either
names the package, the requirement it has, and a package the build holds: that is the refusal's sentence.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Sequence

from envkit.backends.held import Held, normalized
from envkit.errors import EnvkitError

# Pattern strings, compiled by re when first matched (a refusal), not when every `envkit add` imports this module.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_UV = (rf"(?P<all>all versions of )?(?P<pkg>{_NAME})(?P<which>(?:===|[=!<>~]=|[<>])[^\s,]+)? depends? on "
       rf"(?P<dep>{_NAME})(?P<spec>(?:===|[=!<>~]=|[<>])[^\s,]+)?")
_PIP = rf"^\s*(?P<pkg>{_NAME}) (?P<version>\S+) depends on (?P<dep>{_NAME})(?P<spec>\S*)"
_UNSATISFIABLE = ("No solution found when resolving dependencies", "ResolutionImpossible",
                  "conflicting dependencies")


class Clash(NamedTuple):
    package: str  # as the installer named it, with the releases meant ("oldtorch>=1.0", "oldtorch 1.0")
    project: str  # its name alone
    requirement: str  # "torch==2.7.0"; "torchvision" (any) for a package the build has not
    held: str  # what the environment holds of it: "torch 2.13.0+cu126", or why it has none
    needed_by: Optional[str] = None  # the requested package that needs ``project``, when it is not one itself

    def sentence(self, build: str) -> str:
        who = f"{self.package} (needed by {self.needed_by})" if self.needed_by else self.package
        return f"{who} needs {self.requirement}, and this environment is {self.held} (the build {build})"


class Refused(EnvkitError):
    """Packages that cannot be installed without moving the build: refused, nothing changed (exit 1)."""

    def __init__(self, message: str, clash: Optional[Clash], tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.clash = clash
        self.tail = tuple(tail)


def refusal(lines: Sequence[str], held: Held, requested: Sequence[str], build: str, what: str,
            outcome: str = "nothing was changed") -> Refused:
    """The refusal of ``what`` (the packages, in words) from the installer's explanation ``lines``; ``outcome``:
    what became of the environment, in words."""
    clash = find_clash(lines, held, requested)
    if clash is not None:
        return Refused(f"{clash.sentence(build)}: {outcome}", clash, lines[-25:])
    return Refused(f"{what} cannot be installed beside the build {build} (the installer's lines above say why): "
                   f"{outcome}", None, lines[-25:])


def unsatisfiable(lines: Sequence[str]) -> bool:
    """Whether the installer gave up because no set of versions fits (not the network, not a missing file)."""
    return any(marker in line for line in lines for marker in _UNSATISFIABLE)


def find_clash(lines: Sequence[str], held: Held, requested: Sequence[str] = ()) -> Optional[Clash]:
    """The first requirement the installer reports against a package the build holds (exactly, as a range, or
    as absent), preferring the newest releases of the package named; None when none is reported."""
    text = "\n".join(lines)
    found: list[tuple[int, Clash]] = []
    for match in [*(m for line in lines if (m := re.match(_PIP, line))), *re.finditer(_UV, text)]:
        held_as = _held_as(match["dep"], match["spec"] or "", held)
        if held_as is None or normalized(match["pkg"]) in held.names() or re.fullmatch(r"[0-9.]+", match["pkg"]):
            continue  # (pip's "oldtorch 1.0 depends on": uv's reading would take "1.0" for the package)
        groups = match.groupdict()
        if groups.get("version"):
            package = f"{match['pkg']} {groups['version']}"
        elif groups.get("all"):
            package = f"every release of {match['pkg']}"
        else:
            package = f"{match['pkg']}{groups.get('which') or ''}"
        older = "<" in (groups.get("which") or "")  # uv's "X<=0.9": an older release; the newest one says more
        needs = match["dep"] if held.absent_why(match["dep"]) is not None else f"{match['dep']}{match['spec'] or ''}"
        clash = Clash(package, match["pkg"], needs, held_as)
        found.append((int(older), clash))
    if not found:
        return None
    clash = min(found, key=lambda pair: pair[0])[1]
    wanted = {normalized(name) for name in requested}
    if wanted and normalized(clash.project) not in wanted:
        chain = re.search(rf"(?:all versions of )?({_NAME})\S* depends? on {re.escape(clash.project)}\b", text)
        head = chain[1] if chain and normalized(chain[1]) in wanted else next(iter(requested), None)
        clash = clash._replace(needed_by=head)
    return clash


def _held_as(dependency: str, spec: str, held: Held) -> Optional[str]:
    """How the environment holds ``dependency`` in words, when it does and ``spec`` is not what it holds."""
    version = held.version_of(dependency)
    if version is not None:
        return None if _allows(spec, version) else f"{dependency} {version}"
    why = held.absent_why(dependency)
    if why is not None:
        return f"without {dependency} ({why})"
    for name, ranges in held.ranges:
        if normalized(name) == normalized(dependency) and spec != ranges:
            return f"held to {name}{ranges} by the build's own packages"
    return None


def _allows(spec: str, version: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False
