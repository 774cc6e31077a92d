"""The platforms of a build: where it has packages, what differs on each, why it has none elsewhere, and the L4T
releases a Jetson build runs on. Pure: parsed YAML in, the Build's platform fields out, errors naming the field.

Each key is set on a build or on its release for all its builds (the build's own wins)::

    platforms: [linux-64, linux-aarch64]          # conda's names; absent: [linux-64]
    platforms:                                    # or a mapping, with what differs on a platform
      linux-64: {}
      linux-aarch64: {arch: ampere-to-blackwell, unconfirmed: "...", pip: {plain: [torchvision]}}
    absent: {linux-aarch64: "tensorflow's aarch64 wheels carry no CUDA (tensorflow/tensorflow#121157)"}
    l4t: ">=36.4,<37"                             # a Jetson build (platforms [linux-aarch64] only)
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from envkit.catalog.model import PlatformView
from envkit.catalog.node import Node, kind
from envkit.machines.platforms import DEFAULT_PLATFORM, LINUX_AARCH64, platform_problem

VIEW_KEYS = ("arch", "unconfirmed", "notes", "glibc", "pip")
# Parses one platform's differences: (its node, the platform) -> its view.
ViewParser = Callable[[Node, str], PlatformView]


def parse_platforms(node: Node, release: Node, view_of: ViewParser
                    ) -> tuple[tuple[str, ...], tuple[tuple[str, PlatformView], ...], tuple[tuple[str, str], ...],
                               Optional[str]]:
    """(platforms, per-platform views, absent reasons, l4t range) of the build ``node`` of ``release``."""
    owner = _owner(node, release, "platforms")
    platforms, views = _platforms(owner, view_of) if owner.has("platforms") else ((DEFAULT_PLATFORM,), ())
    absent = _absent(_owner(node, release, "absent"), platforms, own=node.has("absent"))
    l4t = _l4t(_owner(node, release, "l4t"), platforms)
    return platforms, views, absent, l4t


def _owner(node: Node, release: Node, key: str) -> Node:
    """The build's node where it sets ``key``, else its release's (errors still name the build)."""
    return node if node.has(key) else Node(release.data, release.path, node.build, release.prefix)


def _platform(node: Node, name: Any, where: str) -> str:
    problem = platform_problem(name)
    if problem:
        node.fail(problem, where)
    return name


def _platforms(node: Node, view_of: ViewParser) -> tuple[tuple[str, ...], tuple[tuple[str, PlatformView], ...]]:
    raw = node.data["platforms"]
    names: list[str] = []
    views: list[tuple[str, PlatformView]] = []
    if isinstance(raw, list):
        for position, name in enumerate(raw):
            _platform(node, name, f"platforms[{position}]")
            if name in names:
                node.fail(f"names {name} twice: a build lists each platform it has packages for once",
                          f"platforms[{position}]")
            names.append(name)
    elif isinstance(raw, Mapping):  # (a key written twice in a mapping is refused when the YAML is read)
        for name, differs in raw.items():
            _platform(node, name, f"platforms.{name}")
            names.append(name)
            if differs:
                sub = Node(differs, node.path, node.build, f"{node.prefix}platforms.{name}.")
                sub.only(VIEW_KEYS)
                views.append((name, view_of(sub, name)))
    else:
        node.fail(f"expected a list of platforms ([linux-64, linux-aarch64]) or a mapping of each to what differs "
                  f"there, got {kind(raw)}", "platforms")
    if not names:
        node.fail("names no platform: list the ones the build has packages for", "platforms")
    return tuple(names), tuple(views)


def _absent(node: Node, platforms: tuple[str, ...], own: bool) -> tuple[tuple[str, str], ...]:
    """Why the build has no packages for some platforms. A release's reasons are for its builds that lack those
    platforms (its GPU builds, say, where its CPU build has them): a build that has one ignores it; a build's own
    reason for one of its own platforms is an error."""
    if not node.has("absent"):
        return ()
    raw = node.data["absent"]
    if not isinstance(raw, Mapping):
        node.fail(f"expected a mapping of a platform to why the build has no packages there, got {kind(raw)}",
                  "absent")
    out = []
    for name in raw:
        _platform(node, name, f"absent.{name}")
        if name in platforms:
            if own:
                node.fail(f"{name} is one of the build's platforms: it has packages there", f"absent.{name}")
            continue
        out.append((name, Node(raw, node.path, node.build, f"{node.prefix}absent.").text(name)))
    return tuple(out)


def _l4t(node: Node, platforms: tuple[str, ...]) -> Optional[str]:
    """A Jetson build's L4T range (PEP 440), for aarch64 only."""
    text = node.text("l4t", required=False)
    if text is None:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        node.fail(f"{text!r} is not a range of L4T releases like '>=36.4,<37'", "l4t")
    if not str(spec):
        node.fail("empty: give the L4T releases the Jetson build runs on, like '>=36.4,<37'", "l4t")
    if platforms != (LINUX_AARCH64,):
        node.fail(f"a Jetson build (l4t) has packages for {LINUX_AARCH64} only, and this one lists "
                  f"{', '.join(platforms)}: set 'platforms: [{LINUX_AARCH64}]'", "l4t")
    return text  # (as written: SpecifierSet's own form sorts it, "<37,>=36.4")
