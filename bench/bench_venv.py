"""The Python the bench scripts run under: a venv of their own with envkit installed from this checkout.

Every script in bench/ is started with the machine's python3 (`python3 bench/create_speed.py`), which has neither
envkit nor what it needs (typer, packaging, uv, ...). Before anything else it calls :func:`run_in_venv`, which makes a
venv, installs envkit from this checkout into it (not editable: as a user has it; with the packages a script names
beside it), and runs the same script again with that venv's Python and the same arguments; the first process only
waits for it, removes the venv and exits with its status. `--help` needs none of that and is answered at once
(by the script's own parser, or from its docstring where the packages that parser needs are missing).

    --venv DIR   keep the venv in DIR and reuse it on the next run (envkit is reinstalled from the checkout
                 each time, so that what is measured is the code as it is now)

Stdlib only: this module runs under the machine's python3.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
MARK = "_ENVKIT_BENCH_VENV"  # set in the second process: it runs in the venv already
VENV_HELP = ("keep the venv with envkit (installed from this checkout) in DIR and reuse it on the next run; "
             "default: a temporary one, removed at the end")


def add_venv_option(parser: argparse.ArgumentParser) -> None:
    """--venv DIR, for the script's --help (run_in_venv reads it before the script's own parser does)."""
    parser.add_argument("--venv", type=Path, metavar="DIR", help=VENV_HELP)


def help_asked() -> bool:
    """Whether this run only prints its --help (which needs neither the venv nor envkit)."""
    return "-h" in sys.argv[1:] or "--help" in sys.argv[1:]


def print_docstring_help() -> None:
    """The running script's docstring, as its help, where the packages its own parser needs are not here."""
    script = Path(sys.argv[0]).name
    doc = (sys.modules["__main__"].__doc__ or "").strip()
    print(f"usage: python3 bench/{script} [options]\n\n{doc}\n\n  --venv DIR  {VENV_HELP}")


def run_in_venv(packages: Sequence[str] = (), needs: Sequence[str] = ("envkit", "packaging")) -> None:
    """Return when this process runs in the bench venv (or only prints its --help, with ``needs`` importable here);
    otherwise make the venv (with ``packages`` beside envkit), run this script again in it, and exit with its
    status. A failure to make the venv is one line and exit 1, not a traceback."""
    if os.environ.get(MARK):
        return
    asked = sys.argv[1:]
    if help_asked():
        if all(importlib.util.find_spec(n) for n in needs if n != "envkit"):
            return  # the script's own parser prints its --help
        print_docstring_help()  # what the script says of itself: no venv is made for a help
        sys.exit(0)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--venv", type=Path)
    known, _ = pre.parse_known_args(asked)
    where = known.venv.absolute() if known.venv is not None else Path(tempfile.mkdtemp(prefix="envkit-bench-venv-"))
    try:
        try:
            python = fresh_venv(where, packages)
        except (OSError, subprocess.CalledProcessError) as error:
            print(f"{Path(sys.argv[0]).name}: cannot make a venv with envkit in {where}: {error}", file=sys.stderr)
            sys.exit(1)
        try:
            status = subprocess.call([str(python), str(Path(sys.argv[0]).absolute()), *asked],
                                     env={**os.environ, MARK: str(where)})
        except KeyboardInterrupt:
            status = 130
    finally:
        if known.venv is None:
            shutil.rmtree(where, ignore_errors=True)
    sys.exit(status)


def fresh_venv(where: Path, packages: Sequence[str] = ()) -> Path:
    """A venv in ``where`` (made when missing) with envkit installed from this checkout, not editable, and
    ``packages``; its Python. envkit is reinstalled each time (its dependencies only the first time)."""
    python = where / "bin" / "python"
    quiet = ["-q", "--disable-pip-version-check"]
    made = python.exists()
    if not made:
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    with tempfile.TemporaryDirectory(prefix="envkit-bench-source-") as scratch:
        source = _source_copy(Path(scratch))  # setuptools builds in the source tree: not in the checkout
        again = ["--force-reinstall", "--no-deps"] if made else []
        subprocess.run([str(python), "-m", "pip", "install", *quiet, *again, str(source)], check=True,
                       stdout=subprocess.DEVNULL)
    if packages:
        subprocess.run([str(python), "-m", "pip", "install", *quiet, *packages], check=True,
                       stdout=subprocess.DEVNULL)
    return python


def _source_copy(scratch: Path) -> Path:
    """What the wheel is built from (pyproject.toml, README.md, envkit/, envs/), copied into ``scratch``."""
    source = scratch / "envkit"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("envkit", "envs"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return source


def envkit_command(python: Optional[Path] = None) -> list[str]:
    """How the scripts start envkit: the venv's own console script, as a user runs it."""
    python = python or Path(sys.executable)
    return [str(python.parent / "envkit")]
