"""Project pages of a Python package index, and which of their files install on Linux x86_64 for a Python.
Pure functions: a page's text in, files out.

Pages are PEP 691 JSON (``application/vnd.pypi.simple.v1+json``) where the index offers it, PEP 503 HTML otherwise
(anchors with ``data-requires-python`` and ``data-yanked``). A wheel fits Python X.Y when one of its tags is
``cpXY-cpXY`` (or ``cpXY-none``), ``cpNN-abi3`` with NN <= XY, or ``py3-none`` / ``pyXY-none``, on a Linux x86_64
platform (``manylinux*_x86_64``, ``linux_x86_64``) or ``any``; and its Requires-Python admits X.Y.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Iterable, Optional
from urllib.parse import unquote, urldefrag, urljoin

from envkit.versions import is_ascii_number

if TYPE_CHECKING:
    from packaging.version import Version

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
_LINUX_X86_64 = re.compile(r"^(manylinux\w*_x86_64|linux_x86_64|any)$")


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    requires_python: Optional[str] = None
    yanked: bool = False


def parse_page(text: str, content_type: str, base_url: str) -> list[IndexFile]:
    """The files a project page lists; hrefs are resolved against ``base_url`` (the page's final URL)."""
    if content_type.split(";")[0].strip().lower() == JSON_TYPE or text.lstrip().startswith("{"):
        return _parse_json(text, base_url)
    return _parse_html(text, base_url)


def _parse_json(text: str, base_url: str) -> list[IndexFile]:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ValueError(f"the JSON page cannot be read: {error}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise ValueError("the JSON page has no 'files' list")
    out = []
    for entry in files:
        if isinstance(entry, dict) and isinstance(entry.get("filename"), str):
            url = urljoin(base_url, str(entry.get("url", entry["filename"])))
            requires = entry.get("requires-python")
            out.append(IndexFile(entry["filename"], url, requires if isinstance(requires, str) else None,
                                 bool(entry.get("yanked"))))
    return out


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, Optional[str]]] = []
        self._open: Optional[dict[str, Optional[str]]] = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "a":
            self._open = dict(attrs)
            self._open["#text"] = ""
            self.anchors.append(self._open)

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["#text"] = (self._open.get("#text") or "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._open = None


def _parse_html(text: str, base_url: str) -> list[IndexFile]:
    parser = _Anchors()
    parser.feed(text)
    out = []
    for anchor in parser.anchors:
        href = anchor.get("href")
        if not href:
            continue
        url = urljoin(base_url, href)
        filename = urldefrag(url)[0].rstrip("/").rsplit("/", 1)[-1]
        out.append(IndexFile(unquote(filename), url, anchor.get("data-requires-python"),
                             "data-yanked" in anchor))
    return out


def wheel_version(filename: str) -> Optional[Version]:
    """The version of a wheel file name, None for anything that is not a wheel."""
    parsed = _parse_wheel(filename)
    return parsed[1] if parsed else None


def _parse_wheel(filename: str):  # -> (name, Version, tags) or None
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if not filename.endswith(".whl"):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, ValueError):
        return None
    return name, version, tags


def fits(file: IndexFile, python: Version) -> bool:
    """Whether ``file`` is a wheel that installs on Linux x86_64 for Python ``python`` (X.Y)."""
    parsed = None if file.yanked else _parse_wheel(file.filename)
    if parsed is None:
        return False
    if file.requires_python and not _admits(file.requires_python, python):
        return False
    return any(_tag_fits(tag.interpreter, tag.abi, tag.platform, python) for tag in parsed[2])


def _tag_fits(interpreter: str, abi: str, platform: str, python: Version) -> bool:
    if not _LINUX_X86_64.match(platform):
        return False
    xy = f"{python.major}{python.minor}"
    if interpreter == f"cp{xy}" and abi in (f"cp{xy}", f"cp{xy}m", "none"):
        return True
    if abi == "abi3" and interpreter.startswith("cp3") and is_ascii_number(interpreter[2:]):
        return python.major == 3 and int(interpreter[3:] or 0) <= python.minor
    return abi == "none" and interpreter in ("py3", f"py{xy}", f"py{python.major}")


def _admits(requires_python: str, python: Version) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(requires_python).contains(f"{python.major}.{python.minor}.0", prereleases=True)
    except InvalidSpecifier:
        return True  # a broken attribute on the index does not hide the file


def matching(files: Iterable[IndexFile], specifier, python: Optional[Version] = None) -> list[IndexFile]:
    """The wheels among ``files`` whose version the specifier admits (and that fit ``python``, when given)."""
    out = []
    for file in files:
        version = wheel_version(file.filename)
        if version is None or file.yanked or not specifier.contains(version, prereleases=False):
            continue
        if python is None or fits(file, python):
            out.append(file)
    return out


def linux_wheels(files: Iterable[IndexFile]) -> list[IndexFile]:
    """The wheels that install on Linux x86_64 for some CPython 3."""
    out = []
    for file in files:
        parsed = None if file.yanked else _parse_wheel(file.filename)
        if parsed and any(_LINUX_X86_64.match(tag.platform) for tag in parsed[2]):
            out.append(file)
    return out
