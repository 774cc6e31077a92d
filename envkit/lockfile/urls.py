"""A lock keeps upstream URLs; envkit fetches through the user's mirrors. Both directions, and the transport rule."""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

from envkit.errors import ConfigError
from envkit.state.config import Config, check_transport, is_under, mirror_url


def upstream_url(url: str, config: Config) -> str:
    """``url`` with the longest mirror it lies under replaced by that mirror's upstream (the inverse of
    ``Config.mirrored``), or ``url`` itself. Credentials are left out of the comparison: an installer reports the
    URLs of a mirror that has them without them, and a lock holds none. A URL on a mirror's server but under none of
    the prefixes mapped (a PyPI mirror's pages at /simple/ link its files at /packages/...) has no upstream envkit
    can tell: ConfigError (exit 2) saying so, never the mirror's URL in a lock."""
    from envkit.text.redact import split_credentials

    bare = split_credentials(url)[0]
    targets = [(split_credentials(m.target)[0], m) for m in config.mirrors]
    best = max(((target, m) for target, m in targets if is_under(bare, target)), key=lambda pair: len(pair[0]),
               default=None)
    if best is not None:
        return best[1].upstream + bare[len(best[0]):]
    origin = _origin(bare)
    served_by = next((target for target, _ in targets if origin is not None and _origin(target) == origin), None)
    if served_by is not None and not any(is_under(bare, m.upstream) for m in config.mirrors):
        raise _outside_mirror(bare, served_by)
    return url


def _origin(url: str) -> Optional[tuple[str, str, Optional[int]]]:
    """Scheme, host and port: the server a URL is on; None for a file:// URL (no server) or one that cannot be
    parsed."""
    try:
        parts = urlsplit(url)
        return (parts.scheme.lower(), (parts.hostname or "").lower(), parts.port) if parts.hostname else None
    except ValueError:
        return None


def _outside_mirror(url: str, mirror: str) -> ConfigError:
    from envkit.lockfile.model import file_name_of

    parts = urlsplit(url)
    top = parts.path.strip("/").split("/", 1)[0]
    served = f"{parts.scheme}://{parts.netloc}/{top}"
    example = (f'"https://files.pythonhosted.org/packages": "{served}"' if top == "packages" else
               f'"https://UPSTREAM/{top}": "{served}"')
    return ConfigError(f"the mirror {mirror} serves {file_name_of(url)} from {url}, outside the prefix envkit's config "
                       "maps to it, so its upstream URL is unknown: a lock keeps upstream URLs only, and none was "
                       "written",
                       hint=f"Map the mirror's files to their upstream in envkit's config too ({example}, where the "
                            "mirror keeps its upstream's paths), then lock again.")


def fetch_url(url: str, config: Config, what: str) -> str:
    """Where envkit fetches a locked ``url`` from: its mirror, if the user has one, over an allowed transport (https,
    file://, or http from loopback or a configured mirror); anything else is a BadInputError (exit 2)."""
    return check_transport(mirror_url(url, config.mirrors), config, what)
