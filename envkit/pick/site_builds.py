"""A site at a glance: for every partition of the site file (and each of its node configurations), the build envkit
would pick there from every manifest. Pure: the site's partitions, a catalog and its tables in, rows out.

A partition's own row is what `envkit create MANIFEST --partition P` would make (the build that fits every
configuration, as `resolve_fleet` judges a fleet); a configuration's row is what `--partition P:NODE` would make for
one of its nodes. A cell is a build id, a CPU build (with the reason the GPUs go unused), nothing that fits, or a
partition whose configurations need different builds (with how many groups).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Optional, Sequence

if TYPE_CHECKING:
    from envkit.catalog.model import Manifest, Tables
    from envkit.machines.fleet import Config, Fleet


class Cell(NamedTuple):
    """What one manifest gives on one row."""

    build: Optional[str]  # the build id picked; None where no build fits every machine of the row
    gpu: bool  # whether the pick is a GPU build
    reason: Optional[str] = None  # why a CPU build, no build, or a split: the reason on request

    @property
    def label(self) -> str:
        if self.build is None:
            return "split" if self.reason and self.reason.startswith("no build runs on every") else "none"
        return self.build if self.gpu else f"CPU ({self.build})"


class Row(NamedTuple):
    """A partition as a whole (``machines`` empty) or one of its node configurations."""

    partition: str
    machines: tuple[str, ...]  # the configuration's machines (site file entries); () for the partition's own row
    nodes: int
    gpus: str  # "2x NVIDIA A100-SXM4-80GB (8.0)", "no GPU"
    cuda_driver: Optional[str]
    cells: Mapping[str, Cell]  # manifest name -> cell, in the catalog's order
    platform: str = "linux-64"  # the configuration's; a partition's own row: each of its configurations', in order


def site_rows(partitions: Sequence[tuple[str, "Fleet"]], manifests: Sequence["Manifest"], tables: "Tables"
              ) -> list[Row]:
    """The rows of the table: each partition, then its configurations when it has more than one."""
    from envkit.pick.fleet_resolve import resolve_fleet

    rows = []
    for name, fleet in partitions:
        configs = fleet.configs()
        single = configs[0] if len(configs) == 1 else None
        if single is not None:  # one configuration, however many nodes: judged as one machine
            whole = _config_cells(single, manifests, tables)
        else:
            whole = {m.name: _fleet_cell(resolve_fleet(m, fleet, tables)) for m in manifests}
        platforms = ", ".join(dict.fromkeys(config.profile.platform for config in configs))
        rows.append(Row(name, (), fleet.node_count, describe_gpus(single) if single else
                        f"{len(configs)} configurations", _cuda(single), whole, platforms))
        if len(configs) > 1:
            rows += [_config_row(name, config, manifests, tables) for config in configs]
    return rows


def _config_row(partition: str, config: "Config", manifests: Sequence["Manifest"], tables: "Tables") -> Row:
    return Row(partition, config.names, config.node_count, describe_gpus(config), _cuda(config),
               _config_cells(config, manifests, tables), config.profile.platform)


def _config_cells(config: "Config", manifests: Sequence["Manifest"], tables: "Tables") -> dict[str, Cell]:
    from envkit.pick.cpu_fallback import gpu_unused
    from envkit.pick.resolve import resolve

    cells = {}
    for manifest in manifests:
        resolution = resolve(manifest, config.profile, tables)
        selected = resolution.selected
        if selected is None:
            cells[manifest.name] = Cell(None, False, _nothing_fits(resolution.candidates))
        else:
            cells[manifest.name] = Cell(selected.build.id, selected.build.is_gpu,
                                        gpu_unused(resolution, config.profile))
    return cells


def _fleet_cell(resolved: Any) -> Cell:
    """A partition's cell from its FleetResolution."""
    from envkit.text.words import counted

    if resolved.split and resolved.platforms:
        return Cell(None, False, f"no build runs on every configuration: the nodes are of "
                                 f"{len(resolved.platforms)} platforms ({', '.join(resolved.platforms)}), split into "
                                 f"{counted(len(resolved.groups), 'group')} (envkit create ... --partition P prints "
                                 "one command per group)")
    if resolved.split:
        return Cell(None, False, f"no build runs on every configuration: split into "
                                 f"{counted(len(resolved.groups), 'group')} (envkit create ... --partition P "
                                 f"prints one command per group)")
    selected = resolved.selected
    if selected is None:
        return Cell(None, False, _nothing_fits(resolved.resolution.candidates))
    reason = None
    if not selected.build.is_gpu and any(c.build.is_gpu for c in resolved.resolution.candidates):
        gpu = next(c for c in resolved.resolution.candidates if c.build.is_gpu)
        reason = "no GPU build runs on every node: the closest, " + gpu.build.id + ", " + (
            "; ".join(gpu.reasons) or "does not fit")
    return Cell(selected.build.id, selected.build.is_gpu, reason)


def _nothing_fits(candidates: Sequence[Any]) -> str:
    first = candidates[0] if candidates else None
    if first is None:
        return "the manifest has no builds"
    return f"no build fits: the closest, {first.build.id}, " + ("; ".join(first.reasons) or "does not fit")


def describe_gpus(config: Optional["Config"]) -> str:
    if config is None or not config.profile.gpus:
        return "no GPU" if config is None or config.profile.platform == "linux-64" else \
            f"no GPU, {config.profile.platform}"
    counts: dict[str, int] = {}
    for gpu in config.profile.gpus:
        counts[gpu.description] = counts.get(gpu.description, 0) + 1
    gpus = ", ".join(f"{n}x {key}" if n > 1 else key for key, n in counts.items())
    return gpus if config.profile.platform == "linux-64" else f"{gpus}, {config.profile.platform}"


def _cuda(config: Optional["Config"]) -> Optional[str]:
    if config is None or not config.profile.cuda_driver:
        return None
    return str(config.profile.cuda_driver)


def rows_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [{"partition": row.partition, "machines": list(row.machines), "nodes": row.nodes, "gpus": row.gpus,
             "cuda_driver": row.cuda_driver, "platform": row.platform,
             "builds": {name: {"build": cell.build, "gpu": cell.gpu, "reason": cell.reason}
                        for name, cell in row.cells.items()}}
            for row in rows]


def rows_text(rows: Sequence[Row], manifests: Sequence[str], reasons: bool) -> str:
    """The table: partitions (and their configurations, indented) down, manifests across; with ``reasons`` each CPU,
    split or empty cell's reason below the table."""
    from envkit.machines.fleet import names_text

    header = ["PARTITION", "NODES", "GPUS", "CUDA", *(name.upper() for name in manifests)]
    table = [header]
    notes = []
    for row in rows:
        label = row.partition if not row.machines else "  " + names_text(row.machines, most=2)
        table.append([label, str(row.nodes), row.gpus, row.cuda_driver or "-",
                      *(row.cells[name].label for name in manifests)])
        where = row.partition + (f" ({names_text(row.machines)})" if row.machines else "")
        notes += [f"{where}, {name}: {row.cells[name].reason}" for name in manifests if row.cells[name].reason]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]
    if reasons and notes:
        lines += ["", *notes]
    elif notes:
        lines += ["", "CPU, split and none cells have reasons: envkit site --builds --reasons"]
    return "\n".join(lines)
