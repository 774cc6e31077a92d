"""Finding the shared directory this user reads, and a shared environment by the name `envkit envs` shows
(``site:NAME``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional

from envkit.errors import UnknownNameError
from envkit.shared.layout import VARIABLE, SharedLayout, shared_name, shared_root, shown_name
from envkit.shared.store import all_shared, load_shared
from envkit.state import ownership
from envkit.state.records import Record, is_name
from envkit.state.userdirs import UserDirs, has_config


def shared_directory(environ: Mapping[str, str], dirs: UserDirs, config: Any = None) -> Optional[Path]:
    """The shared directory this user reads and an admin publishes into: $ENVKIT_SHARED (a module or a profile
    script sets it), else the config's ``shared:``, else the site file's ``shared:`` (the one file an admin keeps
    for the whole cluster); None when none names one. ``config``: the config when the caller has loaded it."""
    root = shared_root(environ, None)
    if root is not None:
        return root
    if config is None and has_config(environ, dirs):
        from envkit.state.config import load_config

        config = load_config(environ, dirs)
    if config is not None and config.shared is not None:
        return config.shared
    from envkit.site.read import load_site, site_path

    path = site_path(environ, config, dirs)
    if not os.path.lexists(path):  # most users' case: no site file to read
        return None
    return load_site(path, dirs.cache).shared


def configured_layout(environ: Mapping[str, str], dirs: UserDirs) -> Optional[SharedLayout]:
    """The shared directory's layout (:func:`shared_directory`), None when none is named."""
    root = shared_directory(environ, dirs)
    return SharedLayout(root) if root is not None else None


def find_shared(env: str, environ: Mapping[str, str], dirs: UserDirs, held: bool = True) -> Record:
    """The published record of ``site:NAME``; UnknownNameError (exit 2) naming the ones there are; with ``held``,
    NotHeld (exit 1) when its directory no longer holds it."""
    name = shared_name(env) or ""
    layout = configured_layout(environ, dirs)
    if layout is None:
        raise UnknownNameError(f"{env!r}: no shared directory is configured here, so there are no site environments",
                               hint=f"The site's admins name it (`shared:` in envkit's config or the site file, or "
                                    f"${VARIABLE}).")
    record = load_shared(layout, name) if is_name(name) else None
    if record is None:
        known = [shown_name(r.name) for r in all_shared(layout)]
        raise UnknownNameError(f"the site publishes no environment named {env!r}",
                               hint=f"It publishes: {', '.join(known)}." if known else
                               f"It publishes none yet (in {layout.root}).")
    if held:
        from envkit.shared.store import ask_admins

        check_reachable(env, record)
        ownership.check_held(record, shown_name(record.name), ask_admins(record))
    return record


def check_reachable(env: str, record: Record) -> None:
    """EnvkitError (exit 1) when this user cannot run the shared environment's Python (a directory on the way to it,
    or to the interpreter a venv runs on, that they may not enter): the path, its owner, and whom to ask."""
    from envkit.errors import EnvkitError
    from envkit.shared.reach import first_blocked, for_me, python_needs
    from envkit.shared.store import ask_admins

    found = first_blocked(python_needs(Path(record.prefix)), for_me)
    if found is not None:
        raise EnvkitError(f"{env} is out of your reach: {found.words('you')}",
                          hint=ask_admins(record) + " envkit publishes only what every user it is for can run.")
