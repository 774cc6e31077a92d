"""Reading the site file: where it is (``$ENVKIT_SITE``, the config's ``site:``, the user config directory) and
its text into a validated :class:`~envkit.site.model.Site`, every error naming the file and the field."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Mapping, Optional

from envkit.errors import BadInputError, ProfileError
from envkit.machines.profile import not_text, profile_from_dict, read_profile
from envkit.site.model import (MAX_NODE_COUNT, SITE_VARIABLE, VERSION, Partition, Site, SiteError, SiteNode,
                               valid_name)
from envkit.text.words import described

_TOP_KEYS = ("version", "shared", "partitions")
_PARTITION_KEYS = ("surveyed", "nodes", "unreachable", "error")
_NODE_KEYS = ("node", "count", "members", "profile", "profile_file")
_EMPTY_HINT = ("A site file holds `version: 1` and `partitions:`, each partition's `nodes` with an inline `profile` "
               "(as `envkit detect --json` prints it) or a `profile_file`; `envkit survey` writes one where there is "
               "no file (delete the empty one), and the README shows the format.")


def site_path(environ: Mapping[str, str], config: Any, dirs: Any) -> Path:
    """``$ENVKIT_SITE``, else the config's ``site:`` key, else ``site.yaml`` in the user config directory."""
    named = environ.get(SITE_VARIABLE)
    if named is not None:
        if not named.strip():
            raise BadInputError(f"${SITE_VARIABLE} is empty", hint="Unset it, or give the path of a site file.")
        from envkit.state.files import user_path

        try:
            return user_path(named)
        except ValueError as exc:
            raise BadInputError(f"${SITE_VARIABLE} {named!r} {exc}") from None
    configured = getattr(config, "site", None)
    if configured is not None:
        return Path(configured)
    return Path(dirs.config) / "site.yaml"


def load_site(path: Path, cache_dir: Optional[Path] = None) -> Site:
    """The site file at ``path``, validated; an empty site (``missing=True``) when there is no file."""
    from envkit.state.filecache import cached

    try:
        path.stat()
    except FileNotFoundError:  # (a link to nothing yet included: survey writes through it)
        return Site(path=path, partitions={}, missing=True)
    except OSError as exc:  # a symlink loop, a directory it may not enter: not "no site file"
        raise SiteError(path, "", f"cannot be read: {exc.strerror or exc}") from None

    def parse() -> Any:
        from envkit.state.yamltext import parse_yaml

        from envkit.state.files import read_text_file

        try:
            text = read_text_file(path, "site file")
        except FileNotFoundError:
            raise SiteError(path, "", "cannot be read: it does not exist") from None
        except ValueError as exc:
            raise SiteError(path, "", str(exc)) from None
        try:
            return parse_yaml(text)
        except ValueError as exc:
            raise SiteError(path, "", f"not valid YAML or JSON: {exc}") from None

    return site_from_dict(cached(cache_dir, "yaml", [path], ("state/yamltext.py",), parse), path, cache_dir)


