"""``envkit manifests diff``: what an edit of the manifests changes for real machines. Pure functions.

For each target (one machine profile, or the machines of a site partition judged as a fleet), and each manifest of
either directory: the build envkit would select before and after the edit, and the builds that became compatible
or incompatible. A build that is new in the edit and fits counts as having become compatible; a build the edit
removed that used to fit, as having become incompatible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from envkit.catalog.model import Catalog, Manifest, Tables
from envkit.machines.fleet import THIS_MACHINE, Fleet, size_text


@dataclass(frozen=True)
class ManifestDiff:
    manifest: str
    before: Optional[str]  # the selected build id (None: nothing fits, or no such manifest)
    after: Optional[str]
    became_compatible: tuple[str, ...]
    became_incompatible: tuple[str, ...]
    in_old: bool = True  # whether each directory has the manifest (before/after None: nothing fits, or it has not)
    in_new: bool = True

    @property
    def changed(self) -> bool:
        return (self.before != self.after or bool(self.became_compatible or self.became_incompatible)
                or self.in_old != self.in_new)

    def to_dict(self) -> dict[str, Any]:
        return {"manifest": self.manifest, "before": self.before, "after": self.after, "changed": self.changed,
                "in_old": self.in_old, "in_new": self.in_new,
                "became_compatible": list(self.became_compatible),
                "became_incompatible": list(self.became_incompatible)}


@dataclass(frozen=True)
class TargetDiff:
    target: str  # a profile's name, or a partition's
    kind: str  # "machine" or "partition"
    machines: tuple[str, ...]
    manifests: tuple[ManifestDiff, ...]
    size: str = ""  # how many machines, in words (envkit.machines.fleet.size_text): "3 machines", "24 nodes"

    @property
    def changed(self) -> bool:
        return any(m.changed for m in self.manifests)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "kind": self.kind, "machines": list(self.machines), "changed": self.changed,
                "manifests": [m.to_dict() for m in self.manifests]}


def _verdict(manifest: Optional[Manifest], fleet: Fleet, tables: Tables) -> tuple[Optional[str], list[str]]:
    """(selected build id, compatible build ids in rank order) of a manifest for a fleet."""
    if manifest is None:
        return None, []
    from envkit.pick.fleet_resolve import resolve_fleet

    resolution = resolve_fleet(manifest, fleet, tables)
    selected = resolution.selected
    return (selected.build.id if selected else None), [c.build.id for c in resolution.resolution.compatible]


def diff_target(name: str, kind: str, fleet: Fleet, old: Catalog, new: Catalog) -> TargetDiff:
    changes = []
    for manifest in sorted(set(old.manifests) | set(new.manifests)):
        before, was = _verdict(old.manifests.get(manifest), fleet, old.tables)
        after, now = _verdict(new.manifests.get(manifest), fleet, new.tables)
        changes.append(ManifestDiff(
            manifest, before, after,
            became_compatible=tuple(b for b in now if b not in was),
            became_incompatible=tuple(b for b in was if b not in now),
            in_old=manifest in old.manifests, in_new=manifest in new.manifests,
        ))
    return TargetDiff(name, kind, fleet.names, tuple(changes), size_text(fleet))


def render_diff(diffs: Sequence[TargetDiff], say: Callable[[str], None], show_unchanged: bool = False) -> None:
    for position, target in enumerate(diffs):
        if position:
            say("")
        if target.kind == "machine":
            say(f"{THIS_MACHINE}:" if target.target == THIS_MACHINE else f"machine {target.target}:")
        else:
            say(f"{target.kind} {target.target} ({target.size}):")
        for change in target.manifests:
            if not change.changed:
                if show_unchanged:
                    say(f"  {change.manifest}: unchanged ({change.after or 'nothing fits'})")
                continue
            before = change.before or ("nothing fits" if change.in_old else f"no {change.manifest}.yaml")
            after = change.after or ("nothing fits" if change.in_new else f"no {change.manifest}.yaml")
            pick = f"{before} -> {after}" if change.before != change.after else f"still {after}"
            say(f"  {change.manifest}: {pick}")
            if change.became_compatible:
                say(f"    now fits: {', '.join(change.became_compatible)}")
            if change.became_incompatible:
                say(f"    no longer fits: {', '.join(change.became_incompatible)}")
        if not target.changed:
            say("  no change")
