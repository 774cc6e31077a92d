"""Read and validate a manifests directory (envs/). The schema is documented for admins in envs/README.md.

Every problem is a ManifestError naming the file, the build and the field. Files are read only when asked for:
``envkit list torch`` parses torch.yaml and the tables, not every manifest.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NoReturn, Optional, Sequence, TypeVar

from envkit.catalog.model import (
    CPU,
    FRAMEWORKS,
    ArchSet,
    Build,
    Catalog,
    CondaInstall,
    Manifest,
    PipInstall,
    PythonTable,
    Tables,
)
from envkit.cuda import CudaTable
from envkit.errors import BadInputError, ManifestError, UnknownNameError
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion

CUDA_TABLE = "cuda.yaml"
PYTHON_TABLE = "python.yaml"
GPU_TABLE = "gpus.yaml"
TABLE_FILES = (CUDA_TABLE, PYTHON_TABLE, GPU_TABLE)
SUFFIX = ".yaml"

_VARIANT = re.compile(r"^(cpu|cu\d{2,3})$")
_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_MANIFEST_KEYS = {"name", "summary", "framework", "retired", "arch_sets", "pip", "conda", "releases"}
_RELEASE_KEYS = {"version", "python", "notes", "pip", "conda", "builds"}
_BUILD_KEYS = {"id", "variant", "cuda", "arch", "python", "notes", "pip", "conda"}
_PIP_KEYS = {"index_url", "packages", "local_version"}
_CONDA_KEYS = {"channels", "packages"}
_ARCH_KEYS = {"sass", "ptx"}

T = TypeVar("T")


def default_manifests_dir() -> Path:
    """The manifests shipped with envkit (the repository's envs/, installed as the package data envkit.envs)."""
    from importlib.util import find_spec

    spec = find_spec("envkit.envs")
    if spec is None or not spec.submodule_search_locations:
        raise BadInputError("envkit's own manifests are missing from this installation", hint="Reinstall envkit.")
    return Path(list(spec.submodule_search_locations)[0])


def manifest_names(directory: Path) -> list[str]:
    """The manifests a directory offers: every *.yaml that is not one of the shared tables."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        raise BadInputError(f"manifests directory {directory} does not exist") from None
    except NotADirectoryError:
        raise BadInputError(f"manifests directory {directory} is not a directory") from None
    except OSError as exc:
        raise BadInputError(f"cannot read manifests directory {directory}: {exc.strerror or exc}") from None
    return sorted(e[: -len(SUFFIX)] for e in entries if e.endswith(SUFFIX) and e not in TABLE_FILES)


def load_catalog(directory: Path, names: Sequence[str] = ()) -> Catalog:
    """Load the tables and the named manifests (all of them when ``names`` is empty)."""
    available = manifest_names(directory)
    unknown = [name for name in names if name not in available]
    if unknown:
        raise UnknownNameError(
            f"no manifest named {', '.join(repr(n) for n in unknown)} in {directory}",
            hint=f"Manifests: {', '.join(available) or '(none)'}.",
        )
    tables = load_tables(directory)
    wanted = list(dict.fromkeys(names)) if names else available
    manifests = {name: load_manifest(directory / f"{name}{SUFFIX}", tables) for name in wanted}
    return Catalog(directory=directory, tables=tables, manifests=manifests)


def load_tables(directory: Path) -> Tables:
    from envkit.gpu_names import parse_gpu_names

    return Tables(
        cuda=parse_cuda_table(_read_yaml(directory / CUDA_TABLE), str(directory / CUDA_TABLE)),
        python=parse_python_table(_read_yaml(directory / PYTHON_TABLE), str(directory / PYTHON_TABLE)),
        gpu_names=parse_gpu_names(_read_yaml(directory / GPU_TABLE), str(directory / GPU_TABLE)),
    )


def load_manifest(path: Path, tables: Tables) -> Manifest:
    return parse_manifest(_read_yaml(path), str(path), path.name[: -len(SUFFIX)], tables)


def _read_yaml(path: Path) -> Any:
    from envkit.yamltext import parse_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path.name in TABLE_FILES:
            raise ManifestError(
                str(path), f"missing: a manifests directory needs {', '.join(TABLE_FILES)} (copy them from envs/)"
            ) from None
        raise ManifestError(str(path), "missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(str(path), f"cannot be read: {exc}") from None
    try:
        return parse_yaml(text)
    except ValueError as exc:
        raise ManifestError(str(path), f"not valid YAML: {exc}") from None


class _Node:
    """A mapping from a YAML file, with typed getters whose errors name the file, build and field."""

    def __init__(self, data: Any, path: str, build: Optional[str] = None, prefix: str = "") -> None:
        self.path = path
        self.build = build
        self.prefix = prefix
        if not isinstance(data, Mapping):
            self.fail(f"expected a mapping, got {_kind(data)}")
        self.data: Mapping[str, Any] = data

    def fail(self, problem: str, key: Optional[str] = None) -> NoReturn:
        field = f"{self.prefix}{key}" if key else (self.prefix.rstrip(".") or None)
        raise ManifestError(self.path, problem, build=self.build, field=field)

    def only(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for key in self.data:
            if key not in allowed:
                self.fail(f"unknown key; expected one of: {', '.join(sorted(allowed))}", str(key))

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def text(self, key: Any, required: bool = True) -> Optional[str]:
        value = self.data.get(key)
        if value is None:
            if required:
                self.fail("missing", key)
            return None
        self._check_scalar(value, str(key))
        text = str(value).strip()
        if not text:
            self.fail("empty", str(key))
        return text

    def _check_scalar(self, value: Any, where: str) -> None:
        if isinstance(value, float):
            # YAML reads 0.10 as the number 0.1 and 560.30 as 560.3: versions must be quoted to mean what they say.
            self.fail(f"quote it ('{value}'): unquoted, YAML reads a version as a number and drops trailing zeros",
                      where)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(f"expected text, got {_kind(value)}", where)

    def parsed(self, key: Any, parse: Callable[[str], T], required: bool = True) -> Optional[T]:
        value = self.text(key, required)
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            self.fail(str(exc), key)

    def text_list(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(f"expected a list, got {_kind(value)}", key)
        for position, item in enumerate(value):
            self._check_scalar(item, f"{key}[{position}]")
            if not str(item).strip():
                self.fail("empty", f"{key}[{position}]")
        return tuple(str(item).strip() for item in value)

    def child(self, key: str, build: Optional[str] = None) -> _Node:
        return _Node(self.data.get(key), self.path, build or self.build, f"{self.prefix}{key}.")

    def children(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None or value == []:
            self.fail("missing or empty", key)
        if not isinstance(value, list):
            self.fail(f"expected a list, got {_kind(value)}", key)
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false"}.get(type(value), type(value).__name__)


# --- tables -------------------------------------------------------------------------------------------------------

def parse_cuda_table(data: Any, path: str) -> CudaTable:
    node = _Node(data, path)
    node.only({"min_driver", "minor_version_compatibility", "min_compute_capability"})

    def table(key: str, parse_key: Callable[[str], Any], parse_value: Callable[[str], Any]) -> dict[Any, Any]:
        sub = node.child(key)
        if not sub.data:
            node.fail("missing or empty", key)
        out = {}
        for raw_key in sub.data:
            sub._check_scalar(raw_key, str(raw_key))
            try:
                parsed_key = parse_key(str(raw_key))
            except ValueError as exc:
                sub.fail(str(exc), str(raw_key))
            out[parsed_key] = sub.parsed(raw_key, parse_value)
        return out

    return CudaTable(
        min_driver=table("min_driver", CudaVersion.parse, DriverVersion.parse),
        minor_compat_floor=table("minor_version_compatibility", _major, DriverVersion.parse),
        min_compute_capability=table("min_compute_capability", _major, ComputeCapability.parse),
    )


def _major(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a CUDA major version like '12'")
    return int(text)


def parse_python_table(data: Any, path: str) -> PythonTable:
    node = _Node(data, path)
    node.only({"versions", "default", "conda_channel", "pypi_index"})
    versions = tuple(sorted(_python_version(node, "versions", text) for text in node.text_list("versions")))
    if not versions:
        node.fail("missing or empty", "versions")
    default = node.parsed("default", lambda text: _python_version(node, "default", text))
    if default not in versions:
        node.fail(f"{default} is not one of the versions listed", "default")
    sources = {key: _https_url(node, key) for key in ("conda_channel", "pypi_index")}
    return PythonTable(versions=versions, default=default, **sources)


def _https_url(node: _Node, key: str) -> str:
    url = node.text(key)
    if not url.startswith("https://"):
        node.fail(f"{url!r}: give the upstream https URL (map it to a mirror in envkit's config)", key)
    return url.rstrip("/")


def _python_version(node: _Node, key: str, text: str) -> Any:
    from packaging.version import Version

    if not re.match(r"^3\.\d+$", text):
        node.fail(f"{text!r} is not a Python version like '3.12'", key)
    return Version(text)


# --- manifests ----------------------------------------------------------------------------------------------------

def parse_manifest(data: Any, path: str, expected_name: str, tables: Tables) -> Manifest:
    node = _Node(data, path)
    node.only(_MANIFEST_KEYS)
    name = node.text("name")
    if name != expected_name:
        node.fail(f"must be the file's name, {expected_name!r}", "name")
    framework = node.text("framework")
    if framework not in FRAMEWORKS:
        node.fail(f"{framework!r} is not one of {', '.join(FRAMEWORKS)}", "framework")
    arch_sets = _arch_sets(node) if node.has("arch_sets") else {}
    manifest_install = _install_defaults(node)
    builds: list[Build] = []
    seen: set[str] = set()
    for position, raw_release in enumerate(node.children("releases")):
        release = _Node(raw_release, path, prefix=f"releases[{position}].")
        release.only(_RELEASE_KEYS)
        release_install = _merge(manifest_install, _install_defaults(release))
        for build_position, raw_build in enumerate(release.children("builds")):
            build = _parse_build(name, release, raw_build, build_position, release_install, arch_sets, tables)
            if build.id in seen:
                release.fail(f"duplicate build id {build.id!r}", f"builds[{build_position}].id")
            seen.add(build.id)
            builds.append(build)
    return Manifest(
        name=name,
        summary=node.text("summary"),
        framework=framework,
        builds=tuple(builds),
        path=path,
        retired=node.text("retired", required=False),
    )


def _arch_sets(node: _Node) -> dict[str, ArchSet]:
    sets = node.child("arch_sets")
    return {str(key): _arch(sets.child(str(key))) for key in sets.data}


def _arch(node: _Node) -> ArchSet:
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


def _install_defaults(node: _Node) -> dict[str, dict[str, Any]]:
    """The pip/conda keys a manifest or release sets for all the builds under it."""
    out: dict[str, dict[str, Any]] = {}
    for kind, keys in (("pip", _PIP_KEYS), ("conda", _CONDA_KEYS)):
        if node.has(kind):
            sub = node.child(kind)
            sub.only(keys)
            out[kind] = dict(sub.data)
    return out


def _merge(base: Mapping[str, Mapping[str, Any]], over: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    merged = {kind: dict(values) for kind, values in base.items()}
    for kind, values in over.items():
        merged.setdefault(kind, {}).update(values)
    return merged


def _parse_build(
    manifest: str,
    release: _Node,
    raw: Any,
    position: int,
    inherited: Mapping[str, Mapping[str, Any]],
    arch_sets: Mapping[str, ArchSet],
    tables: Tables,
) -> Build:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    where = f"{release.prefix}builds[{position}]"
    first = _Node(raw, release.path, prefix=f"{where}.")
    version_text = release.text("version")
    variant = first.text("variant")
    build_id = first.text("id", required=False) or f"{manifest}-{version_text}-{variant}"
    node = _Node(raw, release.path, build=build_id)  # from here on, errors name the build
    node.only(_BUILD_KEYS)
    if not _BUILD_ID.match(build_id):
        node.fail("a build id is letters, digits and . _ + -", "id")
    if not _VARIANT.match(variant or ""):
        node.fail(f"{variant!r} is not 'cpu' or 'cu' and the CUDA digits (cu118, cu126, cu12)", "variant")
    try:
        version = Version(version_text)
    except InvalidVersion:
        release.fail(f"{version_text!r} is not a version like '2.9'", "version")
    python_node = node if node.has("python") else release
    python_text = python_node.text("python")
    try:
        python = SpecifierSet(python_text)
    except InvalidSpecifier:
        python_node.fail(f"{python_text!r} is not a version range like '>=3.10,<3.15'", "python")
    if not any(python.contains(v) for v in tables.python.versions):
        python_node.fail(f"{python_text!r} admits none of the Pythons in python.yaml", "python")

    cuda = node.parsed("cuda", CudaVersion.parse, required=False)
    arch = _build_arch(node, arch_sets) if node.has("arch") else None
    if variant == CPU and (cuda or arch):
        node.fail("a cpu build has no cuda or arch", "cuda" if cuda else "arch")
    if variant != CPU:
        if cuda is None:
            node.fail(f"a {variant} build needs the CUDA it targets", "cuda")
        if arch is None:
            node.fail("a GPU build needs its architecture list (sass and/or ptx)", "arch")
        _check_cuda(node, cuda, arch, tables.cuda)
        if variant not in (cuda.tag, f"cu{cuda.major}"):
            node.fail(f"{variant!r} does not name CUDA {cuda}: expected {cuda.tag} (or cu{cuda.major} for a build "
                      f"that serves the whole CUDA {cuda.major} line)", "variant")

    install = _merge(inherited, _install_defaults(node))
    pip = _pip(node, install.get("pip"), variant) if "pip" in install else None
    conda = _conda(node, install["conda"]) if "conda" in install else None
    if pip is None and conda is None:
        node.fail("a build needs pip packages or conda packages to install", "pip")
    return Build(
        id=build_id, manifest=manifest, version=version, variant=variant, python=python, cuda=cuda,
        arch=arch, pip=pip, conda=conda, notes=node.text("notes", required=False) or release.text("notes", False),
    )


def _build_arch(node: _Node, arch_sets: Mapping[str, ArchSet]) -> ArchSet:
    value = node.data["arch"]
    if isinstance(value, str):
        if value not in arch_sets:
            node.fail(f"no arch set named {value!r} in arch_sets ({', '.join(arch_sets) or 'none defined'})", "arch")
        return arch_sets[value]
    return _arch(node.child("arch"))


def _check_cuda(node: _Node, cuda: CudaVersion, arch: ArchSet, table: CudaTable) -> None:
    if cuda not in table.min_driver:
        node.fail(f"CUDA {cuda} is not in cuda.yaml's min_driver table", "cuda")
    oldest = table.min_compute_capability.get(cuda.major)
    if oldest is not None:
        too_old = [cc for cc in (*arch.sass, *arch.ptx) if cc < oldest]
        if too_old:
            node.fail(f"CUDA {cuda.major}.x cannot build for {too_old[0].sm} (its oldest is {oldest.sm})", "arch")


def _pip(node: _Node, values: Mapping[str, Any], variant: str) -> PipInstall:
    pip = _Node(values, node.path, node.build, "pip.")
    packages = pip.text_list("packages")
    if not packages:
        pip.fail("missing or empty", "packages")
    for position, requirement in enumerate(packages):
        if not _looks_like_requirement(requirement):
            pip.fail(f"{requirement!r} is not a pip requirement like 'torch==2.9.*'", f"packages[{position}]")
    index_url = pip.text("index_url", required=False)
    if index_url is not None:
        index_url = index_url.replace("{variant}", variant)
        if not index_url.startswith("https://"):
            pip.fail(f"{index_url!r}: index URLs are the upstream https URLs", "index_url")
    local = pip.text("local_version", required=False)  # default: the variant on its own index, else none
    local = (variant if index_url else "none") if local is None else local.replace("{variant}", variant)
    if not re.fullmatch(r"none|[a-z0-9]+(\.[a-z0-9]+)*", local):
        pip.fail(f"{local!r}: a local version label like 'cu126', or 'none'", "local_version")
    return PipInstall(packages=packages, index_url=index_url, local_version="" if local == "none" else local)


# Name, optional [extras], optional version constraints: enough to catch typos without importing a parser.
_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,\s-]+\])?\s*((===?|!=|<=?|>=?|~=)\s*[A-Za-z0-9.*+!-]+\s*,?\s*)*$"
)


def _looks_like_requirement(text: str) -> bool:
    return bool(_REQUIREMENT.match(text))


def _conda(node: _Node, values: Mapping[str, Any]) -> CondaInstall:
    conda = _Node(values, node.path, node.build, "conda.")
    channels = conda.text_list("channels")
    if not channels:
        conda.fail("missing or empty: full channel URLs", "channels")
    for position, channel in enumerate(channels):
        if not channel.startswith("https://"):
            conda.fail(f"{channel!r}: channels are full https URLs", f"channels[{position}]")
    packages = conda.text_list("packages")
    if not packages:
        conda.fail("missing or empty", "packages")
    return CondaInstall(channels=channels, packages=packages)
