"""Adding packages to an environment, its build held: ``envkit add``."""

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from envkit.commands import completion
from envkit.commands.output import echo_report, print_json, reported_errors
from envkit.commands.options import JsonOption, ProbeTimeoutOption, path_value

RequirementOption = Annotated[
    Optional[List[Path]],
    typer.Option("--requirement", "-r", metavar="FILE", parser=path_value,
                 help="Add the packages of this requirements file (one requirement per line; -r FILE inside it is "
                 "followed; index, find-links, editable and constraint options are refused). Repeatable.",
                 show_default=False),
]


def add(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment to add to (`envkit envs` lists them).",
                                       autocompletion=completion.environment_names)],
    packages: Annotated[
        Optional[List[str]],
        typer.Argument(metavar="[PKG]...", help="Packages to add: NAME, NAME==VERSION, NAME>=VERSION, a local wheel "
                       "or directory, or NAME @ https://... (after -- when one starts with '-').", show_default=False),
    ] = None,
    requirement: RequirementOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be installed, and the command; change "
                                                            "nothing.")] = False,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip the framework's check after adding.")] = False,
    json_output: JsonOption = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the installer's own output.")] = False,
    probe_timeout: ProbeTimeoutOption = 300.0,
) -> None:
    """Install packages into ENV with its build held: the framework and its companions stay at their exact versions
    and local labels (torch 2.13.0+cu126), whatever the packages ask for.

    The packages come from the default index (PyPI, or its mirror in envkit's config), never from the framework's
    own index; the build's packages are constraints no addition can move. A package that cannot be installed without
    moving the build is refused before anything changes, with the requirement that clashes and a next step (an older
    release of the package, or the build that fits both, as a new environment). After installing, the framework's
    check runs again (the fast part of `envkit verify`); a failure there, an installer's failure or Ctrl-C puts the
    environment back as it was. The record keeps what was added: `envkit envs`, `export` and `upgrade` know it.

    Examples: `envkit add torch-cu126 transformers`, `envkit add torch-cu126 -r requirements.txt --dry-run`.

    Exit codes: 0 added and checked, 1 refused, failed or the check failed (the environment as it was), 2 bad input.
    """
    with reported_errors():
        import os
        import sys

        from envkit.backends.requested import requested
        from envkit.commands.adding import add_request, framework_names, made_from
        from envkit.commands.recorded import find_record
        from envkit.errors import BadInputError
        from envkit.shared.layout import shared_name

        if shared_name(env) is not None:
            raise BadInputError(f"{env} is a site environment, and site environments are read-only",
                                hint=f"Make one of your own on top of it, then add to that: `envkit create --on {env} "
                                     "--name NAME`.")
        record = find_record(env)
        source = made_from(record)
        asked = requested(list(packages or []), list(requirement or []), framework_names(source))
        request = add_request(record, asked.lines, asked.names, source)
        if dry_run:
            _show_dry_run(request, record, asked, source, json_output)
            return
        from envkit.commands.adding import checker
        from envkit.backends.clash import Refused
        from envkit.create.add import CheckFailed, add as add_packages
        from envkit.create.progress import Progress

        progress = Progress(sys.stderr, 1 + int(not no_verify), verbose=verbose, live=sys.stderr.isatty())
        try:
            added = add_packages(request, _dirs(), progress, None if no_verify else checker(source, probe_timeout),
                                 os.environ)
        except Refused as refused:
            _refuse(refused, record, source, asked, request)
        except CheckFailed as failed:
            from envkit.probe.render import report_text

            echo_report(report_text(failed.report))
            raise
        _report(added, json_output)


def _dirs():
    from envkit.commands.places import user_dirs

    return user_dirs()


def _refuse(refused, record, source, asked, request) -> None:
    from envkit.commands.adding import refusal_hint

    refused.hint = refusal_hint(refused, record, source, asked.lines, request)
    raise refused


def _show_dry_run(request, record, asked, source, json_output: bool) -> None:
    import os

    from envkit.backends.base import command_text
    from envkit.backends.clash import Refused
    from envkit.create.add import dry_run

    try:
        would = dry_run(request, os.environ)
    except Refused as refused:
        _refuse(refused, record, source, asked, request)
    if json_output:
        print_json({"name": record.name, "dry_run": True, "build": record.build, "held": would.held.pins(),
                    "would": list(would.lines), "command": list(would.command)})
        return
    held = ", ".join(f"{name} {version}" for name, version in would.held.exact) or "nothing"
    lines = [f"Would add to {record.name} (the build {record.build} held: {held}):"]
    lines += [f"  {line}" for line in would.lines] or ["  nothing: every package is installed already"]
    lines.append(f"Command (REQUIREMENTS: the packages asked for): {command_text(would.command)}")
    echo_report("\n".join(lines))


def _report(added, json_output: bool) -> None:
    record = added.record
    check = record.verify if added.report is not None else None  # (the check just run, as the record keeps it)
    if json_output:
        print_json({"name": record.name, "dry_run": False, "build": record.build, "held": added.held.pins(),
                    "added": [{"name": n, "version": v} for n, v in added.added],
                    "changed": [{"name": n, "from": a, "to": b} for n, a, b in added.changed],
                    "additions": list(record.additions or []), "check": check})
        return
    if added.added or added.changed:
        lines = [f"Added to {record.name}: " + (", ".join(f"{n} {v}" for n, v in added.added) or "nothing new")]
        if added.changed:
            lines.append("Changed: " + ", ".join(f"{n} {a} -> {b}" for n, a, b in added.changed))
    else:
        lines = [f"Nothing to add to {record.name}: every package asked for is installed"]
    held = ", ".join(f"{name} {version}" for name, version in added.held.exact) or "nothing to hold"
    lines.append(f"The build {record.build} is unchanged: {held}")
    if added.report is not None:
        lines.append(f"The framework's check: {'PASS' if added.report.ok else 'FAIL'} ({added.report.framework} "
                     f"{added.report.version})")
    echo_report("\n".join(lines))


def register(app: typer.Typer) -> None:
    app.command()(add)
