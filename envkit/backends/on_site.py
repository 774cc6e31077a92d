"""A personal environment on top of a site's shared one (`envkit create --on site:NAME`): a venv of the site
environment's Python that sees the site's packages and holds its build, in a few hundred kilobytes.

The venv's site-packages gets a ``.pth`` naming the site environment's site-packages, of the very version it was made
on (``SHARED/envs/NAME/VERSION``, never ``current``): the site's packages import from there, after the user's own,
and keep doing so while that version exists, whatever the admins publish later. Installers look only at the venv's
own site-packages, so each of the site's distributions gets a stand-in there: its ``*.dist-info`` with its METADATA
(what it requires), its entry points and top-level names, ``INSTALLER`` ``envkit-site`` and a RECORD of those files
alone. uv and pip then see the site's torch as installed (the held build applies to it: envkit.backends.held), never
download another, and may replace a stand-in of a package the build does not hold by a newer one of the user's own,
which comes first on sys.path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from envkit.backends.base import Context, OnLine, command_text, run_step
from envkit.backends.installers import uses_uv
from envkit.backends.plan import Plan
from envkit.errors import EnvkitError, InstallError
from envkit.system.launch import python_module

STAND_IN = "envkit-site"  # the INSTALLER of a site distribution's stand-in
PTH = "_envkit_on_site.pth"
_KEPT = ("METADATA", "entry_points.txt", "top_level.txt")


class OnSiteBackend:
    name = "venv"

    def __init__(self, site_prefix: Path) -> None:
        self.site_prefix = site_prefix

    @property
    def site_python(self) -> Path:
        return self.site_prefix / "bin" / "python"

    def _argv(self, plan: Plan, context: Context) -> list[str]:
        if uses_uv(context.tools.uv, plan.python):
            return [str(context.tools.uv), "venv", "--quiet", "--python", str(self.site_python), str(plan.prefix)]
        return python_module(self.site_python, "venv", "--without-pip", str(plan.prefix))

    def describe(self, plan: Plan, context: Context) -> list[str]:
        return [command_text(self._argv(plan, context)),
                f"envkit: {plan.prefix} sees {site_packages_of(self.site_prefix)} (a .pth) and holds its build"]

    def make_prefix(self, plan: Plan, context: Context, on_line: OnLine) -> None:
        site = site_packages_of(self.site_prefix)
        if site is None:
            raise InstallError(f"{self.site_prefix} has no site-packages to stand on",
                               hint="Ask the site's admins whether that environment is still published.")
        run_step(self._argv(plan, context), context.environ, on_line, f"making the venv at {plan.prefix} failed",
                 hint="The lines above are the installer's.")
        stand_on(plan.prefix, site)


def site_packages_of(prefix: Path) -> "Path | None":
    found = [path for path in prefix.glob("lib/python*/site-packages") if path.is_dir()]
    return found[0] if len(found) == 1 else None


def stand_on(prefix: Path, site: Path) -> None:
    """Make the venv at ``prefix`` see ``site`` (the site environment's site-packages) and its distributions."""
    own = site_packages_of(prefix)
    if own is None:
        raise EnvkitError(f"{prefix} has no site-packages", hint="What this run made was removed; try again.")
    (own / PTH).write_text(f"{site}\n", encoding="utf-8")
    for dist_info in sorted(site.glob("*.dist-info")):
        stand_in = own / dist_info.name
        stand_in.mkdir()
        kept = [name for name in _KEPT if (dist_info / name).is_file()]
        for name in kept:
            shutil.copyfile(dist_info / name, stand_in / name)
        (stand_in / "INSTALLER").write_text(f"{STAND_IN}\n", encoding="utf-8")
        rows = [f"{dist_info.name}/{name},," for name in (*kept, "INSTALLER", "RECORD")]
        (stand_in / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")


def stands_on(prefix: Path) -> "Path | None":
    """The site-packages a personal environment's .pth names (None: it names none, or it is not one)."""
    own = site_packages_of(prefix)
    try:
        line = (own / PTH).read_text(encoding="utf-8").strip() if own is not None else ""
    except OSError:
        return None
    return Path(line) if line and os.path.isabs(line) else None
