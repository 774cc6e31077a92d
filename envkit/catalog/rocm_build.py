"""Schema checks of a ROCm build (variant rocmX.Y): the ROCm user space it bundles and the gfx targets it carries,
against the manifests directory's rocm.yaml. Pure; errors name the file, build and field (envkit.catalog.node).

    gfx_sets:                      # optional, at the top of a manifest: named lists that builds refer to by name
      rocm7-wheels: [gfx900, gfx906, gfx908, gfx90a, gfx942, gfx950, gfx1030, gfx1100]
    ...
      - variant: rocm7.2           # rocm + the ROCm release (rocm6.2.4: a patch release the index is named for)
        rocm: "7.2"                # the ROCm release of the user space the build bundles
        gfx: rocm7-wheels          # its gfx targets: a gfx_sets name, or a list
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional

from envkit.catalog.node import Node
from envkit.catalog.model import Tables
from envkit.versions import RocmVersion, parse_gfx

ROCM_VARIANT = r"^rocm([0-9]{1,2})\.([0-9]{1,2})(\.[0-9]{1,3})?$"


def is_rocm_variant(variant: Optional[str]) -> bool:
    return bool(re.match(ROCM_VARIANT, variant or ""))


def parse_gfx_sets(node: Node, attempt: Callable[..., Any]) -> dict[str, Optional[tuple[str, ...]]]:
    """Each named gfx list; one with problems is None (its problems are said once, there)."""
    sets = node.child("gfx_sets")
    return {str(key): attempt(lambda: gfx_list(sets, str(key))) for key in sets.data}


def gfx_list(node: Node, key: str) -> tuple[str, ...]:
    entries = node.text_list(key)
    if not entries:
        node.fail("missing or empty: the gfx targets the build carries (gfx90a, gfx942, ...)", key)
    out = []
    for position, text in enumerate(entries):
        try:
            gfx = parse_gfx(text)
        except ValueError as exc:
            node.fail(str(exc), f"{key}[{position}]")
        if gfx in out:
            node.fail(f"{gfx} is listed twice", f"{key}[{position}]")
        out.append(gfx)
    return tuple(out)


def rocm_code(node: Node, variant: str, rocm: Optional[RocmVersion],
              gfx_sets: Optional[Mapping[str, Optional[tuple[str, ...]]]], tables: Tables) -> tuple[str, ...]:
    """A ROCm build's gfx targets, once its variant, ROCm release and targets agree with each other and with
    rocm.yaml. (The caller does not ask for a build whose gfx set has problems: those are said where the set is.)"""
    found = re.match(ROCM_VARIANT, variant)
    assert found is not None
    for key in ("cuda", "arch"):
        if node.has(key):
            node.fail(f"a ROCm build has no {key}: its runtime is rocm, its GPU code gfx", key)
    if rocm is None:
        node.fail(f"a {variant} build needs the ROCm release it bundles (rocm: \"{found.group(1)}.{found.group(2)}\")",
                  "rocm")
    if (int(found.group(1)), int(found.group(2))) != tuple(rocm):
        node.fail(f"{variant!r} does not name ROCm {rocm}: expected {rocm.tag} (or {rocm.tag}.N, a patch release)",
                  "variant")
    if not tables.amd.gfx_targets:
        node.fail("a ROCm build needs rocm.yaml in the manifests directory (copy it from envkit's envs/)", "rocm")
    known = {release for releases in tables.amd.user_space.values() for release in releases}
    if rocm not in known:
        node.fail(f"ROCm {rocm} is in no row of rocm.yaml's user_space table", "rocm")
    written = node.data.get("gfx")
    if isinstance(written, str):
        if gfx_sets is None or written not in gfx_sets:
            node.fail(f"no gfx set named {written!r} in gfx_sets ({', '.join(gfx_sets or {}) or 'none defined'})",
                      "gfx")
        targets = gfx_sets[written]
        assert targets is not None  # a set with problems is said there, and its builds are not checked
    else:
        targets = gfx_list(node, "gfx")
    unknown = [gfx for gfx in targets if gfx not in tables.amd.gfx_targets]
    if unknown:
        node.fail(f"{unknown[0]} is not a target rocm.yaml's gfx_targets knows", "gfx")
    return targets
