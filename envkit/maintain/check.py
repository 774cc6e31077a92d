"""``envkit manifests check``: can every selected build install, for every Python it claims, from its own index
and channels? Reads the real indexes (through the user's mirrors), each page once, in parallel.

The plan (which pages, which specs) and the verdicts are pure functions of the catalog and the pages; the fetching
is envkit.maintain.fetch, the conda side envkit.maintain.conda_check, what is new upstream envkit.maintain.upstream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from envkit.catalog.model import Build, Catalog
from envkit.errors import BadInputError, UnknownNameError
from envkit.maintain.findings import LISTED, MISSING, NEW, UNREADABLE, Finding, PipNeed, site_of, upstream_index
from envkit.state.config import is_under
from envkit.text.words import counted

if TYPE_CHECKING:
    from packaging.version import Version

    from envkit.maintain.fetch import FetchSettings, Page, Progress
    from envkit.maintain.resolvable import Resolver
    from envkit.state.config import Config


@dataclass(frozen=True)
class CheckReport:
    builds: tuple[str, ...]
    pythons: dict[str, tuple[str, ...]]  # build id -> the Pythons checked for it
    findings: tuple[Finding, ...]
    pages: int  # index pages read
    channels: int = 0  # conda channel sets queried
    resolutions: int = 0  # uv resolutions run (--resolve)
    mirrors: dict[str, str] = field(default_factory=dict)  # upstream -> what was read instead

    @property
    def ok(self) -> bool:
        return not any(f.kind in (MISSING, UNREADABLE) for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "builds": list(self.builds), "pythons": {b: list(p) for b, p in self.pythons.items()},
            "missing": [f.to_dict() for f in self.findings if f.kind == MISSING],
            "unreadable": [f.to_dict() for f in self.findings if f.kind == UNREADABLE],
            "not_in_manifests": [f.to_dict() for f in self.findings if f.kind == NEW],
            "listed_unconfirmed": [f.to_dict() for f in self.findings if f.kind == LISTED],
            "pages": self.pages, "resolutions": self.resolutions, "mirrors": self.mirrors,
        }


def select_builds(catalog: Catalog, build_ids: Sequence[str] = ()) -> list[Build]:
    """The catalog's builds, or those named with --build (UnknownNameError for a name no manifest has; BadInputError
    for an id that two manifests use: which build it means, and whose findings those are, could not be told)."""
    builds = [b for m in catalog.manifests.values() for b in m.builds]
    owners: dict[str, list[str]] = {}
    for b in builds:
        owners.setdefault(b.id, []).append(f"{b.manifest}.yaml")
    shared = [i for i in (build_ids or owners) if len(owners.get(i, ())) > 1]
    if shared:
        raise BadInputError(f"the build id {shared[0]!r} is a build of {' and '.join(owners[shared[0]])}: give one of "
                            "them an id of its own (id: NAME)",
                            hint="`envkit manifests validate DIR` lists every problem of the manifests.")
    if not build_ids:
        return builds
    by_id = {b.id: b for b in builds}
    unknown = [i for i in build_ids if i not in by_id]
    if unknown:
        raise UnknownNameError(f"no build named {', '.join(repr(i) for i in unknown)} in the manifests checked",
                               hint="`envkit list --all` shows every build's id.")
    return [by_id[i] for i in dict.fromkeys(build_ids)]


def claimed_pythons(build: Build, catalog: Catalog, wanted: Sequence[Version] = ()) -> tuple[Version, ...]:
    """The Pythons of python.yaml the build's range admits (only those in ``wanted``, when given)."""
    claimed = tuple(v for v in catalog.tables.python.versions if build.python.contains(v))
    return tuple(v for v in claimed if v in wanted) if wanted else claimed


def pip_needs(builds: Sequence[Build], catalog: Catalog, pythons: Mapping[str, tuple[Version, ...]]) -> list[PipNeed]:
    needs = []
    for build in builds:
        if build.pip is None or not pythons.get(build.id):
            continue
        index = upstream_index(build, catalog)
        needs += [PipNeed(build, requirement, index, pythons[build.id]) for requirement in build.pip.packages]
    return needs


