"""Shell completion of the names envkit knows: manifests, build ids, environments, partitions and their nodes.

typer's mechanism (``envkit --install-completion``, ``--show-completion``; bash, zsh, fish): the shell runs envkit
with ``_ENVKIT_COMPLETE`` set and the words typed so far, and each argument or option asks one of these functions
for the names that begin with what was typed. They read what envkit already keeps (the manifests directory and the
parsed catalog in envkit's cache, the records of the environments, the site file, cached too), never detect the
machine or reach a network, and answer nothing rather than an error: a broken file is found when the command runs.
"""

from typing import Any, Callable, Iterable

import typer



def _quietly(find: Callable[[], Iterable[str]]) -> list[str]:
    """What ``find`` gives, sorted, with every failure an empty answer: a completion never prints an error into the
    user's command line (the command itself reports the problem when it runs)."""
    try:
        return sorted(set(find()))
    except Exception:  # noqa: BLE001 - see the docstring
        return []


def manifest_names(incomplete: str) -> list[str]:
    """The manifests of the manifests directory that begin with ``incomplete``."""
    from envkit.catalog.layout import manifest_names as names_in
    from envkit.commands.places import manifests_dir

    return _quietly(lambda: [name for name in names_in(manifests_dir(None)) if name.startswith(incomplete)])


def build_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """--build: the ids of the manifest named on the command line (``manifest``, the first of ``names``, or the first
    argument typed), else of every manifest, from the parsed catalog envkit keeps."""
    params = ctx.params or {}
    # click has not yet given the positional arguments to the params when it completes an option: they wait in args
    typed = [arg for arg in (getattr(ctx, "args", None) or []) if not arg.startswith("-")]
    manifest = params.get("manifest") or (params.get("names") or typed or [None])[0]
    return _quietly(lambda: _build_ids(manifest, incomplete))


def _build_ids(manifest: Any, incomplete: str) -> Iterable[str]:
    from envkit.catalog.cache import cached_catalog
    from envkit.catalog.layout import manifest_names as names_in
    from envkit.commands.places import manifests_dir, user_dirs

    directory = manifests_dir(None)
    names = [manifest] if isinstance(manifest, str) and manifest in names_in(directory) else []
    catalog = cached_catalog(directory, names, user_dirs().cache)
    return [build.id for m in catalog.manifests.values() for build in m.builds if build.id.startswith(incomplete)]


def environment_names(incomplete: str) -> list[str]:
    """The environments envkit made (their records), as `envkit envs` lists them."""

    def names() -> Iterable[str]:
        from envkit.commands.places import user_dirs
        from envkit.state.records import scan

        records, _ = scan(user_dirs().records)
        return [record.name for record in records if record.name.startswith(incomplete)]

    return _quietly(names)


def partition_specs(incomplete: str) -> list[str]:
    """``NAME`` of the site file's partitions; after ``NAME:``, ``NAME:NODE`` for each of its nodes (after a comma,
    the next node)."""
    return _quietly(lambda: _partition_specs(incomplete))


def _partition_specs(incomplete: str) -> Iterable[str]:
    from envkit.commands.places import current_site
    from envkit.site import machine_names

    site = current_site()
    if ":" not in incomplete:
        return [name for name in site.partitions if name.startswith(incomplete)]
    name, _, nodes = incomplete.partition(":")
    partition = site.partitions.get(name)
    if partition is None:
        return []
    done, _, last = nodes.rpartition(",")
    prefix = f"{name}:{done + ',' if done else ''}"
    return [prefix + machine for machine in machine_names(partition) if machine.startswith(last)]
