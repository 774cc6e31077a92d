"""envkit's config file: mirrors for package indexes and conda channels, and where environments go.

``$ENVKIT_CONFIG`` names the file; else ``config.yaml`` in the user config dir (a missing default file is an empty
config). Example::

    mirrors:
      "https://download.pytorch.org/whl": "http://127.0.0.1:8080/whl"
      "https://pypi.org/simple": "http://127.0.0.1:8080/pypi/simple"
      "https://conda.anaconda.org/conda-forge": "file:///srv/channels/conda-forge"
    envs_dir: /scratch/me/envkit-envs     # optional: environments go here instead of the user data dir
    cache_dir: /scratch/me/envkit-cache   # optional: uv's, pip's and the conda engine's package caches (default:
                                          # envkit's cache dir, or <envs_dir>/.envkit-cache when hard links from
                                          # there into envs_dir fail; $ENVKIT_CACHE_DIR wins over it)
    site: /shared/envkit/site.yaml        # optional: the site file (partitions and their node profiles)
    manifests: /shared/envkit/manifests   # optional: an admin's manifests directory instead of the shipped one
    shared: /opt/envkit                   # optional: the site's shared environments (envkit.shared)

A mirror maps every URL that starts with its upstream (at a path boundary) to the same path under the mirror.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional
from urllib.parse import urlsplit

from envkit.errors import BadInputError, ConfigError
from envkit.state.files import read_text_file, user_path
from envkit.state.userdirs import CONFIG_VARIABLE, UserDirs, config_path, has_config
from envkit.text.words import described

_KEYS = ("mirrors", "envs_dir", "site", "manifests", "cache_dir", "shared")


class Mirror(NamedTuple):
    upstream: str  # no trailing slash
    target: str  # no trailing slash


class Config(NamedTuple):
    path: Optional[Path]  # the file read, None when there was none
    mirrors: tuple[Mirror, ...] = ()
    envs_dir: Optional[Path] = None
    site: Optional[Path] = None  # the site file named by the config (envkit.site)
    manifests: Optional[Path] = None  # the manifests directory named by the config (--manifests wins)
    cache_dir: Optional[Path] = None  # the package caches' directory (envkit.storage.cache)
    shared: Optional[Path] = None  # the site's shared directory ($ENVKIT_SHARED wins): envkit.shared

    def mirrored(self, url: str) -> str:
        """``url`` on its mirror (the longest matching upstream wins), or ``url`` itself."""
        return mirror_url(url, self.mirrors)


def mirror_url(url: str, mirrors: tuple[Mirror, ...]) -> str:
    key = comparable(url)  # (each upstream was made comparable when the config was read)
    best = max((m for m in mirrors if is_under(key, m.upstream)), key=lambda m: len(m.upstream), default=None)
    return url if best is None else best.target + key[len(best.upstream):]


def comparable(url: str) -> str:
    """``url`` as URLs compare: its scheme and host in lower case (``HTTPS://Download.PyTorch.org/whl`` is
    ``https://download.pytorch.org/whl``), the rest as written; a URL that cannot be parsed as it is."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower()).geturl()


def is_under(url: str, prefix: str) -> bool:
    """Whether ``url`` is ``prefix`` (written without a trailing slash) or a page under it."""
    trimmed = url.rstrip("/")
    return trimmed == prefix or trimmed.startswith(prefix + "/")


def is_loopback(url: str) -> bool:
    import ipaddress  # lazy: only plain-http URLs need it

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_transport(url: str, config: Config, what: str) -> str:
    """``url`` if envkit may fetch from it: https, a local file:// path, or plain http on loopback or from a mirror
    the user configured. Anything else is refused: packages fetched over plain http can be tampered with."""
    scheme = urlsplit(url).scheme
    if scheme in ("https", "file"):
        return url
    configured = any(is_under(url, m.target) for m in config.mirrors)
    if scheme == "http" and (configured or is_loopback(url)):
        return url
    raise BadInputError(
        f"{what} {url!r} is not https",
        hint="envkit fetches packages over https only, or over http from loopback and mirrors in its config file.",
    )


def load_config(environ: Mapping[str, str], dirs: UserDirs) -> Config:
    """The config file's settings; its parsed text comes from the user cache while the file is unchanged."""
    from envkit.state.filecache import cached

    if not has_config(environ, dirs):
        return Config(path=None)
    path, explicit = config_path(environ, dirs)

    def parse() -> Any:
        try:
            text = read_text_file(path, "config file")
        except FileNotFoundError:
            raise ConfigError(f"config file {path} (from ${CONFIG_VARIABLE}) does not exist") from None
        except ValueError as error:
            raise ConfigError(f"config file {path} {error}",
                              hint=f"envkit reads its settings from this YAML file{_from(explicit)}.") from None
        return _parse_yaml(text, path)

    return config_from_data(cached(dirs.cache, "yaml", [path], ("state/yamltext.py",), parse), path)


def _from(explicit: bool) -> str:
    return f" (${CONFIG_VARIABLE} names it)" if explicit else f" (unless ${CONFIG_VARIABLE} names another)"


def _parse_yaml(text: str, path: Path) -> Any:
    from envkit.state.yamltext import parse_yaml

    try:
        return parse_yaml(text)
    except ValueError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None


def parse_config(text: str, path: Path) -> Config:
    return config_from_data(_parse_yaml(text, path), path)


def config_from_data(data: Any, path: Path) -> Config:
    if data is None:
        return Config(path=path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of keys ({', '.join(_KEYS)})")
    unknown = sorted(str(key) for key in data if key not in _KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}", hint=f"The keys are: {', '.join(_KEYS)}.")
    return Config(path=path, mirrors=_mirrors(data.get("mirrors"), path),
                  envs_dir=_absolute_dir(data.get("envs_dir"), path, "envs_dir"),
                  site=_site(data.get("site"), path), manifests=_site(data.get("manifests"), path, "manifests"),
                  cache_dir=_absolute_dir(data.get("cache_dir"), path, "cache_dir"),
                  shared=_absolute_dir(data.get("shared"), path, "shared"))


def _mirrors(value: Any, path: Path) -> tuple[Mirror, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: 'mirrors' must map upstream URLs to mirror URLs, not {described(value)}",
                          hint=_MIRROR_HINT)
    out = []
    for upstream, target in value.items():
        if not isinstance(upstream, str) or not isinstance(target, str):
            raise ConfigError(f"{path}: mirrors: {upstream!r}: upstream and mirror must both be quoted URLs")
        problem = _url_problem(upstream, ("https", "http"))
        if problem is not None:
            raise ConfigError(f"{path}: mirrors: {upstream!r} is not an http(s) URL to mirror: {problem}",
                              hint=_MIRROR_HINT)
        problem = _url_problem(target, ("https", "http", "file"))
        if problem is not None:
            local = f" (a local directory: \"file://{target}\")" if target.startswith("/") else ""
            raise ConfigError(f"{path}: mirrors: {upstream!r}: the mirror {target!r} is not an https, http or file "
                              f"URL: {problem}{local}", hint=_MIRROR_HINT)
        mirror = Mirror(comparable(upstream.rstrip("/")), target.rstrip("/"))
        same = next((m for m in out if m.upstream == mirror.upstream), None)
        if same is not None:
            raise ConfigError(f"{path}: mirrors: {upstream!r} is given twice (once as {same.upstream!r})",
                              hint="Keep one line for it: which mirror it maps to would otherwise be a guess.")
        out.append(mirror)
    return tuple(out)


_MIRROR_HINT = ('Each line maps an upstream URL prefix to its mirror, both quoted: "https://pypi.org/simple": '
                '"http://cache.lab:8080/pypi/simple", or "file:///srv/channels/conda-forge" for a directory.')


def _url_problem(url: str, schemes: tuple[str, ...]) -> Optional[str]:
    """Why ``url`` cannot be a URL prefix to mirror from or to (in words following the URL), or None. Anything
    refused here would otherwise fail later, inside uv or the conda engine, or make broken URLs (a query string
    with the rest of the path appended to it)."""
    try:
        parts = urlsplit(url)
        parts.port  # (a port that is not a number, or out of range, raises ValueError)
    except ValueError as error:
        return f"it cannot be parsed ({error})"
    if parts.scheme not in schemes:
        return f"it starts with {parts.scheme + ':' if parts.scheme else 'no scheme'}, not {' or '.join(schemes)}"
    if any(char.isspace() or ord(char) < 32 for char in url):
        return "it holds a space or a control character (a URL writes a space as %20)"
    if parts.query or parts.fragment:
        return "it has a query or a fragment ('?...', '#...'): the rest of each path is appended to a mirror"
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return "a file URL names an absolute path, with three slashes: file:///srv/channel"
        return None
    if not parts.hostname:
        return "it names no host"
    return None


def _absolute_dir(value: Any, path: Path, key: str) -> Optional[Path]:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: '{key}' must be a directory path, not {described(value)}")
    expanded = _expanded(value, path, key)
    if not expanded.is_absolute():
        raise ConfigError(f"{path}: {key} {value!r} must be an absolute path")
    try:
        not_a_directory = expanded.exists() and not expanded.is_dir()
    except OSError as error:  # a name too long for the filesystem, a loop of links
        raise ConfigError(f"{path}: {key} cannot be used: {error.strerror or error}") from None
    if not_a_directory:
        raise ConfigError(f"{path}: {key} {value!r} is not a directory")
    return expanded


def _site(value: Any, path: Path, key: str = "site") -> Optional[Path]:
    """The site file (or manifests directory): an absolute path, or one relative to the config file (an admin's
    config beside its site file and manifests)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        what = "a site file" if key == "site" else "a manifests directory"
        raise ConfigError(f"{path}: '{key}' must be the path of {what}, not {described(value)}")
    expanded = _expanded(value, path, key)
    return expanded if expanded.is_absolute() else path.parent / expanded


def _expanded(value: str, path: Path, key: str) -> Path:
    """A path from the config, its $VARIABLES and ~ expanded; a variable that is not set is an error (expandvars
    would keep '$USER' as it is, and a directory named so would be made)."""
    expanded = os.path.expandvars(value)
    unset = re.search(r"\$(\w+|\{[^}]*\})", expanded)
    if unset:
        raise ConfigError(f"{path}: {key} {value!r} names {unset.group(0)}, which is not set here",
                          hint="Set it, or write the path without it.")
    try:
        return user_path(expanded)
    except ValueError as error:
        raise ConfigError(f"{path}: {key} {value!r} {error}") from None
