"""Wheels already on this machine (the image's /opt/pypi simple pages and /opt/wheels): the distributions a test
needs, with their dependency closure, found without the network; skipped by the tests that need them when absent."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Iterator, Sequence
from email.message import Message
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, sys_tags
from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from support.wheels import read_wheel_metadata

SIMPLE_DIRS = (Path("/opt/pypi/simple"), Path("/opt/pypi-more/simple"))
WHEEL_DIRS = (Path("/opt/wheels"),)


class MissingDistributionError(LookupError):
    """A project the caller needs has no wheel on this machine that this interpreter can install."""


def local_distribution_files(
    names: Iterable[str],
    *,
    simple_dirs: Sequence[Path] = SIMPLE_DIRS,
    wheel_dirs: Sequence[Path] = WHEEL_DIRS,
) -> list[Path]:
    """Every wheel on disk for the projects `names` that the running interpreter can install.

    Looks in static PEP 503 trees (<dir>/<project>/index.html with hrefs relative to the page) and in flat wheel
    directories. Raises MissingDistributionError naming every project that has none.
    """
    found: dict[Path, None] = {}
    missing = []
    for name in names:
        wheels = _installable(_candidates(canonicalize_name(name), simple_dirs, wheel_dirs))
        if not wheels:
            missing.append(name)
        found.update(dict.fromkeys(wheels))
    if missing:
        searched = ", ".join(str(d) for d in (*simple_dirs, *wheel_dirs))
        raise MissingDistributionError(
            f"no wheel installable by Python {sys.version_info.major}.{sys.version_info.minor} "
            f"for {', '.join(missing)} in {searched}"
        )
    return list(found)


def _candidates(project: NormalizedName, simple_dirs: Sequence[Path], wheel_dirs: Sequence[Path]) -> Iterator[Path]:
    for simple in simple_dirs:
        page = simple / project / "index.html"
        if page.is_file():
            yield from _linked_files(page)
    for directory in wheel_dirs:
        if directory.is_dir():
            yield from (w for w in sorted(directory.glob("*.whl")) if _project_of(w) == project)


def _linked_files(page: Path) -> Iterator[Path]:
    """The local files a static simple page links to (hrefs relative to the page, or file: URLs)."""
    parser = _LinkParser()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    for href in parser.hrefs:
        url = urlsplit(href)
        if url.scheme == "file":
            yield Path(url2pathname(url.path))
        elif not url.scheme and not url.netloc:
            yield (page.parent / url2pathname(url.path)).resolve()


class _LinkParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def _project_of(wheel: Path) -> NormalizedName | None:
    try:
        return parse_wheel_filename(wheel.name)[0]
    except ValueError:
        return None


def _installable(paths: Iterable[Path]) -> list[Path]:
    """Existing wheels whose tags this interpreter supports and whose Requires-Python it satisfies, deduplicated."""
    supported = _supported_tags()
    python = Version(".".join(map(str, sys.version_info[:3])))
    result: dict[Path, None] = {}
    for path in paths:
        if path.suffix != ".whl" or not path.is_file() or _project_of(path) is None:
            continue
        if supported.isdisjoint(parse_wheel_filename(path.name)[3]):
            continue
        requires_python = read_wheel_metadata(path).get("Requires-Python")
        if requires_python and not SpecifierSet(requires_python).contains(python, prereleases=True):
            continue
        result[path] = None
    return list(result)


@functools.lru_cache(maxsize=1)
def _supported_tags() -> frozenset[Tag]:
    return frozenset(sys_tags())


# --------------------------------------------------------------------------------------------------------------
# The real PyTorch CPU wheel and what it needs


def find_torch_cpu_wheel(wheel_dirs: Sequence[Path] = WHEEL_DIRS) -> Path | None:
    """The newest torch wheel with local version +cpu in `wheel_dirs` that this interpreter can install."""
    wheels = [
        w
        for directory in wheel_dirs
        if directory.is_dir()
        for w in _installable(directory.glob("torch-*.whl"))
        if parse_wheel_filename(w.name)[1].local == "cpu"
    ]
    return max(wheels, key=lambda w: parse_wheel_filename(w.name)[1], default=None)


def torch_cpu_dependencies(
    torch_wheel: Path | None = None,
    *,
    simple_dirs: Sequence[Path] = SIMPLE_DIRS,
    wheel_dirs: Sequence[Path] = WHEEL_DIRS,
) -> list[NormalizedName]:
    """The projects the torch CPU wheel needs on this interpreter, from its own METADATA, recursively."""
    wheel = torch_wheel or find_torch_cpu_wheel(wheel_dirs)
    if wheel is None:
        searched = ", ".join(map(str, wheel_dirs))
        raise MissingDistributionError(f"no torch +cpu wheel for this interpreter in {searched}")
    return dependency_closure(wheel, simple_dirs=simple_dirs, wheel_dirs=wheel_dirs)


def dependency_closure(
    wheel: Path,
    *,
    simple_dirs: Sequence[Path] = SIMPLE_DIRS,
    wheel_dirs: Sequence[Path] = WHEEL_DIRS,
) -> list[NormalizedName]:
    """Sorted names of every project `wheel` needs, transitively, with markers evaluated for this interpreter.

    A dependency's own requirements come from all of its local wheels (a superset when it has several versions),
    so serving the result's local_distribution_files gives the resolver everything it could pick.
    """
    root = parse_wheel_filename(wheel.name)[0]
    wanted: dict[NormalizedName, set[str]] = {}
    pending = _requirements(read_wheel_metadata(wheel), frozenset())
    while pending:
        requirement = pending.pop()
        project = canonicalize_name(requirement.name)
        new_extras = set(requirement.extras) - wanted.get(project, set())
        if project == root or (project in wanted and not new_extras):
            continue  # a cycle back to the start, or a project already followed with these extras
        extras = wanted.setdefault(project, set())
        extras |= new_extras
        for path in local_distribution_files([project], simple_dirs=simple_dirs, wheel_dirs=wheel_dirs):
            pending += _requirements(read_wheel_metadata(path), frozenset(extras))
    return sorted(wanted)


def _requirements(metadata: Message, extras: frozenset[str]) -> list[Requirement]:
    """Requires-Dist entries that apply to this interpreter with the given extras requested."""
    result = []
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in {"", *extras}):
            result.append(requirement)
    return result
