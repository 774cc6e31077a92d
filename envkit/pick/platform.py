"""Whether a build has packages for a machine's platform, and on a Jetson whether it is one its GPU runs. Pure.

- A build runs only on the platforms it lists (envkit.catalog.platforms); elsewhere it is refused with the reason
  its manifest gives ("no aarch64 packages: tensorflow's aarch64 wheels carry no CUDA"), else the platforms it has.
- A Jetson build (one with an L4T range) runs only on a Jetson whose L4T release is in that range: "built for
  JetPack 6" is refused on JetPack 5, and on any machine that is not a Jetson.
- A Jetson is never judged as a discrete GPU: an ordinary aarch64 (SBSA) GPU build is refused on it unless its
  JetPack runs those packages (cuda.yaml's ``sbsa: true``: JetPack 7 on Thor), and one whose JetPack envkit does not
  know gets no GPU build. CPU builds for aarch64 run on every Jetson.
"""

from __future__ import annotations

from typing import Optional

from envkit.catalog.model import Build, Tables
from envkit.machines.platforms import machine_of
from envkit.machines.profile import MachineProfile
from envkit.versions import L4tVersion


def platform_problem(build: Build, profile: MachineProfile, tables: Tables) -> Optional[str]:
    """Why ``build`` (as it is on the machine's platform: Build.on) does not install or run on the machine's
    platform, or None."""
    platform = profile.platform
    if build.is_jetson and profile.l4t is None:
        return f"a Jetson build (for L4T {build.l4t}): the machine is not a Jetson (its profile has no l4t)"
    if platform not in build.platforms:
        why = build.absent_reason(platform) or f"the build has packages for {', '.join(build.platforms)} only"
        return f"no {machine_of(platform)} packages ({platform}): {why}"
    if build.is_jetson:
        return _jetson_build(build, profile, tables)
    if profile.l4t is not None and build.is_gpu:
        return _generic_on_jetson(profile.l4t, tables)
    return None


def _jetson_build(build: Build, profile: MachineProfile, tables: Tables) -> Optional[str]:
    assert build.l4t is not None and profile.l4t is not None
    if in_range(profile.l4t, build.l4t):
        return None
    return f"built for Jetsons of L4T {build.l4t}; this one is {jetpack_words(profile.l4t, tables)}"


def _generic_on_jetson(l4t: L4tVersion, tables: Tables) -> Optional[str]:
    jetpack = tables.cuda.jetpack_for(l4t)
    if jetpack is None:
        return (f"L4T {l4t} is a JetPack envkit does not know (cuda.yaml's jetpack table has no L4T {l4t.major} "
                "row): no GPU build is judged to run on this Jetson")
    if jetpack.sbsa:
        return None
    return (f"a generic aarch64 CUDA build: its CUDA libraries are for server ARM (SBSA), not for a Jetson's "
            f"integrated GPU under {jetpack.describe(l4t)}; only builds made for Jetson run there")


def jetpack_words(l4t: L4tVersion, tables: Tables) -> str:
    jetpack = tables.cuda.jetpack_for(l4t)
    return jetpack.describe(l4t) if jetpack else f"L4T {l4t}"


def in_range(l4t: L4tVersion, spec: str) -> bool:
    """Whether an L4T release is in a Jetson build's range (">=36.4,<37")."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return SpecifierSet(spec).contains(Version(str(l4t)))
