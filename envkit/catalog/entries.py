"""The entries of a build that reach an installer's command line: conda match specs, pip requirements, URLs.

Each is checked when the manifest is read, so that nothing in a manifest can be taken as an installer option or
pull a package from somewhere other than the build's own channels and index: a conda spec is a MatchSpec with no
channel, subdir, namespace or URL part (``http://evil/ch::pkg`` or ``pkg[url=...]`` would bypass the channels the
build names), a pip requirement is PEP 508 without a URL (``pkg @ https://...``) and never an option (``-i URL``).
Each function returns None for a good entry, or the problem in words.
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import urlsplit

# A conda package name as conda writes it; rattler alone would also take "-c" as a name.
_CONDA_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
# The characters of a match spec: name, version constraints, build string, brackets; no shell or URL syntax.
_CONDA_SPEC_CHARS = re.compile(r"^[A-Za-z0-9_.*=<>!,|~+ \[\]\"'-]+$")
# MatchSpec keys that say where a package comes from rather than which one it is.
_CONDA_SOURCE_KEYS = ("url=", "fn=", "channel=", "subdir=")


def conda_spec_problem(text: str) -> Optional[str]:
    """Why ``text`` cannot be a conda package entry, or None. Parsed by py-rattler as conda parses a MatchSpec."""
    if text.startswith("-"):
        return f"{text!r} would be read as an option: a conda package is a match spec like 'cudatoolkit=10.1'"
    if not _CONDA_SPEC_CHARS.match(text):
        return f"{text!r} is not a conda match spec like 'cudatoolkit=10.1'"
    if "://" in text or "::" in text or "/" in text.split()[0]:
        return (f"{text!r} names a channel, subdir or URL: give the package alone ('name=version') and the channel "
                f"in conda.channels")
    try:
        from rattler import MatchSpec

        spec = MatchSpec(text)
    except ImportError:  # py-rattler is a dependency of envkit; without it, the checks above are what is left
        return None
    except Exception as exc:  # rattler's InvalidMatchSpecError: its first line says what is wrong
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"{text!r} is not a conda match spec like 'cudatoolkit=10.1' ({first})"
    name = getattr(spec.name, "normalized", None) or str(text.split()[0]).split("=")[0].split("[")[0]
    canonical = spec.to_canonical_string()
    if spec.channel is not None or spec.subdir is not None or spec.namespace is not None \
            or any(key in canonical for key in _CONDA_SOURCE_KEYS):
        return (f"{text!r} names a channel, subdir or URL: give the package alone ('name=version') and the channel "
                f"in conda.channels")
    if not _CONDA_NAME.match(str(name)):
        return f"{text!r}: {name!r} is not a conda package name"
    return None


def pip_requirement_problem(text: str) -> Optional[str]:
    """Why ``text`` cannot be a pip package entry, or None: a PEP 508 requirement without a URL."""
    from packaging.requirements import InvalidRequirement, Requirement

    if text.startswith("-"):
        return f"{text!r} would be read as an option: a pip package is a requirement like 'torch==2.9.*'"
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return f"{text!r} is not a pip requirement like 'torch==2.9.*'"
    if requirement.url:
        return f"{text!r} installs from a URL: name the package and version, and the index in pip.index_url"
    return None


def https_url_problem(url: str, what: str) -> Optional[str]:
    """Why ``url`` cannot be a manifest's index, find-links or channel URL, or None: an upstream https URL with a
    host, no spaces, no credentials, no query or fragment (mirrors are mapped in envkit's config, not here)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "https" or not parts.hostname:
        return f"{url!r}: {what} URLs are the upstream https URLs (map them to a mirror in envkit's config)"
    if any(ch.isspace() for ch in url) or parts.username or parts.password or parts.query or parts.fragment:
        return f"{url!r}: a {what} URL is a plain https URL: no spaces, credentials, query or fragment"
    if any(ch in _NOT_IN_URLS for ch in url):
        return f"{url!r}: {what} URLs hold no {' '.join(sorted(set(_NOT_IN_URLS) & set(url)))} (RFC 3986 URLs do not)"
    return None


_NOT_IN_URLS = '{}<>"\\^`|'  # characters a URL never holds unencoded; {name}: a placeholder envkit does not fill
