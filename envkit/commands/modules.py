"""Modulefiles for environments: ``envkit module ENV [--lmod | --tcl] [-o DIR]``."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.commands.output import reported_errors
from envkit.commands.recorded import find_record
from envkit.commands.options import path_value


def module(
    env: Annotated[str, typer.Argument(metavar="ENV", help="The environment: one of yours, or the site's site:NAME "
                                       "(`envkit envs` lists both).")],
    lmod: Annotated[bool, typer.Option("--lmod", help="A Lua modulefile, for Lmod (the default where Lmod is the "
                                                      "module system: $LMOD_CMD is set).")] = False,
    tcl: Annotated[bool, typer.Option("--tcl", help="A Tcl modulefile, for Environment Modules (Lmod reads it too; "
                                                    "the default elsewhere).")] = False,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", metavar="DIR", parser=path_value,
                     help="Write it into this modulefiles directory (one on $MODULEPATH) as envkit/NAME (Tcl) or "
                     "envkit/NAME.lua, instead of printing it.", show_default=False),
    ] = None,
) -> None:
    """Print (or write with -o DIR) a modulefile that loads ENV as `envkit run ENV` activates it.

    `module load envkit/NAME` then puts the environment's bin first on PATH and sets VIRTUAL_ENV (a venv) or
    CONDA_PREFIX and CONDA_DEFAULT_ENV (a conda environment), nothing else; `module unload` takes exactly that back.
    envkit's modules are one family: loading another unloads the one loaded. `module help` and `module whatis` say
    the framework, build, CUDA, the machines it was made for and its last check.

    A site's shared environment (site:NAME) gets its modulefiles when it is published, in the shared directory's
    modulefiles directory; this writes them for your own environments, e.g.
    `module use ~/modulefiles; envkit module torch-cu126 -o ~/modulefiles; module load envkit/torch-cu126`.

    Exit codes: 0 written, 2 bad input (an unknown ENV, a DIR that is not on $MODULEPATH), 1 it could not be written.
    """
    with reported_errors():
        import os

        from envkit.errors import BadInputError, EnvkitError
        from envkit.shared.modulefile import lua_text, module_info, tcl_text
        from envkit.shared.store import shared_info

        if lmod and tcl:
            raise BadInputError("--lmod and --tcl: give one of them (a modulefile has one syntax)")
        record = find_record(env)
        lua = lmod or (not tcl and bool(os.environ.get("LMOD_CMD")))
        info = module_info(env, record, shared_info(record).get("publisher"))
        text = lua_text(info) if lua else tcl_text(info)
        if output is None:
            typer.echo(text, nl=False)
            return
        from envkit.commands.publishing import check_on_modulepath

        if not output.is_dir():
            raise BadInputError(f"-o {output}: no such directory",
                                hint=f"Make it (mkdir -p {output}) and add it with `module use {output}`.")
        check_on_modulepath(output.absolute(), os.environ)
        from envkit.shared.store import write_file

        directory = output / "envkit"
        path = directory / (f"{record.name}.lua" if lua else record.name)
        try:
            directory.mkdir(exist_ok=True)
            write_file(path, text.encode("utf-8"))
        except OSError as error:
            raise EnvkitError(f"cannot write {path}: {error.strerror or error}",
                              hint="Check that you can write the directory.") from None
        typer.echo(f"wrote {path}: `module load envkit/{record.name}` loads {env}")


def register(app: typer.Typer) -> None:
    app.command()(module)
