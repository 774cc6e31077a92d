"""Where envkit's things are for this user, as every command finds them: envkit's directories (config, data, cache),
the uv installed with envkit and the environment it runs in, the manifests directory and the site file. Below the
options and the output helpers (envkit.commands.output), so that anything the options need (shell completion) can
reach them without a loop."""

from pathlib import Path
from typing import Optional


def user_dirs():
    import os

    from envkit.state.userdirs import user_dirs as dirs_of

    return dirs_of(os.environ)


def uv_binary() -> Path:
    """The uv that is installed with envkit (lock, export, manifests check --resolve), or a clean error."""
    from envkit.backends.tools import installed_uv

    uv = installed_uv()
    if uv is None:
        from envkit.errors import EnvkitError

        raise EnvkitError("uv, which is installed with envkit, is missing", hint="Reinstall envkit.")
    return uv


def uv_environ():
    """The environment uv runs in: envkit's own uv cache, no user configuration (envkit.backends.installers)."""
    import os

    from envkit.backends.installers import installer_environ

    return installer_environ(os.environ, user_dirs())


def manifests_dir(manifests: Optional[Path]) -> Path:
    """--manifests (or $ENVKIT_MANIFESTS), else the config's ``manifests:``, else the shipped manifests."""
    from envkit.catalog import default_manifests_dir

    if manifests is None:
        import os

        if os.environ.get("ENVKIT_MANIFESTS") is not None:  # set but empty: typer takes it for unset
            from envkit.errors import BadInputError

            raise BadInputError("$ENVKIT_MANIFESTS is empty", hint="Unset it, or give a manifests directory.")
        from envkit.state.userdirs import has_config

        dirs = user_dirs()
        if not has_config(os.environ, dirs):  # as most users have none: envkit.state.config is not even imported
            return default_manifests_dir()
        from envkit.state.config import load_config

        return load_config(os.environ, dirs).manifests or default_manifests_dir()
    return manifests  # never empty: the option's parser refuses "" (which Path would read as ".")


def current_site():
    """The site file envkit reads here ($ENVKIT_SITE, the config's ``site:``, else the default), loaded."""
    import os

    from envkit.site import load_site, site_path
    from envkit.state.config import load_config

    dirs = user_dirs()
    return load_site(site_path(os.environ, load_config(os.environ, dirs), dirs), dirs.cache)