def judge_pip(need: PipNeed, page: Optional[Page]) -> list[Finding]:
    """What is missing for one requirement of one build, from its project page."""
    from envkit.backends.simple_index import linux_wheels, matching, parse_page

    requirement = need.parsed
    build = need.build.id
    mirror = page.url if page is not None and page.url != need.page else None  # what was read instead, and failed
    if page is None or page.error is not None:
        why = page.error if page is not None else "not fetched"
        read = f", read from its mirror {mirror}" if mirror else ""
        return [Finding(UNREADABLE, f"{build}: {need.requirement} could not be checked: {need.page}{read} ({why})",
                        build, need.page, cause=f"{site_of(mirror or need.page)} could not be read ({why})")]
    if not page.found:
        there = f"on its mirror {mirror}" if mirror else "there"
        return [Finding(MISSING, f"{build}: {need.requirement} has no file on {need.index} (no {requirement.name} "
                                 f"page {there}, HTTP {page.status})", build, need.index)]
    try:
        files = linux_wheels(parse_page(page.text, page.content_type, page.final_url or page.url))
    except ValueError as error:
        return [Finding(UNREADABLE, f"{build}: {need.page}: {error}", build, need.page)]
    candidates = matching(files, requirement.specifier)
    if not candidates:
        return [Finding(MISSING, f"{build}: {need.requirement} has no file on {need.index}", build, need.index)]
    without = [v for v in need.pythons if not matching(candidates, requirement.specifier, v)
               and (requirement.marker is None or requirement.marker.evaluate(
                   {"python_version": str(v), "python_full_version": f"{v}.0"}))]  # a marker may leave v out
    if not without:
        return []
    listed = ", ".join(str(v) for v in without)
    companion = ("; it is not the build's framework but a companion of it: leave it out for those Pythons with an "
                 "environment marker (python_version) and give its line a python range in the manifest's companions, "
                 "or narrow the build's python") if need.requirement != need.build.pip.packages[0] else ""
    return [Finding(MISSING, f"{build}: no {requirement.name} wheel for Python {listed} ({need.requirement} on "
                             f"{need.index}){companion}", build, need.index)]


def check_builds(
    catalog: Catalog,
    config: Config,
    build_ids: Sequence[str] = (),
    pythons: Sequence[Version] = (),
    settings: Optional[FetchSettings] = None,
    progress: Optional[Progress] = None,
    conda_cache: Optional[Any] = None,
    resolver: Optional[Resolver] = None,
    resolve_progress: Optional[Progress] = None,
) -> CheckReport:
    """Check every selected build against its index and channels; list what is new upstream. With a ``resolver``,
    also resolve each pip build's whole dependency tree for each Python (envkit.maintain.resolvable): each build
    whose own packages were all found, so that what is missing is not said twice nor an unreadable index asked
    again for every build."""
    from envkit.backends.simple_index import ACCEPT
    from envkit.maintain.fetch import FetchSettings, PageFetcher

    builds = select_builds(catalog, build_ids)
    claimed = {b.id: claimed_pythons(b, catalog, pythons) for b in builds}
    if pythons and not any(claimed.values()):  # else "everything is there" would be said of nothing
        which = "no build given with --build" if build_ids else "no build"
        raise BadInputError(f"{which} publishes Python {', '.join(str(p) for p in pythons)}: nothing to check",
                            hint="`envkit list NAME --all` shows each build's Pythons.")
    needs = pip_needs(builds, catalog, claimed)
    settings = settings or FetchSettings()
    fetch_settings = FetchSettings(settings.timeout_s, settings.retries, settings.backoff_s, settings.jobs, ACCEPT)
    findings: list[Finding] = []
    with PageFetcher(fetch_settings, progress, [m.target for m in config.mirrors]) as fetcher:
        pages = fetcher.fetch_all(config.mirrored(need.page) for need in needs)
        for need in needs:
            findings += judge_pip(need, pages.get(config.mirrored(need.page)))
        from envkit.maintain.upstream import news

        findings += news(catalog, builds, needs, fetcher, config)
        pages_read = len(fetcher.pages)
    from envkit.maintain.conda_check import check_conda

    conda_findings, channel_sets = check_conda(builds, claimed, config, settings.timeout_s, conda_cache)
    findings += conda_findings
    resolved = 0
    if resolver is not None:
        from envkit.maintain.resolvable import check_resolvable, resolutions

        failed = {f.build for f in findings if f.kind in (MISSING, UNREADABLE)}
        wanted = resolutions([b for b in builds if b.id not in failed], catalog, config, claimed)
        findings += check_resolvable(wanted, resolver, settings.jobs, resolve_progress)
        resolved = len(wanted)
    findings += listed_unconfirmed([b for b in builds if claimed[b.id]], findings)
    used = {need.index for need in needs} | {c for b in builds if b.conda for c in b.conda.channels}
    mirrors = {url: config.mirrored(url) for url in sorted(used) if config.mirrored(url) != url}
    return CheckReport(
        builds=tuple(b.id for b in builds), pythons={b: tuple(str(v) for v in p) for b, p in claimed.items()},
        findings=tuple(_unique(findings)), pages=pages_read, channels=channel_sets, resolutions=resolved,
        mirrors=mirrors,
    )


