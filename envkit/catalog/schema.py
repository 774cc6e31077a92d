"""Schema checks of a framework manifest (envs/<name>.yaml): parsed YAML in, a frozen Manifest out. Pure.

Every problem is a ManifestError naming the file, the build and the field. The schema is documented for admins in
envs/README.md.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from envkit.catalog.bundled import parse_bundled
from envkit.catalog.install import PIP_KEYS, install_defaults, merged, parse_conda, parse_pip
from envkit.catalog.model import (
    CPU,
    FRAMEWORKS,
    ArchSet,
    Build,
    Manifest,
    PlatformView,
    PythonRange,
    Tables,
    valid_id,
)
from envkit.catalog.node import Node, kind
from envkit.catalog.platforms import parse_platforms
from envkit.catalog.rocm_build import is_rocm_variant, parse_gfx_sets, rocm_code
from envkit.errors import ManifestError
from envkit.machines.cuda import CudaTable
from envkit.versions import ComputeCapability, CudaVersion, GlibcVersion, RocmVersion

if TYPE_CHECKING:
    from packaging.version import Version

_VARIANT = re.compile(r"^(cpu|cu[0-9]{2,3}|rocm[0-9]{1,2}\.[0-9]{1,2}(\.[0-9]{1,3})?)$")
# companions: how companion packages follow the framework's version; read by `envkit manifests validate` only.
_MANIFEST_KEYS = {"name", "summary", "framework", "retired", "arch_sets", "gfx_sets", "pip", "conda", "releases",
                  "companions"}
# `bundled`, `unconfirmed` and `glibc` may be set on a release for all its builds; a build's own value wins.
_PLATFORM_KEYS = {"platforms", "absent", "l4t"}
_RELEASE_KEYS = {"version", "python", "notes", "pip", "conda", "builds", "bundled", "unconfirmed", "glibc",
                 *_PLATFORM_KEYS}
_BUILD_KEYS = {"id", "variant", "cuda", "arch", "rocm", "gfx", "python", "notes", "pip", "conda", "bundled",
               "unconfirmed", "glibc", *_PLATFORM_KEYS}
_ARCH_KEYS = {"sass", "ptx"}


def parse_manifest(
    data: Any, path: str, expected_name: str, tables: Tables, errors: Optional[list[ManifestError]] = None
) -> Manifest:
    """The manifest in ``data``. The first problem raises ManifestError; with an ``errors`` list, every problem is
    appended to it instead (the first of each top-level field and release, every one of each build), and what
    parsed is kept."""
    node = Node(data, path)  # not a mapping: nothing else can be checked, so this raises in both modes
    if not valid_id(expected_name):  # (in both modes too: every build id is made from it, and each would be wrong)
        node.fail(f"{expected_name + '.yaml'!r} cannot name a manifest: a manifest's file name is letters, digits and "
                  ". _ + - (starting with a letter or digit) and .yaml: rename the file, or move it out of the "
                  "manifests directory")
    attempt = _attempt(errors)
    attempt(lambda: node.only(_MANIFEST_KEYS))
    name = attempt(lambda: _manifest_name(node, expected_name), expected_name)
    framework = attempt(lambda: _framework(node), "")
    arch_sets = attempt(lambda: _arch_sets(node, attempt) if node.has("arch_sets") else {}, None)
    gfx_sets = attempt(lambda: parse_gfx_sets(node, attempt) if node.has("gfx_sets") else {}, None)
    manifest_install = attempt(lambda: install_defaults(node), None)  # None: broken (its builds are not judged on it)
    builds: list[Build] = []
    seen: dict[str, str] = {}  # build id -> where its first build is: releases[0].builds[2]
    for position, raw_release in enumerate(attempt(lambda: node.children("releases"), [])):
        release = attempt(lambda: _release(raw_release, path, position))
        if release is None:
            continue
        release_own = attempt(lambda: install_defaults(release), None)
        release_install = None if manifest_install is None or release_own is None else merged(manifest_install,
                                                                                               release_own)
        for build_position, raw_build in enumerate(attempt(lambda: release.children("builds"), [])):
            build = attempt(lambda: _parse_build(name, release, raw_build, build_position, release_install,
                                                 (arch_sets, gfx_sets), tables, attempt))
            if build is None:
                continue
            if build.id in seen:
                attempt(lambda: release.fail(f"duplicate build id {build.id!r}: {seen[build.id]} has it too: give one "
                                             "of them an id of its own (id: NAME)",
                                             f"builds[{build_position}].id"))
                continue
            seen[build.id] = f"releases[{position}].builds[{build_position}]"
            builds.append(build)
    return Manifest(
        name=name,
        summary=attempt(lambda: node.text("summary"), ""),
        framework=framework,
        builds=tuple(builds),
        path=path,
        retired=attempt(lambda: node.text("retired", required=False)),
        companions=attempt(lambda: _companion_names(node), ()),
    )


def _companion_names(node: Node) -> tuple[str, ...]:
    """The packages named by the manifest's ``companions:`` rules (their form is checked by `envkit manifests
    validate`, envkit.maintain.consistency)."""
    rules = node.data.get("companions")
    if rules is None:
        return ()
    if not isinstance(rules, Mapping):
        node.fail(f"expected a mapping of package name -> list of rules, got {kind(rules)}", "companions")
    return tuple(str(name) for name in rules)


def _attempt(errors: Optional[list[ManifestError]]) -> Callable[..., Any]:
    """Run a parsing step: raise its ManifestError, or with an ``errors`` list record it and give ``default``."""

    def attempt(step: Callable[[], Any], default: Any = None) -> Any:
        if errors is None:
            return step()
        try:
            return step()
        except ManifestError as error:
            errors.append(error)
            return default

    return attempt


def _manifest_name(node: Node, expected_name: str) -> str:
    name = node.text("name")
    if name != expected_name:
        node.fail(f"must be the file's name, {expected_name!r}", "name")
    if not valid_id(name):
        node.fail(f"{name!r}: a manifest's name (and its file's) is letters, digits and . _ + -, starting with a "
                  "letter or digit", "name")
    return name


def _framework(node: Node) -> str:
    framework = node.text("framework")
    if framework not in FRAMEWORKS:
        node.fail(f"{framework!r} is not one of {', '.join(FRAMEWORKS)}", "framework")
    return framework


def _release(raw: Any, path: str, position: int) -> Node:
    release = Node(raw, path, prefix=f"releases[{position}].")
    release.only(_RELEASE_KEYS)
    return release


def _arch_sets(node: Node, attempt: Callable[..., Any]) -> dict[str, Optional[ArchSet]]:
    """Each named arch set; one with problems is None (in collecting mode: its problems are recorded once, and the
    builds that name it are not each said to name an unknown set)."""
    sets = node.child("arch_sets")
    return {str(key): attempt(lambda: _arch(sets.child(str(key)))) for key in sets.data}


def _arch(node: Node) -> ArchSet:
    node.only(_ARCH_KEYS)

    def capabilities(key: str) -> tuple[ComputeCapability, ...]:
        out = []
        for position, text in enumerate(node.text_list(key)):
            try:
                out.append(ComputeCapability.parse(text))
            except ValueError as exc:
                node.fail(str(exc), f"{key}[{position}]")
        return tuple(sorted(set(out)))

    arch = ArchSet(sass=capabilities("sass"), ptx=capabilities("ptx"))
    if not arch.sass and not arch.ptx:
        node.fail("needs at least one sass or ptx architecture")
    return arch


def _parse_build(
    manifest: str,
    release: Node,
    raw: Any,
    position: int,
    inherited: Optional[Mapping[str, Mapping[str, Any]]],
    code_sets: tuple[Optional[Mapping[str, Optional[ArchSet]]], Optional[Mapping[str, Any]]],
    tables: Tables,
    attempt: Callable[..., Any],
) -> Optional[Build]:
    """One build, or None when it has problems: ``attempt`` (see _attempt) raises the first, or records every one
    of them (each field is checked whatever the others say, where it does not depend on them)."""
    where = f"{release.prefix}builds[{position}]"
    first = Node(raw, release.path, prefix=f"{where}.")
    version_text = release.text("version")  # (without these the build has no name: the first problem ends it)
    variant = first.text("variant")
    explicit_id = first.text("id", required=False)
    build_id = explicit_id or f"{manifest}-{version_text}-{variant}"
    node = Node(raw, release.path, build=build_id)  # from here on, errors name the build
    failed = False

    def step(check: Callable[[], Any]) -> Any:
        nonlocal failed
        result = attempt(check, _FAILED)
        failed = failed or result is _FAILED
        return result

    step(lambda: node.only(_BUILD_KEYS))
    step(lambda: _build_id(node, build_id, explicit_id is not None, variant))
    step(lambda: _variant(node, variant))
    version = step(lambda: _version(release, version_text))
    python = step(lambda: _python_range(node if node.has("python") else release, tables))
    arch_sets, gfx_sets = code_sets
    cuda = step(lambda: node.parsed("cuda", CudaVersion.parse, required=False))
    rocm = step(lambda: node.parsed("rocm", RocmVersion.parse, required=False))
    gfx: Any = ()
    if is_rocm_variant(variant):
        written_gfx = node.data.get("gfx")
        if isinstance(written_gfx, str) and (gfx_sets is None or gfx_sets.get(written_gfx, ()) is None):
            failed = True  # it names a gfx set with problems (or gfx_sets is broken): those are said there, once
        elif rocm is not _FAILED:
            gfx = step(lambda: rocm_code(node, variant, rocm, gfx_sets, tables))
    else:
        for key in ("rocm", "gfx"):
            if node.has(key):
                step(lambda: node.fail(f"only a ROCm build (variant rocmX.Y) has {key}", key))
    written = node.data.get("arch")
    if isinstance(written, str) and (arch_sets is None or written in arch_sets and arch_sets[written] is None):
        arch = _FAILED  # it names an arch set with problems (or arch_sets is broken): those are reported there, once
        failed = True
    else:
        arch = step(lambda: _build_arch(node, arch_sets) if node.has("arch") else None)
    if cuda is not _FAILED and arch is not _FAILED and not is_rocm_variant(variant):
        step(lambda: _gpu_code(node, variant, cuda, arch, tables.cuda))
    # Where the pip/conda settings it inherits are broken (said there, once), its own keys are still checked, but
    # not what it would install without them (each build would be said to have no packages).
    if inherited is None:
        step(lambda: install_defaults(node))
        install, failed = _FAILED, True
    else:
        install = step(lambda: merged(inherited, install_defaults(node)))
    pip = conda = None
    if install is not _FAILED:
        pip = step(lambda: parse_pip(node, install.get("pip"), variant) if "pip" in install else None)
        conda = step(lambda: parse_conda(node, install["conda"]) if "conda" in install else None)
        if "pip" not in install and "conda" not in install:
            step(lambda: node.fail("a build needs pip packages or conda packages to install", "pip"))
    notes = step(lambda: node.text("notes", required=False) or release.text("notes", False))
    bundled = step(lambda: parse_bundled(node, release, arch)) if arch is not _FAILED else _FAILED
    unconfirmed = step(lambda: node.text("unconfirmed", required=False) or release.text("unconfirmed", False))
    glibc = step(lambda: _glibc(node, release))
    placed = _FAILED
    if not failed:
        placed = step(lambda: _placed(node, release, arch_sets, cuda, tables, variant, install))
    if failed:
        return None
    platforms, per_platform, absent, l4t = placed
    return Build(id=build_id, manifest=manifest, version=version, variant=variant, python=python, cuda=cuda,
                 arch=arch, pip=pip, conda=conda, notes=notes, bundled=bundled, unconfirmed=unconfirmed, glibc=glibc,
                 rocm=rocm, gfx=gfx, platforms=platforms, per_platform=per_platform, absent=absent, l4t=l4t)


def _placed(node: Node, release: Node, arch_sets: Mapping[str, Optional[ArchSet]], cuda: Optional[CudaVersion],
            tables: Tables, variant: str, install: Mapping[str, Mapping[str, Any]]) -> Any:
    """The build's platforms, what differs on each (envkit.catalog.platforms), why it has none elsewhere, and a
    Jetson build's L4T range (a GPU build only)."""

    def view(sub: Node, platform: str) -> PlatformView:
        arch = _build_arch(sub, arch_sets) if sub.has("arch") else None
        if arch is not None:
            if cuda is None:
                sub.fail("a cpu build has no arch", "arch")
            _check_cuda(sub, cuda, arch, tables.cuda)
        pip = None
        if sub.has("pip"):
            if "pip" not in install:
                sub.fail("the build installs no pip packages to differ", "pip")
            own = sub.child("pip")
            own.only(PIP_KEYS)
            pip = parse_pip(sub, {**install["pip"], **own.data}, variant)
        glibc = sub.parsed("glibc", GlibcVersion.parse, required=False)
        return PlatformView(arch=arch, unconfirmed=sub.text("unconfirmed", required=False),
                            notes=sub.text("notes", required=False), glibc=glibc, pip=pip)

    placed = parse_platforms(node, release, view)
    if placed[3] is not None and cuda is None:
        node.fail("a Jetson build (l4t) is a GPU build: give its cuda and arch", "l4t")
    return placed


_FAILED = object()  # what a step that failed gives, in collecting mode


def _glibc(node: Node, release: Node) -> Optional[GlibcVersion]:
    """The oldest glibc the build installs on (its own, else its release's), named with the build in errors."""
    owner = node if node.has("glibc") else Node(release.data, release.path, node.build, release.prefix)
    return owner.parsed("glibc", GlibcVersion.parse, required=False)


def _build_id(node: Node, build_id: str, explicit: bool, variant: str) -> None:
    if valid_id(build_id):
        return
    if explicit:
        node.fail("a build id is letters, digits and . _ + -", "id")
    if not _VARIANT.match(variant):
        return  # the id is made from the variant, and the variant's own check says what is wrong with it
    node.fail(f"the build id made from the manifest, version and variant, {build_id!r}, is not letters, digits and "
              ". _ + -: give the build an id", "id")


def _variant(node: Node, variant: str) -> None:
    if not _VARIANT.match(variant or ""):
        node.fail(f"{variant!r} is not 'cpu', 'cu' and the CUDA digits (cu118, cu126, cu12) or 'rocm' and the ROCm "
                  "release (rocm6.4)", "variant")


def _version(release: Node, text: str) -> Version:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except (InvalidVersion, ValueError):  # (ValueError: a part of thousands of digits, past int()'s limit)
        release.fail(f"{text[:40]!r}{'...' if len(text) > 40 else ''} is not a version like '2.9'", "version")


def _python_range(python_node: Node, tables: Tables) -> PythonRange:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    python_text = python_node.text("python")
    try:
        spec = SpecifierSet(python_text)
    except InvalidSpecifier:
        python_node.fail(f"{python_text!r} is not a version range like '>=3.10,<3.15'", "python")
    python = PythonRange(spec, tables.python.versions)
    if not any(python.contains(v) for v in tables.python.versions):
        python_node.fail(f"{python_text!r} admits none of the Pythons in python.yaml", "python")
    return python


def _gpu_code(node: Node, variant: str, cuda: Optional[CudaVersion], arch: Optional[ArchSet],
              table: CudaTable) -> None:
    """The CUDA and architecture list a build has (or lacks), against its variant and cuda.yaml."""
    if variant == CPU:
        if cuda or arch:
            node.fail("a cpu build has no cuda or arch", "cuda" if cuda else "arch")
        return
    if cuda is None:
        node.fail(f"a {variant} build needs the CUDA it targets", "cuda")
    if arch is None:
        node.fail("a GPU build needs its architecture list (sass and/or ptx)", "arch")
    _check_cuda(node, cuda, arch, table)
    if _VARIANT.match(variant or "") and variant not in (cuda.tag, f"cu{cuda.major}"):  # (a malformed one: _variant)
        node.fail(f"{variant!r} does not name CUDA {cuda}: expected {cuda.tag} (or cu{cuda.major} for a build "
                  f"that serves the whole CUDA {cuda.major} line)", "variant")


def _build_arch(node: Node, arch_sets: Mapping[str, Optional[ArchSet]]) -> Optional[ArchSet]:
    value = node.data["arch"]
    if isinstance(value, str):
        if value not in arch_sets:
            node.fail(f"no arch set named {value!r} in arch_sets ({', '.join(arch_sets) or 'none defined'})", "arch")
        return arch_sets[value]
    return _arch(node.child("arch"))


def _check_cuda(node: Node, cuda: CudaVersion, arch: ArchSet, table: CudaTable) -> None:
    if cuda not in table.min_driver:
        node.fail(f"CUDA {cuda} is not in cuda.yaml's min_driver table", "cuda")
    oldest = table.min_compute_capability.get(cuda.major)
    if oldest is not None:
        too_old = [cc for cc in (*arch.sass, *arch.ptx) if cc < oldest]
        if too_old:
            node.fail(f"CUDA {cuda.major}.x cannot build for {too_old[0].sm} (its oldest is {oldest.sm})", "arch")
