"""Writing the site file: a Site back to its file form, a partition added or replaced, saved atomically."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from envkit.site.model import SITE_VARIABLE, VERSION, Partition, Site, SiteNode


def site_to_dict(site: Site, inline_files: bool = False) -> dict[str, Any]:
    """The file form of ``site``, readable again by :func:`~envkit.site.read.load_site`. Profiles that came from a
    ``profile_file`` stay references unless ``inline_files`` (a copy written elsewhere, where the relative path would
    not hold)."""
    partitions: dict[str, Any] = {}
    for name, partition in site.partitions.items():
        entry: dict[str, Any] = {}
        if partition.surveyed is not None:
            entry["surveyed"] = partition.surveyed
        entry["nodes"] = [_node_dict(node, inline_files) for node in partition.nodes]
        if partition.unreachable:
            entry["unreachable"] = [{"node": node, "reason": reason} for node, reason in partition.unreachable]
        if partition.error is not None:
            entry["error"] = partition.error
        partitions[name] = entry
    head: dict[str, Any] = {"version": VERSION}
    if site.shared is not None:
        head["shared"] = str(site.shared)
    return {**head, "partitions": partitions}


def _node_dict(node: SiteNode, inline_files: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node.node is not None:
        out["node"] = node.node
    out["count"] = node.count
    if node.members:
        out["members"] = list(node.members)
    if node.profile_file is not None and not inline_files:
        out["profile_file"] = node.profile_file
    else:
        out["profile"] = node.profile.to_dict()
    return out


def with_partition(site: Site, partition: Partition) -> Site:
    """``site`` with ``partition`` added or replaced; the other partitions as they were, in their order."""
    partitions = dict(site.partitions)
    partitions[partition.name] = partition
    return replace(site, partitions=partitions, missing=False)


def save_site(site: Site, path: Path, force: bool = False) -> None:
    """Write ``site`` to ``path`` atomically (readers see the old file or the new, never half of it), never through
    a symbolic link (envkit.state.output: one is refused unless ``force``, which replaces the link)."""
    import yaml  # lazy: only survey writes a site file

    from envkit.errors import EnvkitError
    from envkit.state.files import real_path
    from envkit.state.output import write_output

    same_place = real_path(path).parent == real_path(site.path).parent
    text = yaml.safe_dump(site_to_dict(site, inline_files=not same_place), sort_keys=False, allow_unicode=True)
    try:
        write_output(path, text.encode("utf-8"), force=force, what="the site file")
    except OSError as exc:
        raise EnvkitError(f"cannot write the site file {path}: {exc.strerror or exc}",
                          hint=f"Point ${SITE_VARIABLE} at a file you can write, or ask whoever keeps {path}.") from None
