"""What the indexes offer that the manifests do not: a newer release line of a framework's package on the index
its builds use, and (for indexes laid out per CUDA variant, ``.../whl/{variant}``) variants no build uses.

Neither is an error: the check lists them under "not in the manifests" so that an admin knows a release is due.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from envkit.catalog.model import Build, Catalog
from envkit.maintain.findings import NEW, Finding, PipNeed

if TYPE_CHECKING:
    from packaging.version import Version

    from envkit.maintain.fetch import Page, PageFetcher
    from envkit.state.config import Config


def _line(version: Version) -> tuple[int, ...]:
    return tuple(version.release[:2])


def news(catalog: Catalog, builds: Sequence[Build], needs: Sequence[PipNeed], fetcher: PageFetcher,
         config: Config) -> list[Finding]:
    newest = {name: max((_line(b.version) for b in m.builds), default=()) for name, m in catalog.manifests.items()}
    findings: list[Finding] = []
    # The framework's package is the first requirement of a build: torch, tensorflow[and-cuda], jax[cuda12].
    firsts = [n for n in needs if n.build.pip and n.requirement == n.build.pip.packages[0]]
    seen: set[tuple[str, str]] = set()
    for need in firsts:
        page = fetcher.pages.get(config.mirrored(need.page))
        top = _newest_version(page)
        name = need.parsed.name
        if top is None or _line(top) <= newest.get(need.build.manifest, ()):
            continue
        line = ".".join(str(p) for p in _line(top))
        if (name, line) in seen:
            continue
        seen.add((name, line))
        release = ".".join(map(str, newest[need.build.manifest]))
        findings.append(Finding(NEW, f"{name} {top.public} is on {need.index} (the {need.build.manifest} manifest's "
                                     f"newest release is {release})", url=need.index))
    findings += _new_variants(catalog, builds, fetcher, config, newest)
    return findings


def _newest_version(page: Optional[Page]) -> Optional[Version]:
    from envkit.backends.simple_index import linux_wheels, parse_page, wheel_version

    if page is None or not page.found:
        return None
    try:
        files = linux_wheels(parse_page(page.text, page.content_type, page.final_url or page.url))
    except ValueError:
        return None
    versions = [v for v in (wheel_version(f.filename) for f in files) if v is not None and not v.is_prerelease]
    return max(versions, default=None)


def variant_roots(path: str) -> list[str]:
    """The parts before ``{variant}`` of the index URL templates a manifest file writes (``.../whl``)."""
    from envkit.state.yamltext import parse_yaml

    try:
        with open(path, encoding="utf-8") as stream:
            data = parse_yaml(stream.read())
    except (OSError, ValueError):
        return []
    roots = []
    for template in _strings(data):
        if "{variant}" in template and template.startswith("https://"):
            roots.append(template.split("{variant}")[0].rstrip("/"))
    return list(dict.fromkeys(roots))


def _strings(data: object) -> Iterable[str]:
    if isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)
    elif isinstance(data, str):
        yield data


def _new_variants(catalog: Catalog, builds: Sequence[Build], fetcher: PageFetcher, config: Config,
                  newest: dict[str, tuple[int, ...]]) -> list[Finding]:
    """Variants of the framework's package on the root of a per-variant index (``.../whl/torch/`` lists every
    variant's wheels) that no build of the manifest uses, for releases at least as new as the manifest's newest."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from envkit.backends.simple_index import linux_wheels, parse_page, wheel_version

    findings = []
    checked = {b.manifest for b in builds if b.pip}
    for name in sorted(checked):
        manifest = catalog.manifests[name]
        pip_builds = [b for b in manifest.builds if b.pip]
        known = {b.variant for b in manifest.builds}
        package = canonicalize_name(Requirement(pip_builds[0].pip.packages[0]).name)
        for root in variant_roots(manifest.path):
            url = f"{root}/{package}/"
            page = fetcher.fetch_all([config.mirrored(url)]).get(config.mirrored(url))
            if page is None or not page.found:
                continue  # an index without a root page: nothing to learn from it
            try:
                files = linux_wheels(parse_page(page.text, page.content_type, page.final_url or page.url))
            except ValueError:
                continue
            found: dict[str, Version] = {}
            for file in files:
                version = wheel_version(file.filename)
                local = version.local if version is not None else None
                new = local and re.fullmatch(r"cu[0-9]+", local) and local not in known
                if new and _line(version) >= newest.get(name, ()):
                    found[local] = max(found.get(local, version), version)
            for variant, version in sorted(found.items()):
                findings.append(Finding(NEW, f"{variant} builds of {package} ({package} {version}) are on "
                                             f"{root}/{variant} (no {name} build uses {variant})",
                                        url=f"{root}/{variant}"))
    return findings
