"""How an environment guards its build against the user's own installers: the files envkit writes into it.

- ``PREFIX/.envkit/constraints.txt``: the held build (envkit.backends.held), read by every installer below;
- ``PREFIX/pip.conf``: pip's per-environment configuration (the "site" level pip reads from ``sys.prefix``), whose
  ``constraint`` makes a plain ``pip install`` that would replace the build fail with pip's own error naming it;
- ``UV_CONSTRAINT`` and ``PIP_CONSTRAINT``, with the file prepended to what the user set, wherever envkit activates
  the environment: ``envkit run`` (envkit.system.activation), the modulefiles (envkit.shared.modulefile), a venv's
  ``bin/activate`` and a conda environment's ``etc/conda/activate.d`` (written here, each taken back on deactivate);
- where the environment has no pip of its own (uv makes venvs without it), ``bin/pip``, ``pip3`` and ``pipX.Y``
  placeholders that say so and exit 1: otherwise another Python's pip, found further along PATH, installs into that
  Python, silently. ``envkit add ENV pip`` gives it pip (which replaces them).

The limits (said in docs/lab-user.md): ``PIP_CONFIG_FILE=/dev/null`` outside envkit's activation skips pip.conf
(``pip --isolated`` still reads it: pip reads its site configuration even then); ``uv pip install --python
ENV/bin/python`` without activating reads no variable; fish, csh and nushell's activate scripts set none; and a
user may edit or delete the files. A prefix with whitespace in its path cannot be named in the variables (both
installers split them on spaces): pip.conf alone holds there.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Optional

from envkit.state.files import write_atomic
from envkit.state.records import RECORD_DIR

CONSTRAINTS = "constraints.txt"
MARK = "envkit: "  # in every file written here, so that envkit knows its own
_PLACEHOLDER = "# envkit: pip placeholder"


def constraints_path(prefix: Path) -> Path:
    return prefix / RECORD_DIR / CONSTRAINTS


def nameable(path: Path) -> bool:
    """Whether ``path`` can go in UV_CONSTRAINT / PIP_CONSTRAINT (both split their value on whitespace)."""
    return not any(char.isspace() for char in str(path))


def guard_environment(prefix: Path, named, companions, kind: str, name: str, build: str, conda: bool,
                      framework: str):
    """Hold the environment's build as installed now (envkit.backends.held) and write its guard. The Held."""
    from envkit.backends.held import constraints_text, held_of

    held = held_of(prefix, named, companions, conda, framework)
    write_guard(prefix, constraints_text(held, build, name), kind, name)
    return held


def write_guard(prefix: Path, constraints: str, kind: str, name: str) -> None:
    """Write the constraints and every file that points the installers at them (see the module's docstring)."""
    path = constraints_path(prefix)
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, constraints.encode("utf-8"))
    _write_own(prefix / "pip.conf", f"# {MARK}pip installs into {name} with its build held ({path}).\n"
                                    f"[install]\nconstraint = {path}\n")
    if nameable(path):
        if kind == "venv":
            _hook_activate(prefix / "bin" / "activate", path)
        else:
            _conda_hooks(prefix, path)
    placeholders(prefix, name)


def _write_own(path: Path, text: str) -> None:
    """Write ``path`` unless something envkit did not write is there (a pip.conf of the user's stays)."""
    try:
        first = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
    except FileNotFoundError:
        first = None
    except OSError:
        return
    if first is None or MARK in first:
        write_atomic(path, text.encode("utf-8"))


def has_pip(prefix: Path) -> bool:
    """Whether the environment has pip itself (a ``pip`` package in its site-packages)."""
    return any(prefix.glob("lib/python*/site-packages/pip/__init__.py"))


def placeholders(prefix: Path, name: str) -> list[Path]:
    """Without pip of its own: ``bin/pip``, ``bin/pip3`` and ``bin/pipX.Y`` that say so (never over a file that is
    not one of them). With pip: nothing (pip's own scripts are there). The placeholders written."""
    if has_pip(prefix):
        return []
    versions = sorted(path.parent.name[len("python"):] for path in prefix.glob("lib/python*/site-packages"))
    text = (f"#!/bin/sh\n{_PLACEHOLDER} ({name}); `envkit add {name} pip` replaces it with pip.\n"
            f"echo \"pip: {name} has no pip of its own (so that another Python's pip, further along PATH, does not "
            f"install into the wrong place).\" >&2\n"
            f"echo \"  Add packages with its build held: envkit add {shlex.quote(name)} PACKAGE (or uv pip install "
            f"PACKAGE in it, activated); envkit add {shlex.quote(name)} pip gives it pip.\" >&2\nexit 1\n")
    written = []
    for script in ("pip", "pip3", *(f"pip{version}" for version in versions)):
        target = prefix / "bin" / script
        if os.path.lexists(target) and not _is_placeholder(target):
            continue
        write_atomic(target, text.encode("utf-8"), mode=0o755)
        written.append(target)
    return written


