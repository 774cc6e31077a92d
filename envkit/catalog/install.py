"""What a build installs, as its manifest says it (envs/<name>.yaml): its pip and conda settings, set on the
manifest, a release or the build itself, each checked. Pure; envkit.catalog.schema asks it for every build."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional, Sequence

from envkit.catalog.entries import conda_spec_problem, https_url_problem, pip_requirement_problem
from envkit.catalog.model import CondaInstall, PipInstall
from envkit.catalog.node import Node

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")  # {variant}, or what a manifest may write wrongly for it: {nope}, {0}
PIP_KEYS = {"index_url", "find_links", "packages", "local_version", "plain"}
_CONDA_KEYS = {"channels", "packages"}


def install_defaults(node: Node) -> dict[str, dict[str, Any]]:
    """The pip/conda keys a manifest or release sets for all the builds under it."""
    out: dict[str, dict[str, Any]] = {}
    for part, keys in (("pip", PIP_KEYS), ("conda", _CONDA_KEYS)):
        if node.has(part):
            sub = node.child(part)
            sub.only(keys)
            out[part] = dict(sub.data)
    return out


def merged(base: Mapping[str, Mapping[str, Any]], over: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    merged = {part: dict(values) for part, values in base.items()}
    for part, values in over.items():
        merged.setdefault(part, {}).update(values)
    return merged


def parse_pip(node: Node, values: Mapping[str, Any], variant: str) -> PipInstall:
    pip = Node(values, node.path, node.build, f"{node.prefix}pip.")
    packages = pip.text_list("packages", strings=True)
    if not packages:
        pip.fail("missing or empty", "packages")
    _each(pip, "packages", packages, pip_requirement_problem)
    urls = {}
    for key, what in (("index_url", "index"), ("find_links", "find-links")):
        url = pip.text(key, required=False)  # null: unset what the manifest or release set (index: the default)
        if url is not None:
            url = _with_variant(pip, key, url, variant)
            problem = https_url_problem(url, what)
            if problem:
                pip.fail(problem, key)
        urls[key] = url
    return PipInstall(packages=packages, **urls, local_version=_local_version(pip, variant, any(urls.values())),
                      plain=_plain(pip, packages))


def _plain(pip: Node, packages: Sequence[str]) -> tuple[str, ...]:
    """``plain``: packages of the build whose wheels carry no local version where the others carry one (the aarch64
    torchvision on PyTorch's CUDA index): each must be one of its packages."""
    names = pip.text_list("plain", strings=True)
    if not names:
        return ()
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    known = {canonicalize_name(Requirement(text).name) for text in packages}
    for position, name in enumerate(names):
        if canonicalize_name(name) not in known:
            pip.fail(f"{name!r} is not one of the build's packages ({', '.join(sorted(known))})", f"plain[{position}]")
    return tuple(canonicalize_name(name) for name in names)


def _with_variant(node: Node, key: str, template: str, variant: str) -> str:
    """``template`` with {variant} replaced by the build's variant. Nothing else in it is a placeholder: another
    {name}, {0} or a stray brace is refused here, when the manifest is read, rather than reaching an installer."""
    rest = _PLACEHOLDER.sub(lambda found: "" if found.group(0) == "{variant}" else found.group(0), template)
    if "{" in rest or "}" in rest:
        other = _PLACEHOLDER.search(rest)
        what = f"unknown placeholder {other.group(0)}" if other else "a brace that opens or closes no placeholder"
        node.fail(f"{template!r} has {what}: the only placeholder is {{variant}} (the build's variant)", key)
    return template.replace("{variant}", variant)


def _local_version(pip: Node, variant: str, own_source: bool) -> str:
    """What follows '+' in each installed version of the build's packages; "" for none. Default: the variant when
    the build's packages come from its own index or links page (PyTorch's), else none (what PyPI publishes)."""
    local = pip.text("local_version", required=False)
    local = (variant if own_source else "none") if local is None else _with_variant(pip, "local_version", local,
                                                                                      variant)
    if not re.fullmatch(r"none|[a-z0-9]+(\.[a-z0-9]+)*", local):
        pip.fail(f"{local!r}: a local version label like 'cu126', or 'none'", "local_version")
    return "" if local == "none" else local


def parse_conda(node: Node, values: Mapping[str, Any]) -> CondaInstall:
    conda = Node(values, node.path, node.build, "conda.")
    channels = conda.text_list("channels", strings=True)
    if not channels:
        conda.fail("missing or empty: full channel URLs", "channels")
    _each(conda, "channels", channels, lambda channel: https_url_problem(channel, "channel"))
    packages = conda.text_list("packages", strings=True)
    if not packages:
        conda.fail("missing or empty", "packages")
    _each(conda, "packages", packages, conda_spec_problem)
    return CondaInstall(channels=channels, packages=packages)


def _each(node: Node, key: str, entries: Sequence[str], problem_of: Callable[[str], Optional[str]]) -> None:
    """Each entry of a list checked on its own: a problem names the entry's position (``packages[2]``)."""
    for position, entry in enumerate(entries):
        problem = problem_of(entry)
        if problem:
            node.fail(problem, f"{key}[{position}]")
