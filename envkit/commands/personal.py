"""What `envkit create --on site:NAME --name ENV` does: a personal environment on top of the site's shared one
(envkit.create.on_site), made, checked and recorded as `create` makes any (commands/making.py). A helper of
commands/create.py; it registers no command."""

from pathlib import Path
from typing import NoReturn, Optional


def create_on(site_name: str, name: Optional[str], prefix: Optional[Path], additions: tuple[str, ...], *,
              dry_run: bool, yes: bool, force: bool, json_output: bool, verbose: bool, probe_timeout: float,
              verify: bool) -> NoReturn:
    import os

    from envkit.catalog import load_tables
    from envkit.commands.adding import made_from
    from envkit.commands.making import make
    from envkit.commands.options import TargetOptions
    from envkit.commands.places import user_dirs
    from envkit.create.on_site import prepare_on
    from envkit.errors import BadInputError
    from envkit.shared.find import find_shared
    from envkit.shared.layout import shared_name
    from envkit.state.config import load_config

    if shared_name(site_name) is None:
        raise BadInputError(f"--on {site_name}: give a site environment, site:NAME (`envkit envs` lists them)",
                            hint="A personal environment stands on one the site publishes; for one of your own, "
                                 "`envkit add ENV PKG` adds to it.")
    dirs = user_dirs()
    site = find_shared(site_name, os.environ, dirs)
    source = made_from(site)
    tables = source.tables if source.tables is not None else load_tables(source.directory)
    prepared = prepare_on(site, source.manifest, tables, name, prefix, additions, verify,
                          load_config(os.environ, dirs), dirs, os.environ)
    target = TargetOptions(manifests=Path(site.manifests) if site.manifests else None)
    make(prepared, source.manifest, tables, dirs, target, dry_run=dry_run, yes=yes, force=force,
         json_output=json_output, verbose=verbose, probe_timeout=probe_timeout, verify_on_node=False)
