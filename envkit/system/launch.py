"""Starting a Python module (envkit on a node, ipykernel, pip, venv) so that the working directory cannot stand in
for it or for anything it imports.

``python -m MODULE`` puts the working directory first on ``sys.path``: a folder ``envkit/``, a file ``envkit.py``, a
clone of envkit's repository, a ``json.py`` or an ``ipykernel/`` where the user (or a job) happens to be would be
imported instead of the installed code, and a planted file would run as the user. ``python -I`` would avoid that but
also drops ``PYTHONPATH`` and the user's site-packages, where envkit or its dependencies may well be installed.

So envkit runs ``python -c BOOTSTRAP MODULE ARGS``: the bootstrap takes the working directory's entry ("") off
``sys.path`` before it imports anything but ``sys`` (built in), then runs the module as ``-m`` would (``runpy``,
``__name__ == "__main__"``, ``sys.argv[0]`` the module's file). It is one line of Python that every interpreter envkit
supports runs, 3.6 in old environments included; a module that is not there ends as ``-m`` ends, with "No module named
MODULE" and exit status 1. An absolute path the user put on ``PYTHONPATH`` stays: that one was asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

BOOTSTRAP = (
    "import sys;sys.path[:]=[p for p in sys.path if p];m=sys.argv.pop(1);import runpy,importlib.util as u;"
    "u.find_spec(m) or sys.exit(sys.executable+': No module named '+m);"
    "runpy.run_module(m,run_name=\"__main__\",alter_sys=True)"
)


def python_module(python: Union[str, Path], module: str, *args: str) -> list[str]:
    """The argv that runs ``python -m module args`` with nothing from the working directory on its path."""
    if not module or module.startswith("-") or not all(part.isidentifier() for part in module.split(".")):
        raise ValueError(f"not a module name: {module!r}")  # envkit's own constants only: a bug, not user input
    return [str(python), "-c", BOOTSTRAP, module, *args]
