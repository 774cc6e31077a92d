"""Where `envkit verify` keeps a check's result: in the environment's record (under its lock, unless it was replaced
while the check ran); for a site's shared environment, with the user (and as the site's last check when an admin ran
it), never in the shared directory."""

import typer

from envkit.commands.places import user_dirs
from envkit.commands.targets import fleet_for, target_argv
from envkit.commands.options import TargetOptions


def store_verify(record, reports, names, target: TargetOptions) -> None:
    """Into the record, unless the environment was replaced while the check ran (then it judged the old one).
    Machines named with --machine/--partition become the record's target."""
    import os

    from envkit.create.lock import name_lock
    from envkit.probe.check import verify_summary
    from envkit.slurm.job_context import job_context
    from envkit.state import ownership, records

    from envkit.shared.store import is_shared, save_own_check

    dirs = user_dirs()
    if is_shared(record):  # the site's: the result is the user's, kept with the user, never in the shared directory
        summary = verify_summary(reports[0], reports[1:], [n for group in names for n in group])
        save_own_check(dirs.data, record, summary)
        from envkit.shared.find import configured_layout
        from envkit.shared.publish import record_admin_check

        layout = configured_layout(os.environ, dirs)
        if layout is not None and record_admin_check(layout, record, summary):  # an admin's: the site's last check
            typer.echo(f"envkit: recorded as the site's last check of {record.name}", err=True)
        return
    try:
        with name_lock(dirs.locks, record.name):
            current = records.load(dirs.records, record.name)
            if current is not None and current.created == record.created and current.prefix == record.prefix:
                summary = verify_summary(reports[0], reports[1:], [n for group in names for n in group])
                context = job_context(os.environ)
                if context.in_job:  # checked on a Slurm node: which one, in which job
                    summary.update(node=context.node, job=context.job_id,
                                   partition=os.environ.get("SLURM_JOB_PARTITION"))
                updated = records.with_verify(current, summary)
                if target.elsewhere:
                    import dataclasses

                    from envkit.machines.target import target_dict

                    fleet = fleet_for(None, target)
                    updated = dataclasses.replace(updated, target=target_dict(
                        fleet, target_argv(target, absolute=True, manifests=False)))
                ownership.update(updated, dirs.records)  # never into a directory that no longer holds it
    except OSError as error:  # a read-only or full data directory: the check ran, its result cannot be kept
        from envkit.errors import EnvkitError

        raise EnvkitError(f"the check's result could not be kept: {error.filename or dirs.locks}: "
                          f"{error.strerror or error}",
                          hint="envkit keeps it in its data directory: make it writable (or give it room), then "
                               "verify again.") from None
