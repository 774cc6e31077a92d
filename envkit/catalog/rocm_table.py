"""Schema checks of rocm.yaml, the AMD table of a manifests directory (envkit.machines.amd.AmdTable). Pure: data in,
the frozen table out, a ManifestError naming file and field otherwise.

A manifests directory may leave rocm.yaml out (one made before envkit knew AMD GPUs): it then has no ROCm facts, and a
manifest with ROCm builds says it needs the file."""

from __future__ import annotations

from typing import Any

from envkit.catalog.node import Node
from envkit.machines.amd import AmdTable, DriverRelease, PciDevice, pci_device_id
from envkit.versions import RocmVersion, parse_gfx


def parse_rocm_table(data: Any, path: str) -> AmdTable:
    node = Node(data, path)
    node.only({"gfx_targets", "pci_ids", "amdgpu_driver", "user_space"})
    targets = node.child("gfx_targets")
    if not targets.data:
        node.fail("missing or empty: the gfx targets envkit knows (gfx942: \"CDNA 3: AMD Instinct MI300X\")",
                  "gfx_targets")
    gfx_targets = {}
    for key in targets.data:
        gfx = _gfx(targets, key)
        gfx_targets[gfx] = targets.text(key)
    return AmdTable(gfx_targets=gfx_targets, pci_ids=_pci_ids(node, gfx_targets),
                    drivers=_drivers(node), user_space=_user_space(node))


def _gfx(node: Node, key: Any, value: Any = None) -> str:
    text = key if value is None else value
    node.check_scalar(text, str(key))
    try:
        return parse_gfx(str(text))
    except ValueError as exc:
        node.fail(str(exc), str(key))


def _pci_ids(node: Node, gfx_targets: dict[str, str]) -> dict[int, PciDevice]:
    if not node.has("pci_ids"):
        return {}
    ids = node.child("pci_ids")
    out: dict[int, PciDevice] = {}
    for key in ids.data:
        number = pci_device_id(key) if isinstance(key, str) else None
        if number is None:
            ids.fail(f"{key!r} is not a quoted PCI device id like \"0x74a1\"", str(key))
        if number in out:
            ids.fail(f"the device id {number:#06x} is listed twice", str(key))
        entry = ids.child(key)
        entry.only({"name", "gfx"})
        gfx = entry.parsed("gfx", parse_gfx, required=False)
        if gfx is not None and gfx not in gfx_targets:
            entry.fail(f"{gfx} is not in gfx_targets", "gfx")
        out[number] = PciDevice(name=entry.text("name"), gfx=gfx)
    return out


def _drivers(node: Node) -> tuple[DriverRelease, ...]:
    if not node.has("amdgpu_driver"):
        return ()
    rows = []
    for position, raw in enumerate(node.children("amdgpu_driver")):
        entry = Node(raw, node.path, prefix=f"amdgpu_driver[{position}].")
        entry.only({"version", "release", "unconfirmed"})
        version = entry.text("version")
        parts = tuple(int(part) for part in version.split(".")) if all(
            part.isascii() and part.isdigit() for part in version.split(".")) else None
        if parts is None or len(parts) > 3:
            entry.fail(f"{version!r} is not the start of an amdgpu version like \"6.12\"", "version")
        rows.append(DriverRelease(parts=parts, release=entry.text("release"),
                                  unconfirmed=entry.text("unconfirmed", required=False)))
    return tuple(rows)


def _user_space(node: Node) -> dict[str, tuple[RocmVersion, ...]]:
    if not node.has("user_space"):
        return {}
    table = node.child("user_space")
    out = {}
    for key in table.data:
        table.check_scalar(key, str(key))
        releases = []
        for position, text in enumerate(table.text_list(key)):
            try:
                releases.append(RocmVersion.parse(text))
            except ValueError as exc:
                table.fail(str(exc), f"{key}[{position}]")
        if not releases:
            table.fail("missing or empty: the ROCm releases supported on this driver", str(key))
        out[str(key)] = tuple(sorted(set(releases)))
    return out
