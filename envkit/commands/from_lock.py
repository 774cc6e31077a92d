"""``envkit create --from-lock FILE``: the environment a lock pins (from `envkit lock`, `envkit export` or conda-lock),
made the way `envkit create` makes one (commands/making.py)."""

from pathlib import Path
from typing import Optional

from envkit.commands.output import reported_errors
from envkit.commands.places import manifests_dir, user_dirs
from envkit.commands.targets import fleet_for, target_args, target_words
from envkit.commands.options import TargetOptions


def create_from_lock(path: Optional[Path], bundle: Optional[Path], target: TargetOptions, *,
                     manifest: Optional[str], name: Optional[str], prefix: Optional[Path], build: Optional[str],
                     python: Optional[str], backend: str, dry_run: bool, yes: bool, force: bool, json_output: bool,
                     verify: bool, jupyter: bool, verbose: bool,
                     probe_timeout: float, verify_on_node: bool, mirrors: tuple = ()) -> None:
    """`envkit create --from-lock FILE` (or --from-bundle PATH), given create's options: those that choose what to
    install (MANIFEST, --build, --python, --jupyter, --backend) do not go with it."""
    with reported_errors():
        import os

        if bundle is not None:
            from envkit.system.scratch import scratch_dir
            from envkit.travel.bundle import check_bundle, open_bundle

            if path is not None:
                from envkit.errors import BadInputError

                raise BadInputError("--from-bundle installs the bundle's own lock: leave out --from-lock")
            with scratch_dir("bundle") as scratch:  # a tar unpacked for the install, removed after it
                lock, mirrors = check_bundle(open_bundle(bundle, scratch), str(bundle))  # before anything is made
                create_from_lock(lock, None, target, manifest=manifest, name=name, prefix=prefix, build=build,
                                 python=python, backend=backend, dry_run=dry_run, yes=yes, force=force,
                                 json_output=json_output, verify=verify, jupyter=jupyter, verbose=verbose,
                                 probe_timeout=probe_timeout, verify_on_node=verify_on_node, mirrors=mirrors)
            return
        assert path is not None

        from envkit.errors import BadInputError

        from envkit.lockfile.pep751 import is_pylock

        pylock = is_pylock(path)  # PEP 751's pins no Python: --python chooses the one its markers are judged for
        clashing = [flag for flag, given in (("MANIFEST", manifest), ("--build", build),
                                             ("--python", None if pylock else python),
                                             ("--jupyter", jupyter or None),
                                             ("--backend", None if backend == "auto" else backend)) if given]
        if clashing:
            raise BadInputError(f"--from-lock installs what the lock pins: {', '.join(clashing)} cannot go with it",
                                hint="Leave them out, or make another lock (`envkit lock MANIFEST --build ID`).")
        from envkit.catalog.cache import cached_catalog
        from envkit.commands.making import check_verify_on_node, for_target, make
        from envkit.errors import EnvkitError
        from envkit.lockfile.format import read_lock
        from envkit.lockfile.install import FromLock, Target, prepare_from_lock
        from envkit.lockfile.model import MANIFEST
        from envkit.state.config import load_config

        if verify_on_node:
            check_verify_on_node(target, json_output, dry_run)
        dirs = user_dirs()
        config = load_config(os.environ, dirs)
        if mirrors:  # a bundle's: each locked URL sent to its file in the bundle
            from envkit.travel.bundle import with_bundle

            config = with_bundle(config, mirrors)
        directory = manifests_dir(target.manifests)
        the_lock = None if pylock else read_lock(path, dirs.cache)
        fleet = fleet_for(cached_catalog(directory, [], dirs.cache).tables, target)
        profile = fleet.planning_profile()
        if the_lock is None:  # a pylock.toml's wheels are chosen for the target's Python and platform
            the_lock = read_pylock_file(path, python, cached_catalog(directory, [], dirs.cache).tables,
                                        profile.platform)
        named = the_lock.fact(MANIFEST)
        try:  # the tables, and the lock's manifest when the manifests still have it: one load
            catalog = cached_catalog(directory, [named] if named else [], dirs.cache)
        except EnvkitError:  # a lock whose manifest is gone (or not envkit's): judged by its packages alone
            catalog = cached_catalog(directory, [], dirs.cache)
        tables = catalog.tables
        each = () if target.on_target else tuple((c.names, c.profile) for c in fleet.configs())
        # What a lock made for the target would be named after: its partition, the directory of its profiles, or
        # its (first) machine.
        directories = [path for path in target.machine or () if path.is_dir()]
        label = (_partition_name(target.partition) if target.partition is not None
                 else directories[0].resolve().name if len(target.machine or ()) == 1 and directories
                 else fleet.names[0])
        prepared, the_manifest = prepare_from_lock(
            FromLock(path=path, name=name, prefix=prefix, verify=verify), the_lock, catalog.manifests.get, tables,
            Target(profile, target.on_target, target_words(target, fleet), target_args(target), each, label), config,
            dirs, os.environ)
        prepared = for_target(prepared, fleet, target)
        if verify and the_manifest is None:
            import typer

            typer.echo("envkit: note: the lock names no build of envkit's manifests: no post-install check",
                       err=True)
        make(prepared, the_manifest, tables, dirs, target, dry_run=dry_run, yes=yes, force=force,
             json_output=json_output, verbose=verbose, probe_timeout=probe_timeout, verify_on_node=verify_on_node,
             fleet=fleet)


def _partition_name(spec: str) -> str:
    from envkit.site import parse_partition_spec  # (the site package, only where a partition is named)

    return parse_partition_spec(spec)[0]


def read_pylock_file(path: Path, python: Optional[str], tables, platform: str = "linux-64"):
    """A pylock.toml as envkit installs it: for --python X.Y, else python.yaml's default Python when the lock allows
    it, else the newest the lock allows; what it leaves out (the project's own directory) said on stderr."""
    import typer

    from envkit.errors import BadInputError
    from envkit.lockfile.pep751 import default_python, parse_pylock, read_pylock, read_pylock_text
    from envkit.pick.resolve import parse_python_request

    parsed = parse_pylock(read_pylock_text(path), str(path))
    if python is not None:
        chosen = str(parse_python_request(python, tables.python).python)
    else:
        chosen = default_python(parsed, tables.python.versions, tables.python.default)
        if chosen is None:
            raise BadInputError(f"{path} requires Python {parsed.requires_python}: envkit provides none of those",
                                hint="Add the version to python.yaml in the manifests directory.")
    read = read_pylock(parsed, str(path), chosen, platform)
    for note in read.left_out:
        typer.echo(f"envkit: note: {path.name}: left out {note}", err=True)
    return read.lock