def _is_placeholder(path: Path) -> bool:
    try:
        with open(path, "rb") as stream:
            return _PLACEHOLDER.encode() in stream.read(512)
    except OSError:
        return False


_DEACTIVATE = """\
    # envkit: the constraints set at the end of this file, taken back
    if [ -n "${_ENVKIT_HELD:-}" ] ; then
        if [ -n "${_ENVKIT_OLD_UV_CONSTRAINT+_}" ] ; then UV_CONSTRAINT="$_ENVKIT_OLD_UV_CONSTRAINT" ; export UV_CONSTRAINT ; else unset UV_CONSTRAINT ; fi
        if [ -n "${_ENVKIT_OLD_PIP_CONSTRAINT+_}" ] ; then PIP_CONSTRAINT="$_ENVKIT_OLD_PIP_CONSTRAINT" ; export PIP_CONSTRAINT ; else unset PIP_CONSTRAINT ; fi
        unset _ENVKIT_HELD _ENVKIT_OLD_UV_CONSTRAINT _ENVKIT_OLD_PIP_CONSTRAINT
    fi
"""
_ACTIVATE = """
# envkit: pip and uv pip install hold this environment's build (docs/lab-user.md, "Add your packages")
if [ -n "${{UV_CONSTRAINT+_}}" ] ; then _ENVKIT_OLD_UV_CONSTRAINT="$UV_CONSTRAINT" ; fi
if [ -n "${{PIP_CONSTRAINT+_}}" ] ; then _ENVKIT_OLD_PIP_CONSTRAINT="$PIP_CONSTRAINT" ; fi
UV_CONSTRAINT={path}"${{UV_CONSTRAINT:+ $UV_CONSTRAINT}}" ; export UV_CONSTRAINT
PIP_CONSTRAINT={path}"${{PIP_CONSTRAINT:+ $PIP_CONSTRAINT}}" ; export PIP_CONSTRAINT
_ENVKIT_HELD=1
"""


def activate_text(text: str, path: Path) -> Optional[str]:
    """A venv's ``bin/activate`` (virtualenv's, as uv writes it, or venv's) with envkit's lines: the variables set
    at its end and taken back by its ``deactivate``; None when it has them already, or is not a script envkit knows
    (no ``unset VIRTUAL_ENV`` in a ``deactivate``)."""
    if "_ENVKIT_HELD" in text:
        return None
    start = text.find("deactivate () {")
    anchor = text.find("    unset VIRTUAL_ENV\n", start)
    if start < 0 or anchor < 0:
        return None
    return text[:anchor] + _DEACTIVATE + text[anchor:] + _ACTIVATE.format(path=shlex.quote(str(path)))


def _hook_activate(script: Path, path: Path) -> None:
    try:
        text = script.read_text(encoding="utf-8")
    except OSError:
        return  # no activate script (a venv made without one): envkit run and the modulefiles still hold
    changed = activate_text(text, path)
    if changed is not None:
        write_atomic(script, changed.encode("utf-8"), mode=0o644)


def _conda_hooks(prefix: Path, path: Path) -> None:
    """``etc/conda/activate.d`` and ``deactivate.d`` scripts, which conda activate (and envkit run) source."""
    quoted = shlex.quote(str(path))
    activate = (f"# {MARK}pip and uv pip install hold this environment's build\n"
                + _ACTIVATE.format(path=quoted).lstrip("\n").split("\n", 1)[1])
    deactivate = (f"# {MARK}the constraints of activate.d/envkit-held.sh, taken back\n"
                  + "\n".join(line[4:] for line in _DEACTIVATE.splitlines()[1:]) + "\n")
    for where, text in (("activate.d", activate), ("deactivate.d", deactivate)):
        directory = prefix / "etc" / "conda" / where
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / "envkit-held.sh", text.encode("utf-8"), mode=0o644)
