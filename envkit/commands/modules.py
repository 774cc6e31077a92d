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
                     help="Write it into this modulefiles directory (made when missing) as envkit/NAME (Tcl) or "
                     "envkit/NAME.lua, instead of printing it.", show_default=False),
    ] = None,
) -> None:
    """Print (or write with -o DIR) a modulefile that loads ENV as `envkit run ENV` activates it.

    `module load envkit/NAME` then puts the environment's bin first on PATH and sets VIRTUAL_ENV (a venv) or
    CONDA_PREFIX and CONDA_DEFAULT_ENV (a conda environment), and ENVKIT_MODULE_BIN (what it added to PATH), nothing
    else; `module unload` takes exactly that back, restoring a VIRTUAL_ENV set before the load. envkit's modules are
    one family: loading another unloads the one loaded. `module help` and `module whatis` say the framework, build,
    CUDA, the machines it was made for and its last check.

    A site's shared environment (site:NAME) gets its modulefiles when it is published, in the shared directory's
    modulefiles directory; this writes them for your own environments, e.g.
    `envkit module torch-cu126 -o ~/modulefiles`, then `module use ~/modulefiles` and
    `module load envkit/torch-cu126`. DIR and DIR/envkit are made when missing, and never through a link or a
    directory another user could have put there (a shared /tmp).

    Exit codes: 0 written, 2 bad input (an unknown ENV, a DIR that is not safe to write into, a Tcl modulefile for
    a path holding `"` or `\\`), 1 it could not be written.
    """
    with reported_errors():
        import os

        from envkit.errors import BadInputError, EnvkitError
        from envkit.shared.modulefile import loadable_words, lua_text, module_info, tcl_text
        from envkit.shared.store import shared_info

        if lmod and tcl:
            raise BadInputError("--lmod and --tcl: give one of them (a modulefile has one syntax)")
        record = find_record(env)
        lua = lmod or (not tcl and bool(os.environ.get("LMOD_CMD")))
        cuda, rocm = _looked_up_runtime(record)
        info = module_info(env, record, shared_info(record).get("publisher"), cuda=cuda, rocm=rocm)
        text = lua_text(info) if lua else tcl_text(info)
        if output is None:
            typer.echo(text, nl=False)
            return
        from envkit.state.safedir import open_child, open_dir, write_in

        directory = Path(os.path.abspath(output))
        path = directory / "envkit" / (f"{record.name}.lua" if lua else record.name)
        try:
            here = open_dir(directory, create=True, mode=0o755)
            try:
                family = open_child(here, "envkit", directory / "envkit", 0o755)
                try:
                    write_in(family, path.name, text.encode("utf-8"), 0o644, shown=path)
                finally:
                    os.close(family)
            finally:
                os.close(here)
        except OSError as error:
            raise EnvkitError(f"cannot write {path}: {error.strerror or error}",
                              hint="Check that you can write the directory.") from None
        typer.echo(f"wrote {path}: `module load envkit/{record.name}` loads {env}")
        loadable = loadable_words(directory, os.environ.get("MODULEPATH", ""))
        if loadable:
            typer.echo(loadable)


def _looked_up_runtime(record) -> tuple[Optional[str], Optional[str]]:
    """The build's CUDA and ROCm release from the manifests, for a record made before records kept them ((None, None):
    the record has them, or the manifests no longer have its build)."""
    if record.cuda is not None or record.rocm is not None:
        return None, None
    from envkit.commands.recorded import recorded_build, recorded_manifests
    from envkit.errors import EnvkitError
    from envkit.state.records import build_cuda, build_rocm

    try:
        build = recorded_build(record, recorded_manifests(record, None))[1]
    except EnvkitError:
        return None, None
    return (build_cuda(build), build_rocm(build)) if build is not None else (None, None)


def register(app: typer.Typer) -> None:
    app.command()(module)
