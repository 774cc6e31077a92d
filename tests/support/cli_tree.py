"""envkit's whole command line as click sees it, for tests that parse command lines (the docs' in test_readme.py,
the next steps envkit prints in next_steps.py, the options in test_help.py)."""

from __future__ import annotations


def envkit_command():
    """The click command of envkit with every group registered (a fresh app: envkit.cli's own stays untouched)."""
    import typer
    import typer.main

    from envkit.cli import _main, groups_for, reflow_help

    app = typer.Typer(context_settings={"help_option_names": ["-h", "--help"]})
    app.callback()(_main)
    for group in groups_for(["--help"]):
        group.register(app)
    reflow_help(app)
    return typer.main.get_command(app)
