"""A build's exact variant, pinned before anything is downloaded.

A manifest pins a release line (``torch==2.14.*``), which admits every build of the release: the CUDA ones, the CPU
one, PyPI's own (a CUDA 13 build without a local label). Which one an installer takes depends on what its index
serves: PyPI where a mirror of ``/whl/cpu`` was pointed at it gave a 5 GB CUDA build to a CPU environment. So before
anything is downloaded, envkit reads the step's index page of each package, as the installer would, and pins each
to the newest version that carries the build's local label (``torch==2.14.1+cpu``, ``torchvision==0.29.1+cpu``):
the installer can take nothing else. An index that serves no such build is refused there, naming the index, the
upstream one it stands for, and what it serves; nothing is downloaded. The pages are read while the environment's
Python is being made (envkit.create.execute), so that it costs create no time; a refusal undoes what was made. After
installing, each package's version is checked again (envkit.backends.installers.wrong_builds).

Steps pinned so: those with a local label to hold (``PipPart.local``: PyTorch's own indexes), from an index (not a
lock's files), without a page of links (PyTorch 1.x's builds pin exact versions). A requirement pinned to one
version already, or left out for this Python by its marker, is as it was. Where a page cannot be read, the
requirement stays as it was and the installer's own answer, then the check after installing, decide.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from packaging.version import Version

from envkit.backends.plan import PipPart, Plan
from envkit.errors import InstallError

# (URL, Accept) -> (text, content type, final URL): envkit.system.download.fetch_page with the configured mirrors
Read = Callable[[str, str], tuple[str, str, str]]


@dataclass(frozen=True)
class Choice:
    """What an index's page offers a requirement: the pin with the build's label, else what else it serves."""

    pinned: Optional[str]  # the requirement pinned to the newest version with the label; None when there is none
    served: tuple[str, ...]  # the versions it admits and serves instead (newest first), when there is no such one


def choose(requirement: str, page: Sequence, python: Version, local: str) -> Choice:
    """Pure: the pin of ``requirement`` to the newest version among the ``page``'s files (simple_index.IndexFile)
    that fits ``python`` on Linux x86_64 and carries the local label ``local``; else the versions that do fit."""
    from envkit.backends.installers import requirement_parts
    from envkit.backends.simple_index import matching, wheel_version

    parts = requirement_parts(requirement)
    versions = sorted({wheel_version(f.filename) for f in matching(page, parts.specifier, python)}, reverse=True)
    right = [v for v in versions if v is not None and (v.local or "") == local]
    if not right:
        return Choice(None, tuple(str(v) for v in versions))
    if parts.marker is None and "[" not in requirement:  # a name and versions (most): no marker grammar needed
        return Choice(f"{parts.name}=={right[0]}", ())
    from packaging.requirements import Requirement

    parsed = Requirement(requirement)
    extras = f"[{','.join(sorted(parsed.extras))}]" if parsed.extras else ""
    marker = f" ; {parsed.marker}" if parsed.marker is not None else ""
    return Choice(f"{parsed.name}{extras}=={right[0]}{marker}", ())


def pinned_to_variant(step: PipPart, python: Version, upstream: str, read: Read) -> PipPart:
    """``step`` with each package pinned to the build's exact variant (see the module); InstallError, before
    anything is downloaded, when its index serves another build of a package and none of this one."""
    if not step.local or step.requirements is not None or step.find_links or "://" not in step.index_url:
        return step
    from envkit.backends.installers import requirement_parts

    packages = []
    for text in step.packages:
        parts = requirement_parts(text)
        exact = any(spec.operator in ("==", "===") and "*" not in spec.version for spec in parts.specifier)
        if exact or (parts.marker is not None and not parts.marker.evaluate(
                {"python_version": f"{python.major}.{python.minor}",
                 "python_full_version": f"{python.major}.{python.minor}.0"})):
            packages.append(text)
            continue
        page = _page(step.index_url, parts.name, read)
        choice = choose(text, page, python, step.local) if page is not None else Choice(None, ())
        if choice.pinned is None and choice.served:
            raise _wrong_build(step, upstream, parts.name, text, choice.served)
        packages.append(choice.pinned or text)
    return replace(step, packages=tuple(packages))


def _page(index: str, name: str, read: Read) -> Optional[list]:
    """The files of project ``name`` on ``index``; None when its page cannot be read (the installer will say)."""
    import re

    from envkit.backends.simple_index import ACCEPT, parse_page

    url = f"{index.rstrip('/')}/{re.sub(r'[-_.]+', '-', name).lower()}/"
    try:
        text, content_type, final = read(url, ACCEPT)
        return parse_page(text, content_type, final or url)
    except (InstallError, ValueError):
        return None


def _wrong_build(step: PipPart, upstream: str, name: str, requirement: str, served: Sequence[str]) -> InstallError:
    from envkit.text.redact import redact

    shown = ", ".join(served[:3]) + (f" and {len(served) - 3} more" if len(served) > 3 else "")
    mirror = f" (the mirror of {upstream} in envkit's config)" if upstream.rstrip("/") != step.index_url.rstrip("/") \
        else ""
    return InstallError(
        redact(f"{step.index_url}{mirror} serves {name} {shown} for {requirement}, and no +{step.local} build: "
               f"{step.purpose} need the +{step.local} ones; nothing was downloaded"),
        hint=f"Point that mirror at a copy of {upstream} (its wheels carry +{step.local}), or choose another build "
             "(`envkit list` lists them). What this run made was removed.")


def pinned_plan(plan: Plan, mirrors: Sequence[str]) -> Plan:
    """``plan`` with every pip step pinned to the build's exact variant (:func:`pinned_to_variant`), each page read
    through envkit's downloader, every redirect held to the transport rule (``mirrors``: the configured ones)."""
    from envkit.system.download import fetch_page

    upstream = plan.build.pip.index_url if plan.build.pip is not None else None
    steps = tuple(pinned_to_variant(step, plan.python, upstream or step.index_url,
                                    lambda url, accept: fetch_page(url, mirrors, accept)) for step in plan.pip)
    return plan if steps == plan.pip else replace(plan, pip=steps)
