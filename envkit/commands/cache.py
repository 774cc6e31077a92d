"""The package caches: ``envkit cache`` (where they are, what they hold) and ``envkit cache clean``."""

from typing import Annotated, Optional

import typer

from envkit.commands.output import print_json, reported_errors
from envkit.commands.places import user_dirs
from envkit.commands.options import JsonOption

app = typer.Typer(
    name="cache",
    help="Where envkit's package caches are (uv's, pip's, the conda engine's) and how much they hold; `envkit cache "
    "clean` empties them. The cache is `cache_dir:` in envkit's config or $ENVKIT_CACHE_DIR; else envkit's cache "
    "directory, or <envs_dir>/.envkit-cache when environments live on another filesystem, so that they are "
    "hard-linked from it instead of each being a full copy. Environments keep working after a clean: their files "
    "are their own links.",
    short_help="Where the package caches are and what they hold; `envkit cache clean` empties them.",
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _caches():
    import os

    from envkit.create.storage import all_caches
    from envkit.state.config import load_config

    dirs = user_dirs()
    return all_caches(load_config(os.environ, dirs), dirs, os.environ)


@app.callback()
def show(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Show where the package caches are, why there, and their size on disk (each file counted once, as du does)."""
    if ctx.invoked_subcommand is not None:
        return
    with reported_errors():
        from envkit.storage.cache import PARTS
        from envkit.storage.usage import disk_usage
        from envkit.text.words import size_text

        rows = []
        for place in _caches():
            seen: set = set()
            parts = {part: disk_usage(place.root / part, seen) for part in PARTS}
            rows.append((place, parts))
        if json_output:
            print_json({"caches": [
                {"path": str(place.root), "why": place.why, "source": place.source, "exists": place.root.is_dir(),
                 "bytes": sum(u.bytes for u in parts.values()), "files": sum(u.files for u in parts.values()),
                 "parts": {name: {"bytes": u.bytes, "files": u.files} for name, u in parts.items()}}
                for place, parts in rows]})
            return
        lines = []
        for place, parts in rows:
            total = sum(u.bytes for u in parts.values())
            files = sum(u.files for u in parts.values())
            held = f"{size_text(total)} in {files:,} files" if place.root.is_dir() else "not made yet"
            lines.append(f"{place.root}  {held}  ({place.why})")
            lines += [f"  {name + '/':<11} {size_text(u.bytes)} in {u.files:,} files"
                      for name, u in parts.items() if u.files]
        lines.append("`envkit cache clean` empties them; `--older-than DAYS` keeps what was used lately.")
        typer.echo("\n".join(lines))


@app.command()
def clean(
    older_than: Annotated[
        Optional[float],
        typer.Option("--older-than", metavar="DAYS", min=0, help="Remove only the packages (and index pages) nothing "
                     "was written to for this many days.", show_default=False),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed without a terminal to ask on).")] = False,
    json_output: JsonOption = False,
) -> None:
    """Empty the package caches (only envkit's own directories in them: uv/, pip/, conda-pkgs/, uv-python/).

    Refused while an `envkit create` is installing from a cache (it holds the cache's lock), and for a cache someone
    else may change. Says how much it freed: what it removed, less the files environments are still linked to.
    Environments already made keep working: their files are links of their own. The next create downloads again
    what it needs.

    Exit codes: 0 cleaned, 1 a create is using the cache (or cleaning failed), 2 bad input (a cache someone else
    may change)."""
    with reported_errors():
        import sys

        from envkit.errors import BadInputError
        from envkit.storage.cache import clean as clean_cache

        places = [place for place in _caches() if place.root.is_dir()]
        what = f"packages unused for {older_than:g} days" if older_than is not None else "everything"
        if not yes:
            if not sys.stdin.isatty():
                raise BadInputError("not cleaning the cache without confirmation", hint="Add --yes to clean it.")
            listed = ", ".join(str(place.root) for place in places) or "(none exist)"
            if not typer.confirm(f"Remove {what} from {listed}?", default=False, err=True):
                typer.echo("envkit: nothing removed", err=True)
                raise typer.Exit(1)
        from envkit.text.words import size_text

        done = [(place, clean_cache(place.root, older_than)) for place in places]
        freed = sum(result.freed for _, result in done)
        if json_output:
            print_json({"caches": [{"path": str(place.root), "removed": result.removed, "kept": result.kept,
                                    "freed_bytes": result.freed} for place, result in done],
                        "freed_bytes": freed})
            return
        for place, result in done:
            kept = f", kept {result.kept} used lately" if older_than is not None else ""
            typer.echo(f"Cleaned {place.root}: removed {result.removed} entries{kept}, "
                       f"freed {size_text(result.freed)}.")
        if not done:
            typer.echo("No package cache to clean.")
        elif len(done) > 1:
            typer.echo(f"Freed {size_text(freed)} in all.")
        if done:
            typer.echo("Files your environments are linked to stay on disk: they are not counted as freed.")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="cache")
