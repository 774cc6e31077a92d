"""The packages a user asks to add (``envkit add ENV PKG... -r FILE``, ``envkit create --with``), read and checked
before anything runs: each one a requirement (PEP 508), a local file or directory the user can read, or an https
URL, and nothing that would bypass the build's indexes or replace the build itself. Every problem is one sentence
(BadInputError, exit 2) naming the package, or the file and line."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple, Optional, Sequence
from urllib.parse import unquote, urlsplit

from envkit.errors import BadInputError

MAX_DEPTH = 8  # -r inside -r inside ...: deeper is a loop or a mistake
_LOCAL_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz")
# Options of a requirements file, and why envkit will not take each: the build's indexes are the only ones.
_REFUSED = {
    ("-i", "--index-url", "--extra-index-url", "--no-index", "-f", "--find-links", "--trusted-host"):
        "it would fetch packages from somewhere else than the indexes envkit holds the build with",
    ("-e", "--editable"): "an editable install is not an addition envkit can record, lock or undo",
    ("-c", "--constraint"): "envkit's own constraints hold the build: write the versions you want as requirements",
}
_HINT = "Write each package as NAME, NAME==VERSION or NAME>=VERSION (e.g. 'transformers>=4.40'), one per line."


class Requested(NamedTuple):
    """What to add: the lines given to the installer (paths made absolute), and the same as the user wrote them."""

    lines: tuple[str, ...]
    names: tuple[str, ...]  # the project names, where a line names one (a path or URL without a name: none)


def requested(packages: Sequence[str], files: Sequence[Path], framework: Sequence[str] = ()) -> Requested:
    """The packages asked for on the command line and in requirements files. ``framework``: the names of the
    build's own packages (held or absent), which no URL or local file may bring in."""
    lines: list[str] = []
    names: list[str] = []
    for text in packages:
        line, name = check_line(text, f"{text!r}", Path.cwd(), framework)
        lines.append(line)
        names += [name] if name else []
    for path in files:
        for line, name in _file_lines(path, framework, 0, ()):
            lines.append(line)
            names += [name] if name else []
    if not lines:
        raise BadInputError("no packages to add: " + (f"{', '.join(map(str, files))} names none" if files else
                                                        "give PKG... or -r FILE"), hint=_HINT)
    return Requested(tuple(lines), tuple(names))


def check_line(text: str, where: str, base: Path, framework: Sequence[str]) -> tuple[str, Optional[str]]:
    """(the line for the installer, the project it names) of one requirement; BadInputError naming ``where``."""
    text = text.strip()
    if not text:
        raise BadInputError(f"{where} is empty: it names no package", hint=_HINT)
    if text.startswith("-"):
        raise BadInputError(f"{where} is an option, not a package: envkit takes no installer options", hint=_HINT)
    if _looks_local(text):
        return _local(text, where, base, framework)
    from envkit.backends.installers import requirement_parts

    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text):  # a bare name (most): nothing more to read in it
        return text, requirement_parts(text).name
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        reason = str(error).splitlines()[0]
        raise BadInputError(f"{where} is not a requirement ({reason})", hint=_HINT) from None
    if requirement.url is not None:
        _check_url(requirement.name, requirement.url, where, base, framework)
    return text, requirement.name


def project_of(line: str) -> Optional[str]:
    """The project a requirement line names (a wheel's from its file name), or None."""
    if _looks_local(line):
        return _wheel_project(Path(line).name)
    from envkit.backends.installers import requirement_parts

    try:
        return requirement_parts(line).name
    except ValueError:  # (packaging's InvalidRequirement is one)
        return None


def _looks_local(text: str) -> bool:
    """A path (./pkg, ../x.whl, /abs, ~/x, a file name with a wheel or sdist suffix), not a requirement."""
    return text.startswith((".", "/", "~")) or (text.endswith(_LOCAL_SUFFIXES) and " " not in text)


def _local(text: str, where: str, base: Path, framework: Sequence[str]) -> tuple[str, Optional[str]]:
    path = (base / os.path.expanduser(text)).resolve()
    if not os.path.exists(path):
        raise BadInputError(f"{where}: no such file or directory ({path})", hint="Give a path you can read.")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise BadInputError(f"{where}: {path} cannot be read by you", hint="Give a path you can read.")
    name = _wheel_project(path.name)
    if name is not None:
        _not_framework(name, where, framework)
    return str(path), name


def _check_url(name: str, url: str, where: str, base: Path, framework: Sequence[str]) -> None:
    _not_framework(name, where, framework)
    scheme = urlsplit(url).scheme
    if scheme == "file":
        _local(unquote(urlsplit(url).path), where, base, framework)
    elif scheme != "https":
        raise BadInputError(f"{where}: {scheme or 'a URL without a scheme'} is not how envkit fetches packages "
                            "(https only)", hint="Give an https URL, a local file, or the package's name.")


def _not_framework(name: str, where: str, framework: Sequence[str]) -> None:
    if _normalized(name) in {_normalized(n) for n in framework}:
        raise BadInputError(f"{where} is a file of {name} itself, one of the build's own packages: installing it "
                            "would replace the build", hint="Changing the build is a new environment: `envkit list` "
                            "shows the builds, `envkit create MANIFEST --build ID --name NEW` makes one.")


def _wheel_project(filename: str) -> Optional[str]:
    if not filename.endswith(".whl"):
        return None
    return filename.split("-", 1)[0]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _file_lines(path: Path, framework: Sequence[str], depth: int, seen: tuple[Path, ...]):
    """(line, name) of each requirement in the requirements file ``path`` and the files it includes with -r."""
    from envkit.state.files import read_text_file, user_path

    try:
        path = user_path(str(path)).resolve()
    except ValueError as error:
        raise BadInputError(f"-r {path} {error}") from None
    if path in seen or depth >= MAX_DEPTH:
        raise BadInputError(f"-r {path}: requirements files include each other in a loop (or more than "
                            f"{MAX_DEPTH} deep)")
    try:
        text = read_text_file(path, "requirements file")
    except FileNotFoundError:
        raise BadInputError(f"-r {path}: no such file", hint="Give the path of a requirements file.") from None
    except ValueError as error:
        raise BadInputError(f"-r {path} {error}") from None
    out = []
    for number, line in _logical_lines(text):
        where = f"{path} line {number}"
        if line.startswith("-"):
            option, _, value = line.replace("=", " ", 1).partition(" ")
            if option in ("-r", "--requirement"):
                out += _file_lines(path.parent / value.strip(), framework, depth + 1, (*seen, path))
                continue
            why = next((why for options, why in _REFUSED.items() if option in options), None)
            raise BadInputError(f"{where}: {option} is refused: "
                                f"{why or 'envkit takes requirements only, no installer options'}", hint=_HINT)
        out.append(check_line(line, where, path.parent, framework))
    return out


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each requirement line: comments dropped, backslash continuations joined."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            out.append((start, line))
    if pending.strip():
        out.append((start, pending.strip()))
    return out
