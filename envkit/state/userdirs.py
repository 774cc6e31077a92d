"""The user's own directories, by the XDG base-directory rules: the only places envkit writes besides environments;
and where the config file is (envkit.state.config reads it).

Pure: computed from the environment variables, created by whoever writes there; has_config alone looks whether a
file is there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, NamedTuple

from envkit.errors import ConfigError
from envkit.state.files import user_path

APP = "envkit"
CONFIG_VARIABLE = "ENVKIT_CONFIG"


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


def config_path(environ: Mapping[str, str], dirs: UserDirs) -> tuple[Path, bool]:
    """The config file to read and whether the user named it explicitly ($ENVKIT_CONFIG)."""
    named = environ.get(CONFIG_VARIABLE)
    if named is not None:
        if not named.strip():
            raise ConfigError(f"${CONFIG_VARIABLE} is empty", hint="Unset it, or give the path of a config file.")
        try:
            return user_path(named), True
        except ValueError as error:
            raise ConfigError(f"${CONFIG_VARIABLE} {named!r} {error}") from None
    return dirs.config / "config.yaml", False


def has_config(environ: Mapping[str, str], dirs: UserDirs) -> bool:
    """Whether there is a config file to read: the one $ENVKIT_CONFIG names (reading it says when it is missing), or
    config.yaml in the config directory (a link to nothing counts: it is a config the user meant). Most users have
    none, and a command that finds none need not import envkit.state.config (about 0.5 ms of `envkit list`)."""
    path, named = config_path(environ, dirs)
    return named or os.path.lexists(path)


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
