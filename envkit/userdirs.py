"""The user's own directories, by the XDG base-directory rules: the only places envkit writes besides environments.

Pure: computed from the environment variables, created by whoever writes there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, NamedTuple

APP = "envkit"


class UserDirs(NamedTuple):
    """Where envkit keeps the user's configuration, environments and cache."""

    config: Path  # config.yaml
    data: Path  # environments, their records, locks
    cache: Path  # downloaded packages (uv's cache, conda packages)

    @property
    def envs(self) -> Path:
        """Where environments go when the user gives no --prefix and no `envs_dir` in the config."""
        return self.data / "envs"

    @property
    def records(self) -> Path:
        """The index of environments envkit made: one record file per environment name."""
        return self.data / "records"

    @property
    def locks(self) -> Path:
        return self.data / "locks"

    @property
    def uv_cache(self) -> Path:
        return self.cache / "uv"

    @property
    def conda_packages(self) -> Path:
        return self.cache / "conda-pkgs"


def user_dirs(environ: Mapping[str, str]) -> UserDirs:
    """envkit's directories under $XDG_CONFIG_HOME, $XDG_DATA_HOME and $XDG_CACHE_HOME (or their defaults)."""
    home = Path(_home(environ))

    def base(variable: str, default: str) -> Path:
        value = environ.get(variable, "")
        # The spec: a relative path in these variables is invalid and must be ignored.
        return Path(value) if os.path.isabs(value) else home / default

    return UserDirs(
        config=base("XDG_CONFIG_HOME", ".config") / APP,
        data=base("XDG_DATA_HOME", ".local/share") / APP,
        cache=base("XDG_CACHE_HOME", ".cache") / APP,
    )


def _home(environ: Mapping[str, str]) -> str:
    """$HOME when it is an absolute path, else the user's home from the password database: a relative $HOME would
    put environments, and the records that name them, under whatever directory envkit was started in."""
    home = environ.get("HOME", "")
    if os.path.isabs(home):
        return home
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # a uid with no entry (a container's): the root, never the working directory
        return "/"
