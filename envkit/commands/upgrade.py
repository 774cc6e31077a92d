"""Making an environment again with the newest build that fits it, its additions kept: ``envkit upgrade``."""

from typing import Annotated

import typer

from envkit.commands import completion
from envkit.commands.output import echo_report, print_json, reported_errors
from envkit.commands.options import JsonOption, ProbeTimeoutOption


def upgrade(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment to upgrade (`envkit envs` lists them).",
                                       autocompletion=completion.environment_names)],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would change (the build, the additions "
                                                            "kept) and the plan; change nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before replacing it (needed without a "
                                                          "terminal to ask on).")] = False,
    json_output: JsonOption = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip the check of the new build (then nothing "
                                                                "stops a new build that does not work).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the installers' own output.")] = False,
    probe_timeout: ProbeTimeoutOption = 300.0,
) -> None:
    """Make ENV again with the newest build that fits the machines it was made for (as they are now: a new driver,
    a new release in the manifests), with the same Python and the same additions.

    The new build is made where ENV is, as `envkit create --force` makes it: the old environment is set aside
    meanwhile and comes back if the new one fails to install, refuses an addition, or fails its check; it is deleted
    only once the new one passes. A personal environment (`envkit create --on site:NAME`) moves to the version the
    site publishes now. `--dry-run` says the change: `torch 2.11.0+cu128 -> torch-2.15-cu130, 14 additions kept`.

    Exit codes: 0 upgraded (or already the newest), 1 failed (the old environment kept), 2 bad input.
    """
    with reported_errors():
        from envkit.commands.recorded import find_record

        record = find_record(env)
        if record.on:
            _upgrade_on(record, dry_run, yes, json_output, verbose, probe_timeout, not no_verify)
        _upgrade(record, dry_run, yes, json_output, verbose, probe_timeout, not no_verify)


def _upgrade(record, dry_run: bool, yes: bool, json_output: bool, verbose: bool, probe_timeout: float,
             verify: bool) -> None:
    import os
    from pathlib import Path

    from envkit.commands.adding import framework_names, made_from
    from envkit.commands.making import for_target, make
    from envkit.commands.options import TargetOptions
    from envkit.commands.places import user_dirs
    from envkit.commands.targets import build_for_target, fleet_for, recorded_target, target_args
    from envkit.errors import BadInputError
    from envkit.pick.resolve import parse_python_request
    from envkit.state.config import load_config

    source = made_from(record)
    if source.manifest is None:
        raise BadInputError(f"{record.name} was made from {record.manifest}, which the manifests no longer have",
                            hint="Point --manifests (ENVKIT_MANIFESTS) at the manifests it was made from.")
    target = (recorded_target(record) or TargetOptions())._replace(
        manifests=Path(record.manifests) if record.manifests else None)
    fleet = fleet_for(source.tables, target)
    python = record.python if _xy(record.python) else None
    request = parse_python_request(python, source.tables.python)
    chosen = build_for_target(source.manifest, fleet, source.tables, request, None, target, python)
    if chosen.build_id is None:  # one machine: the pick, as the plan would make it
        from envkit.create.prepare import pick_candidate

        candidate, resolution = pick_candidate(source.manifest, chosen.profile, source.tables, request, None,
                                               target.on_target, target_args(target, python), chosen.resolution)
        chosen = chosen._replace(build_id=candidate.build.id, resolution=resolution)
    additions = _additions(record, source, chosen.build_id, framework_names)
    if chosen.build_id == record.build:
        _say(record, None, additions, json_output, dry_run)
        raise typer.Exit(0)
    dirs = user_dirs()
    from envkit.create.prepare import CreateRequest, prepare

    prepared = prepare(CreateRequest(build_id=chosen.build_id, name=record.name, backend=record.backend,
                                     prefix=Path(record.prefix), jupyter=bool(record.kernel), verify=verify,
                                     target_args=target_args(target, python), additions=additions),
                       source.manifest, source.tables, chosen.profile, target.on_target, request,
                       load_config(os.environ, dirs), dirs, os.environ, resolution=chosen.resolution)
    prepared = for_target(prepared, fleet, target)
    _say(record, chosen.build_id, additions, json_output, dry_run)
    if dry_run and json_output:
        raise typer.Exit(0)
    make(prepared, source.manifest, source.tables, dirs, target, dry_run=dry_run, yes=yes, force=True,
         json_output=json_output, verbose=verbose, probe_timeout=probe_timeout, verify_on_node=False, fleet=fleet)


def _upgrade_on(record, dry_run: bool, yes: bool, json_output: bool, verbose: bool, probe_timeout: float,
                verify: bool) -> None:
    """A personal environment: on the version its site environment publishes now."""
    import os

    from envkit.commands.personal import create_on
    from envkit.commands.places import user_dirs
    from envkit.shared.find import find_shared

    site = find_shared(record.on.get("name", ""), os.environ, user_dirs())
    additions = tuple(line for line in record.additions or () if isinstance(line, str))
    if site.prefix == record.on.get("prefix"):
        _say(record, None, additions, json_output, dry_run)
        raise typer.Exit(0)
    version = (site.extra.get("shared") or {}).get("version")
    _say(record, f"{record.on.get('name')} {version}", additions, json_output, dry_run)
    if dry_run and json_output:
        raise typer.Exit(0)
    from pathlib import Path

    create_on(record.on["name"], record.name, Path(record.prefix), additions, dry_run=dry_run, yes=yes, force=True,
              json_output=json_output, verbose=verbose, probe_timeout=probe_timeout, verify=verify)


def _additions(record, source, build_id: str, framework_names) -> tuple:
    """The record's additions, checked again for the new build (a local file may be gone: exit 2, nothing done)."""
    from envkit.backends.requested import requested

    lines = [line for line in record.additions or () if isinstance(line, str)]
    if not lines:
        return ()
    build = next(b for b in source.manifest.builds if b.id == build_id)
    return requested(lines, [], framework_names(source._replace(build=build))).lines


def _say(record, new, additions, json_output: bool, dry_run: bool) -> None:
    """The change in one line (the JSON of a dry run, and of an environment already the newest)."""
    held = (record.held or [f"{record.build}"])[0].replace("==", " ")
    kept = f"{len(additions)} addition{'s' if len(additions) != 1 else ''} kept"
    if json_output:
        if new is None or dry_run:
            print_json({"name": record.name, "from": record.build, "to": new or record.build, "held": record.held or [],
                        "additions": list(additions), "dry_run": dry_run, "changed": new is not None})
        return
    if new is None:
        echo_report(f"{record.name} is the newest that fits already: {record.build} ({held}); nothing to do")
        return
    typer.echo(f"{record.name}: {held} -> {new}, {kept}{': ' + ', '.join(additions) if additions else ''}",
               err=not dry_run)


def _xy(text: str) -> bool:
    import re

    return bool(re.fullmatch(r"\d+\.\d+", text))


def register(app: typer.Typer) -> None:
    app.command()(upgrade)
