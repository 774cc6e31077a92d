"""Finding the shared directory this user reads, and a shared environment by the name `envkit envs` shows
(``site:NAME``)."""

from __future__ import annotations

from typing import Mapping, Optional

from envkit import ownership
from envkit.errors import UnknownNameError
from envkit.records import Record, is_name
from envkit.shared.layout import VARIABLE, SharedLayout, shared_name, shared_root, shown_name
from envkit.shared.store import all_shared, load_shared
from envkit.userdirs import UserDirs, has_config


def configured_layout(environ: Mapping[str, str], dirs: UserDirs) -> Optional[SharedLayout]:
    """The shared directory's layout ($ENVKIT_SHARED, else the config's ``shared:``), None when none is named."""
    configured = None
    if not shared_root(environ, None) and has_config(environ, dirs):
        from envkit.config import load_config

        configured = load_config(environ, dirs).shared
    root = shared_root(environ, configured)
    return SharedLayout(root) if root is not None else None


def find_shared(env: str, environ: Mapping[str, str], dirs: UserDirs, held: bool = True) -> Record:
    """The published record of ``site:NAME``; UnknownNameError (exit 2) naming the ones there are; with ``held``,
    NotHeld (exit 1) when its directory no longer holds it."""
    name = shared_name(env) or ""
    layout = configured_layout(environ, dirs)
    if layout is None:
        raise UnknownNameError(f"{env!r}: no shared directory is configured here, so there are no site environments",
                               hint=f"The site's admins name it (`shared:` in envkit's config, or ${VARIABLE}).")
    record = load_shared(layout, name) if is_name(name) else None
    if record is None:
        known = [shown_name(r.name) for r in all_shared(layout)]
        raise UnknownNameError(f"the site publishes no environment named {env!r}",
                               hint=f"It publishes: {', '.join(known)}." if known else
                               f"It publishes none yet (in {layout.root}).")
    if held:
        ownership.check_held(record)
    return record