def site_from_dict(data: Any, path: Path, cache_dir: Optional[Path] = None) -> Site:
    # No writer of a site file leaves it empty or without 'partitions' (survey writes both, atomically): such a
    # file is a mistake (a truncated copy, a failed `> site.yaml`), not a site without partitions.
    if data is None:
        raise SiteError(path, "", "is empty", hint=_EMPTY_HINT)
    if not isinstance(data, Mapping):
        raise SiteError(path, "", "expected a mapping with 'version' and 'partitions' keys")
    _no_unknown_keys(data, _TOP_KEYS, path, "")
    version = data.get("version", VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise SiteError(path, "version", f"this envkit reads version {VERSION}, the file says {version!r}")
    if "partitions" not in data:
        raise SiteError(path, "partitions", "missing (a mapping of partition names to their nodes; {} for none)",
                        hint=_EMPTY_HINT)
    raw = data["partitions"]
    if not isinstance(raw, Mapping):
        raise SiteError(path, "partitions",
                        f"expected a mapping of partition names to partitions, got {described(raw)}")
    partitions = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not valid_name(name):
            raise SiteError(path, f"partitions.{name}", not_text(name)
                            or "a partition name is letters, digits, '_', '.', '+', '-'")
        partitions[name] = _partition(name, entry, path, cache_dir)
    return Site(path=path, partitions=partitions, shared=_shared(data.get("shared"), path))


def _shared(value: Any, path: Path) -> Optional[Path]:
    """The site's shared directory (envkit.shared): an absolute path, as every user and node reads the one file."""
    import os

    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SiteError(path, "shared", not_text(value) or f"expected a directory path, got {described(value)}")
    if not os.path.isabs(value) or "\0" in value:
        raise SiteError(path, "shared", f"{value!r} must be an absolute path (every user and node reads this file)",
                        hint="Name the shared directory by its absolute path, e.g. `shared: /opt/envkit`.")
    return Path(os.path.normpath(value))


def _no_unknown_keys(data: Mapping, keys: tuple[str, ...], path: Path, where: str) -> None:
    unknown = sorted(str(key) for key in data if key not in keys)
    if unknown:
        field = f"{where}.{unknown[0]}" if where else unknown[0]
        raise SiteError(path, field, f"unknown key (the keys are: {', '.join(keys)})")


def _partition(name: str, entry: Any, path: Path, cache_dir: Optional[Path]) -> Partition:
    where = f"partitions.{name}"
    if not isinstance(entry, Mapping):
        raise SiteError(path, where, f"expected a mapping with 'nodes', got {described(entry)}")
    _no_unknown_keys(entry, _PARTITION_KEYS, path, where)
    # A partition lists its nodes, or says why it has none (survey writes the error of one it could not reach).
    if "nodes" not in entry and entry.get("error") is None and not entry.get("unreachable"):
        raise SiteError(path, f"{where}.nodes", "missing (a list of the partition's nodes, or an 'error' saying why "
                        "there are none)")
    raw_nodes = entry.get("nodes", [])
    if not isinstance(raw_nodes, list):
        raise SiteError(path, f"{where}.nodes", f"expected a list of nodes, got {described(raw_nodes)}")
    nodes = tuple(_node(item, f"{where}.nodes[{i}]", path, cache_dir) for i, item in enumerate(raw_nodes))
    return Partition(
        name=name, nodes=nodes, surveyed=_surveyed(entry.get("surveyed"), path, f"{where}.surveyed"),
        unreachable=_unreachable(entry.get("unreachable"), path, f"{where}.unreachable"),
        error=_text(entry.get("error"), path, f"{where}.error"),
    )


def _node(item: Any, where: str, path: Path, cache_dir: Optional[Path]) -> SiteNode:
    if not isinstance(item, Mapping):
        raise SiteError(path, where, "expected a mapping with 'profile' or 'profile_file'")
    _no_unknown_keys(item, _NODE_KEYS, path, where)
    node = item.get("node")
    if node is not None and (not isinstance(node, str) or not valid_name(node)):
        raise SiteError(path, f"{where}.node", not_text(node) or "expected a node name (letters, digits, '_', '.', "
                        f"'+', '-', not starting with '-'), got {node!r}")
    count = item.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_NODE_COUNT:
        raise SiteError(path, f"{where}.count", f"expected a whole number of nodes from 1 to {MAX_NODE_COUNT} (more "
                        f"than any cluster has), got {count!r}")
    members = _members(item.get("members"), count, path, f"{where}.members")
    inline, file = item.get("profile"), item.get("profile_file")
    if (inline is None) == (file is None):
        raise SiteError(path, where, "give either 'profile' (inline) or 'profile_file', exactly one")
    if file is not None:
        if not isinstance(file, str) or not file.strip():
            raise SiteError(path, f"{where}.profile_file", not_text(file) or f"expected a file path, got {file!r}")
        from envkit.state.files import user_path

        try:
            profile = read_profile(path.parent / user_path(file), cache_dir)
        except ValueError as exc:
            raise SiteError(path, f"{where}.profile_file", f"{file!r} {exc}") from None
        except ProfileError as exc:
            raise SiteError(path, f"{where}.profile_file", exc.message) from None
        return SiteNode(node=node, count=count, profile=profile, profile_file=file, members=members)
    origin = f"{path}, {where}.profile"
    try:
        profile = profile_from_dict(inline, origin)
    except ProfileError as exc:
        problem = exc.message.removeprefix(f"machine profile {origin}: ")
        raise SiteError(path, f"{where}.profile", problem) from None
    # What the node said about itself when surveyed (survey writes it; profile_from_dict checked it is text and
    # keeps its own: the GPUs the job hid, which the site does not count).
    profile = profile._replace(notes=(*(inline.get("notes") or ()), *profile.notes))
    return SiteNode(node=node, count=count, profile=profile, members=members)


def _members(value: Any, count: int, path: Path, where: str) -> tuple[str, ...]:
    """An entry's ``members``: the Slurm names of the nodes it stands for, at most ``count`` of them, each once."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SiteError(path, where, f"expected a list of node names, got {described(value)}")
    for i, name in enumerate(value):
        if not isinstance(name, str) or not valid_name(name):
            raise SiteError(path, f"{where}[{i}]", not_text(name) or "expected a node name (letters, digits, '_', "
                            f"'.', '+', '-', not starting with '-'), got {name!r}")
    if len(set(value)) != len(value) or len(value) > count:
        raise SiteError(path, where, f"expected at most {count} node names (the entry's count), each once; got "
                        f"{len(value)}")
    return tuple(value)


def _surveyed(value: Any, path: Path, where: str) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, _dt.date):  # YAML reads an unquoted timestamp as a datetime, a day as a date (midnight)
        moment = value if isinstance(value, _dt.datetime) else _dt.datetime.combine(value, _dt.time())
    else:
        if not isinstance(value, str):
            raise SiteError(path, where, f"expected an ISO 8601 time like '2026-11-22T17:00:00Z', got {value!r}")
        try:
            moment = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise SiteError(path, where, f"expected an ISO 8601 time like '2026-11-22T17:00:00Z', got {value!r}") \
                from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _unreachable(value: Any, path: Path, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SiteError(path, where, "expected a list of {node, reason}")
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            raise SiteError(path, f"{where}[{i}]", "expected {node: NAME, reason: TEXT}")
        _no_unknown_keys(entry, ("node", "reason"), path, f"{where}[{i}]")
        for key in ("node", "reason"):
            misread = not_text(entry.get(key))  # a number or true/false: YAML's reading of unquoted text
            if misread or not isinstance(entry.get(key), str):
                raise SiteError(path, f"{where}[{i}]" + (f".{key}" if misread else ""),
                                misread or "expected {node: NAME, reason: TEXT}")
        out.append((entry["node"], entry["reason"]))
    return tuple(out)


def _text(value: Any, path: Path, where: str) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise SiteError(path, where, not_text(value) or f"expected text, got {value!r}")
