"""The plan of a personal environment on top of a site's shared one (`envkit create --on site:NAME --name ENV`):
the site environment's build and Python, a venv that stands on the version published now (envkit.backends.on_site),
the user's own packages (--with) with the site's build held, checked as the site's environment is, and a record that
says what it stands on (``on``: the site environment, its version and prefix)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

from packaging.version import Version

from envkit.backends.on_site import OnSiteBackend
from envkit.backends.plan import Plan, pip_parts
from envkit.backends.tools import Tools, find_uv
from envkit.catalog.model import Build, Manifest, Tables
from envkit.create.prepare import Prepared, name_for, storage_context, usable_prefix
from envkit.errors import BadInputError
from envkit.machines.profile import profile_from_dict
from envkit.state.config import Config
from envkit.state.records import Record
from envkit.state.userdirs import UserDirs


def on_site_words(on: dict) -> str:
    return f"{on.get('name')} (version {on.get('version')})"


def prepare_on(site: Record, manifest: Optional[Manifest], tables: Tables, name: Optional[str],
               prefix: Optional[Path], additions: tuple[str, ...], verify: bool, config: Config, dirs: UserDirs,
               environ: Mapping[str, str]) -> Prepared:
    """The plan of ENV on ``site`` (a published record, envkit.shared): ``manifest`` is the site's build's, when the
    manifests have it (its check and its held packages need it)."""
    shared = site.extra.get("shared") if isinstance(site.extra, dict) else None
    version = shared.get("version") if isinstance(shared, dict) else None
    shown = f"site:{site.name}"
    if name is None and prefix is None:
        raise BadInputError(f"--on {shown} makes an environment of your own: give it a --name",
                            hint=f"e.g. envkit create --on {shown} --name mywork")
    the_name = name_for(name, prefix, site.name)
    where = usable_prefix(Path(prefix).expanduser().absolute() if prefix is not None
                          else (config.envs_dir or dirs.envs) / the_name, dirs, config)
    build = _build(site, manifest)
    python = Version(site.python) if _xy(site.python) else Version("3")
    on = {"name": shown, "version": version, "prefix": site.prefix, "build": site.build}
    plan = Plan(manifest=site.manifest, build=build, name=the_name, prefix=where, python=python, backend="venv",
                backend_reason=f"a venv of {shown}'s Python that sees its packages (version {version}) and holds its "
                               "build",
                conda=None, pip=pip_parts(build._replace(pip=None), tables.python, config, False, additions, where),
                jupyter=False, verify=verify and manifest is not None,
                profile=profile_from_dict(site.machine, f"the record of {shown}"), on_target=False,
                target=site.target, unchecked="--no-verify" if not verify else "the manifests lack its build",
                companions=manifest.companions if manifest is not None else (), additions=additions, on=on)
    tools = Tools(conda=None, uv=find_uv(environ), python=None)
    context, storage = storage_context(plan, tools, config, dirs, environ)
    return Prepared(plan=plan, backend=OnSiteBackend(Path(site.prefix)), context=context, storage=storage)


def _build(site: Record, manifest: Optional[Manifest]) -> Build:
    """The site environment's build from the manifests; a stand-in of its name when they lack it."""
    if manifest is not None:
        found = next((b for b in manifest.builds if b.id == site.build), None)
        if found is not None:
            return found
    from packaging.specifiers import SpecifierSet

    return Build(id=site.build, manifest=site.manifest, version=Version("0"), variant="site", python=SpecifierSet())


def _xy(text: str) -> bool:
    import re

    return bool(re.fullmatch(r"\d+\.\d+", text))