def listed_unconfirmed(builds: Sequence[Build], findings: Sequence[Finding]) -> list[Finding]:
    """The checked builds marked `unconfirmed:` whose every package was found (no finding missing or unreadable for
    them): envkit does not pick such a build over a confirmed one until its note is gone, and the listing may be what
    the note doubted."""
    failed = {f.build for f in findings if f.kind in (MISSING, UNREADABLE)}
    return [Finding(LISTED, f"{build.id}: every package is there, but its manifest marks it unconfirmed "
                            f"({build.unconfirmed}): where the listing is what that doubted, remove the note, and "
                            "envkit picks it where it ranks first (until then, only with --build)", build.id)
            for build in builds if build.unconfirmed and build.id not in failed]


def _unique(findings: list[Finding]) -> list[Finding]:
    order = {MISSING: 0, UNREADABLE: 1, NEW: 2, LISTED: 3}
    return sorted(dict.fromkeys(findings), key=lambda f: order[f.kind])


def problem_lines(problems: Sequence[Finding]) -> list[str]:
    """One line per problem, except that the problems of one cause (a host that does not answer: every build on it)
    are one line, where the first of them stood, with how many checks it stopped and the builds it hit."""
    shared: dict[str, list[Finding]] = {}
    for finding in problems:
        if finding.cause is not None:
            shared.setdefault(finding.cause, []).append(finding)
    out = []
    for finding in problems:
        hit = shared.get(finding.cause, []) if finding.cause is not None else []
        if len(hit) < 2:
            out.append(finding.message)
        elif hit[0] is finding:
            builds = list(dict.fromkeys(f.build for f in hit if f.build))
            shown = ", ".join(builds[:6]) + (f" and {len(builds) - 6} more" if len(builds) > 6 else "")
            out.append(f"{finding.cause}: {counted(len(hit), 'check')} could not be made, for "
                       f"{counted(len(builds), 'build')}: {shown}")
    return out


def render_check(report: CheckReport, say: Callable[[str], None]) -> None:
    """The report in words: what is missing or could not be read, then what is new upstream and the unconfirmed
    builds whose packages are all there, then a summary."""
    problems = [f for f in report.findings if f.kind in (MISSING, UNREADABLE)]
    blocks = [problem_lines(problems)]  # then a heading and its findings, for each kind found
    for kind, heading in ((NEW, "Not in the manifests:"), (LISTED, "Listed, though marked unconfirmed:")):
        found = [f"  {f.message}" for f in report.findings if f.kind == kind]
        blocks.append([heading, *found] if found else [])
    for block in (block for block in blocks if block):
        for line in block:
            say(line)
        say("")
    pythons = sum(len(p) for p in report.pythons.values())
    verdict = "everything is there" if report.ok else counted(len(problems), "problem")
    builds = len(report.builds)
    resolved = f", {counted(report.resolutions, 'uv resolution')}" if report.resolutions else ""
    say(f"Checked {counted(builds, 'build')} ({counted(pythons, 'build-Python pair')}, "
        f"{counted(report.pages, 'index page')}, {counted(report.channels, 'channel query', 'channel queries')}"
        f"{resolved}): {verdict}.")
    def read_through(finding: Finding, upstream: str) -> bool:
        return finding.url is not None and is_under(finding.url, upstream.rstrip("/"))

    used = {upstream: mirror for f in problems for upstream, mirror in report.mirrors.items()
            if read_through(f, upstream)}
    if used:  # what was read is not the URL the messages name: say where it came from
        say("Read through the mirrors of envkit's config file (mirrors:):")
        for upstream, mirror in sorted(used.items()):
            say(f"  {upstream} -> {mirror}")
    unreadable = [f for f in problems if f.kind == UNREADABLE]
    through_mirrors = [f for f in unreadable if any(read_through(f, upstream) for upstream in used)]
    if len(through_mirrors) < len(unreadable):
        say("Some indexes or channels could not be read: check the network (HTTPS_PROXY, REQUESTS_CA_BUNDLE), or map "
            "them to mirrors in envkit's config file (mirrors:), then run the check again.")
    if through_mirrors:
        say("Some mirrors could not be read: check that they are up and serve those pages, or correct their entries "
            "in envkit's config file (mirrors:), then run the check again.")


