"""Line numbers for the fields named in manifest errors, from PyYAML's node marks.

A field is written the way ManifestError names it: ``releases[0].builds[2].pip.packages[0]``, ``min_driver.12.8``
(a key may itself contain dots, so keys are matched against the mapping, longest first).
"""

from __future__ import annotations

from typing import Any, Optional

from envkit.versions import is_ascii_number


def compose(text: str) -> Any:
    """The YAML node tree of ``text`` (with line marks), or None when it is empty or not valid YAML."""
    import yaml

    try:
        return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None


def syntax_error_line(text: str) -> Optional[int]:
    """The 1-based line of the first YAML syntax error in ``text``, or None."""
    import yaml

    try:
        yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        return mark.line + 1 if mark is not None else None
    return None


def line_of(root: Any, field: Optional[str]) -> Optional[int]:
    """The 1-based line of ``field`` in the tree, or of the deepest part of it that exists; None without a tree."""
    if root is None:
        return None
    node, rest, line = root, field or "", root.start_mark.line + 1
    while rest:
        found = _step(node, rest)
        if found is None:
            break
        node, rest, line = found
    return line


def _step(node: Any, rest: str) -> Optional[tuple[Any, str, int]]:
    """One path step down from ``node``: (child, what remains of the path, line of the child)."""
    import yaml

    if rest.startswith("["):
        end = rest.find("]")
        if end < 0 or not isinstance(node, yaml.SequenceNode) or not is_ascii_number(rest[1:end]):
            return None
        position = int(rest[1:end])
        if position >= len(node.value):
            return None
        child = node.value[position]
        return child, rest[end + 1 :].lstrip("."), child.start_mark.line + 1
    if not isinstance(node, yaml.MappingNode):
        return None
    best: Optional[tuple[Any, Any]] = None
    for key, value in node.value:
        text = str(key.value)
        if rest == text or rest.startswith(text + ".") or rest.startswith(text + "["):
            if best is None or len(text) > len(str(best[0].value)):
                best = (key, value)
    if best is None:
        return None
    key, value = best
    remaining = rest[len(str(key.value)) :].lstrip(".")
    # A scalar's problem is on its own line; a mapping or list starts on its key's line.
    line = value.start_mark.line + 1 if isinstance(value, yaml.ScalarNode) else key.start_mark.line + 1
    return value, remaining, line


def build_path(data: Any, manifest: str, build_id: str) -> Optional[str]:
    """Where the build ``build_id`` sits in a manifest's data: ``releases[i].builds[j]``, or None."""
    releases = data.get("releases") if isinstance(data, dict) else None
    for i, release in enumerate(releases if isinstance(releases, list) else []):
        if not isinstance(release, dict) or not isinstance(release.get("builds"), list):
            continue
        for j, build in enumerate(release["builds"]):
            if isinstance(build, dict) and _build_id(manifest, release, build) == build_id:
                return f"releases[{i}].builds[{j}]"
    return None


def _build_id(manifest: str, release: dict, build: dict) -> str:
    explicit = build.get("id")
    if explicit is not None:
        return str(explicit).strip()
    return f"{manifest}-{str(release.get('version', '')).strip()}-{str(build.get('variant', '')).strip()}"


def line_in_build(root: Any, data: Any, manifest: str, build_id: Optional[str], field: Optional[str]) -> Optional[int]:
    """The line of a build's field: in the build itself, else in its release or the manifest it inherits from."""
    if build_id is None:
        return line_of(root, field)
    where = build_path(data, manifest, build_id)
    if where is None:
        return line_of(root, field)
    release = where.split(".")[0]
    if not field:
        return line_of(root, where)
    for path in (f"{where}.{field}", f"{release}.{field}", field):
        if _exists(root, path):
            return line_of(root, path)
    return line_of(root, f"{where}.{field}")  # a missing field: the build's own line, or the deepest part found


def _exists(root: Any, field: str) -> bool:
    node, rest = root, field
    while rest:
        found = _step(node, rest)
        if found is None:
            return False
        node, rest, _ = found
    return True
