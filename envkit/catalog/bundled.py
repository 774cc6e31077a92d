"""The ``bundled:`` entries of a GPU build: libraries it ships whose GPU support is narrower than its own kernels.

Each entry names the library as users know it and the range of GPUs it serves: a floor (``min_compute_capability``,
the oldest), a ceiling (``max_compute_capability``, the newest), or both; and the oldest driver it runs on
(``min_driver``), where that is newer than the build's CUDA needs. A ceiling below its floor, or libraries whose
ranges leave no GPU that all of them serve, are errors naming the entry's field. Pure.
"""

from __future__ import annotations

from typing import Optional

from envkit.catalog.model import ArchSet, BundledLibrary
from envkit.catalog.node import Node, kind
from envkit.versions import ComputeCapability, DriverVersion

FLOOR, CEILING, DRIVER = "min_compute_capability", "max_compute_capability", "min_driver"
_KEYS = {"name", FLOOR, CEILING, DRIVER}


def parse_bundled(node: Node, release: Node, arch: Optional[ArchSet]) -> tuple[BundledLibrary, ...]:
    """The libraries a GPU build bundles (the build's own list, else its release's)."""
    owner = node if node.has("bundled") else release
    if not owner.has("bundled"):
        return ()
    if arch is None:
        owner.fail("only a GPU build bundles GPU libraries", "bundled")
    raw = owner.data["bundled"]
    if not isinstance(raw, list) or not raw:
        owner.fail(f"expected a list of {{name, {FLOOR}, {CEILING} and/or {DRIVER}}}, got {kind(raw)}", "bundled")
    out = []
    for position, item in enumerate(raw):
        # (named with the build judged, even where its release sets the list: each build's error says which)
        entry = Node(item, owner.path, node.build, f"{owner.prefix}bundled[{position}].")
        entry.only(_KEYS)
        name = entry.text("name")
        floor = entry.parsed(FLOOR, ComputeCapability.parse, required=False)
        ceiling = entry.parsed(CEILING, ComputeCapability.parse, required=False)
        driver = entry.parsed(DRIVER, DriverVersion.parse, required=False)
        if floor is None and ceiling is None and driver is None:
            entry.fail(f"missing: a bundled library gives the oldest GPU it serves ({FLOOR}), the newest "
                       f"({CEILING}), the oldest driver it runs on ({DRIVER}), or more of them", FLOOR)
        if floor is not None and ceiling is not None and ceiling < floor:
            entry.fail(f"{ceiling} is below the library's own floor, {floor}: it would serve no GPU", CEILING)
        out.append(BundledLibrary(name=name, min_compute_capability=floor, max_compute_capability=ceiling,
                                  min_driver=driver))
    libraries = tuple(out)
    _some_gpu_served(Node(owner.data, owner.path, node.build, owner.prefix), libraries)
    return libraries


def _some_gpu_served(owner: Node, libraries: tuple[BundledLibrary, ...]) -> None:
    floors = [(i, b) for i, b in enumerate(libraries) if b.min_compute_capability is not None]
    ceilings = [(i, b) for i, b in enumerate(libraries) if b.max_compute_capability is not None]
    if not floors or not ceilings:
        return
    high_at, high = max(floors, key=lambda pair: pair[1].min_compute_capability)
    low_at, low = min(ceilings, key=lambda pair: pair[1].max_compute_capability)
    if low.max_compute_capability < high.min_compute_capability:
        owner.fail(f"{low.name} serves compute capability {low.max_compute_capability} and older, but {high.name} "
                   f"(bundled[{high_at}]) needs {high.min_compute_capability} or newer: no GPU runs this build",
                   f"bundled[{low_at}].{CEILING}")
