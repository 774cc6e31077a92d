"""Credentials in URLs (``http://alice:password@cache.lab/simple``, the common way to reach a lab's authenticated
mirror, or ``https://TOKEN@host/...``) kept out of everything envkit shows and out of other programs' argv.

``redact(text)`` masks them in any text (a plan, an error, an installer's output): the password, or a user part
that stands alone (a token), becomes ``***``. ``split_credentials(url)`` gives the URL without them, for an argv,
and whether it had any; the installers then get the full URL through their environment
(envkit.backends.installers), which other users of the machine cannot read, where an argv is in everyone's ``ps``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import re

MASK = "***"
# scheme://user:password@ or scheme://token@ (no '/', '@' or space inside): the part before the host
_USERINFO = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/@\s:'\"]*)(?::(?P<password>[^/@\s'\"]*))?@"
_compiled: Optional["re.Pattern[str]"] = None


def redact(text: str) -> str:
    """``text`` with every URL's credentials masked: ``http://alice:***@host/...``, ``https://***@host/...``."""
    if "@" not in text:  # (most text: no regular expression at all)
        return text
    global _compiled
    if _compiled is None:  # (imports here: `envkit list --json` prints through redact, and most text has no '@')
        import re

        _compiled = re.compile(_USERINFO)
    return _compiled.sub(_masked, text)


def _masked(match: "re.Match[str]") -> str:
    scheme, user, password = match.group("scheme"), match.group("user"), match.group("password")
    if password is None:  # a lone user part is a token
        return f"{scheme}{MASK}@"
    return f"{scheme}{user}:{MASK}@"


def has_credentials(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return "@" in parts.netloc


def split_credentials(url: str) -> tuple[str, bool]:
    """``url`` without its user and password, and whether it had any."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url, False
    if "@" not in parts.netloc:
        return url, False
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2])), True


def host_of(url: str) -> str:
    """The host and port of ``url``, never its credentials (pip's ``--trusted-host``)."""
    from urllib.parse import urlsplit

    return urlsplit(url).netloc.rpartition("@")[2]
