"""What `envkit manifests check` finds, shared by its parts (check, conda_check, upstream): a missing or unreadable
package, a release upstream that the manifests do not have, an unconfirmed build whose packages are all there; and
what a build needs from a pip index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from envkit.catalog.model import Build, Catalog

if TYPE_CHECKING:
    from packaging.requirements import Requirement
    from packaging.version import Version

MISSING, UNREADABLE, NEW = "missing", "unreadable", "not in the manifests"
# An `unconfirmed:` build whose every package was found: envkit picks it only when named with --build until its note
# is removed (envkit.pick.resolve.rank), and the check says so.
LISTED = "listed though unconfirmed"


@dataclass(frozen=True)
class Finding:
    kind: str  # MISSING, UNREADABLE, NEW or LISTED
    message: str
    build: Optional[str] = None
    url: Optional[str] = None  # the upstream URL it is about
    # Why it could not be checked, in words that findings of the same cause share (a host that does not answer):
    # the report says it once, with how many checks it stopped and which builds (envkit.maintain.check).
    cause: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "build": self.build, "url": self.url, "message": self.message}


def upstream_index(build: Build, catalog: Catalog) -> str:
    """The index a pip build installs from, as its manifest names it (python.yaml's default when it names none), no
    trailing slash."""
    assert build.pip is not None
    return (build.pip.index_url or catalog.tables.python.pypi_index).rstrip("/")


@dataclass(frozen=True)
class PipNeed:
    build: Build
    requirement: str
    index: str  # upstream index URL, no trailing slash
    pythons: tuple[Version, ...]

    @property
    def parsed(self) -> Requirement:
        from packaging.requirements import Requirement

        return Requirement(self.requirement)

    @property
    def page(self) -> str:
        from packaging.utils import canonicalize_name

        return f"{self.index}/{canonicalize_name(self.parsed.name)}/"


def site_of(url: str) -> str:
    """``https://download.pytorch.org`` of any URL there: the server, without a path or credentials."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}"
