"""A lock keeps upstream URLs; envkit fetches through the user's mirrors. Both directions, and the transport rule."""

from __future__ import annotations

from envkit.state.config import Config, check_transport, is_under, mirror_url


def upstream_url(url: str, config: Config) -> str:
    """``url`` with the longest mirror it lies under replaced by that mirror's upstream (the inverse of
    ``Config.mirrored``), or ``url`` itself. Credentials are left out of the comparison: an installer reports the
    URLs of a mirror that has them without them, and a lock holds none."""
    from envkit.text.redact import split_credentials

    bare = split_credentials(url)[0]
    targets = [(split_credentials(m.target)[0], m) for m in config.mirrors]
    best = max(((target, m) for target, m in targets if is_under(bare, target)), key=lambda pair: len(pair[0]),
               default=None)
    return url if best is None else best[1].upstream + bare[len(best[0]):]


def fetch_url(url: str, config: Config, what: str) -> str:
    """Where envkit fetches a locked ``url`` from: its mirror, if the user has one, over an allowed transport (https,
    file://, or http from loopback or a configured mirror); anything else is a BadInputError (exit 2)."""
    return check_transport(mirror_url(url, config.mirrors), config, what)
