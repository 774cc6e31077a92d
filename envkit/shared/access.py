"""Who may publish into the shared directory, and whether it is safe to publish into.

An admin is root, the directory's owner, or a member of its group when the group may write it (the admins' group:
``chgrp envkit-admins SHARED; chmod 2775 SHARED``). A directory everyone may write is refused: anyone could replace an
environment others run. Every refusal is BadInputError (exit 2), raised before anything is written.
"""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path
from typing import Optional

from envkit.errors import BadInputError
from envkit.shared.layout import VARIABLE, SharedLayout

SETUP_HINT = ("An admin makes it once, e.g. `mkdir -p /opt/envkit && chgrp envkit-admins /opt/envkit && chmod 2775 "
              "/opt/envkit`, and names it for everyone with `shared: /opt/envkit` in the config (or $ENVKIT_SHARED).")


def require_root(root: Optional[Path]) -> SharedLayout:
    """The layout of the configured shared directory; BadInputError when none is configured."""
    if root is None:
        raise BadInputError("no shared directory is configured for this site",
                            hint=f"Set `shared: DIR` in envkit's config or the site file, or ${VARIABLE}. {SETUP_HINT}")
    return SharedLayout(root)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def in_group(gid: int) -> bool:
    return gid == os.getegid() or gid in os.getgroups()


def is_admin(root: Path) -> bool:
    """Whether this user publishes into ``root``: root, its owner, or a member of its group that may write it."""
    if os.geteuid() == 0:
        return True
    try:
        info = os.stat(root)
    except OSError:
        return False
    return info.st_uid == os.geteuid() or (in_group(info.st_gid) and bool(info.st_mode & stat.S_IWGRP))


def check_publishable(layout: SharedLayout) -> None:
    """BadInputError (exit 2) unless this user may publish into the shared directory and it is safe: it exists, is
    a directory, nobody but its owner and group may write it (nor its subdirectories envkit uses), and this user is
    an admin who can write it."""
    root = layout.root
    try:
        info = os.stat(root)
    except FileNotFoundError:
        raise BadInputError(f"the shared directory {root} does not exist", hint=SETUP_HINT) from None
    except OSError as error:
        raise BadInputError(f"the shared directory {root} cannot be read: {error.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise BadInputError(f"the shared directory {root} is not a directory", hint=SETUP_HINT)
    for path in (root, layout.envs, layout.records, layout.modulefiles, layout.state):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode) and path != root:
            raise BadInputError(f"{path} is a symbolic link: envkit publishes only into directories of the shared "
                                "directory itself", hint="Move it away, or name another shared directory.")
        if os.stat(path).st_mode & stat.S_IWOTH:
            raise BadInputError(f"{path} is writable by everyone: anyone could replace an environment others run, "
                                "so envkit publishes nothing there",
                                hint=f"Make it writable by the admins only: chmod o-w {path}")
    if not is_admin(root):
        raise BadInputError(f"only an admin publishes shared environments into {root} (root, its owner, or a member "
                            f"of its group {_group_name(info.st_gid)} when that group may write it)",
                            hint="Make the environment for yourself without --shared, or ask an admin to publish it.")
    if not os.access(root, os.W_OK | os.X_OK):
        raise BadInputError(f"the shared directory {root} is not writable by you",
                            hint=f"Let the admins' group write it: chmod g+w {root}")


def check_group(group: Optional[str]) -> Optional[int]:
    """The gid of ``--group G``, which must be a group this user is in (or any, for root); None without one."""
    if group is None:
        return None
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        raise BadInputError(f"--group {group}: there is no such group here",
                            hint="`getent group` lists them.") from None
    if os.geteuid() != 0 and not in_group(gid):
        raise BadInputError(f"--group {group}: you are not a member of it, so you cannot give files to it")
    return gid
