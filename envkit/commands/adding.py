"""What `envkit add` needs of an environment envkit made, shared with `create --with` and `upgrade`: the build it
holds (from the manifests it was made from), the request the library carries out, the framework's check, and the
next step a refusal prints (a build that fits both, an older release of the package). A helper of commands/add.py;
it registers no command."""

from pathlib import Path
from typing import NamedTuple, Optional, Sequence


class MadeFrom(NamedTuple):
    """The manifest and build a recorded environment was made from (None each when the manifests lack them)."""

    manifest: object  # envkit.catalog.model.Manifest
    build: object  # envkit.catalog.model.Build
    tables: object  # envkit.catalog.model.Tables
    directory: Path


def made_from(record) -> MadeFrom:
    """The record's manifest and build, read from the manifests it was made from (or the shipped ones)."""
    from envkit.catalog import manifest_names
    from envkit.catalog.cache import cached_catalog
    from envkit.commands.places import manifests_dir, user_dirs
    from envkit.commands.recorded import recorded_manifests

    directory = manifests_dir(recorded_manifests(record, None))
    known = record.manifest in manifest_names(directory)
    catalog = cached_catalog(directory, [record.manifest] if known else [], user_dirs().cache)  # (parsed once)
    if not known:
        return MadeFrom(None, None, catalog.tables, directory)
    manifest = catalog.manifests[record.manifest]
    return MadeFrom(manifest, next((b for b in manifest.builds if b.id == record.build), None), catalog.tables,
                    directory)


def framework_names(source: MadeFrom) -> list[str]:
    """The build's own projects (its pip packages' names and the framework's companions): never from a URL or a
    file."""
    from envkit.backends.installers import requirement_parts

    named = source.build.pip.packages if source.build is not None and source.build.pip is not None else ()
    companions = source.manifest.companions if source.manifest is not None else ()
    framework = [source.manifest.framework] if source.manifest is not None else []
    return [*framework, *(requirement_parts(text).name for text in named), *companions]


def add_request(record, lines: Sequence[str], names: Sequence[str], source: MadeFrom):
    """The library's request (envkit.create.add.AddRequest): the default index through the user's mirrors, envkit's
    package cache, the installers isolated from the user's own configuration."""
    import os

    from envkit.backends.base import Context
    from envkit.backends.installers import installer_environ
    from envkit.backends.tools import Tools, find_uv
    from envkit.commands.places import user_dirs
    from envkit.create.add import AddRequest
    from envkit.create.storage import package_cache
    from envkit.state.config import check_transport, load_config

    dirs = user_dirs()
    config = load_config(os.environ, dirs)
    cache = package_cache(config, dirs, os.environ)
    index = check_transport(config.mirrored(source.tables.python.pypi_index), config, "index")
    context = Context(tools=Tools(conda=None, uv=find_uv(os.environ), python=None),
                      environ=installer_environ(os.environ, dirs, None, cache.root), conda_cache=cache.conda_packages,
                      mirrors=tuple(m.target for m in config.mirrors))
    build = source.build
    return AddRequest(record=record, lines=tuple(lines), names=tuple(names), index_url=index, context=context,
                      named=build.pip.packages if build is not None and build.pip is not None else (),
                      companions=source.manifest.companions if source.manifest is not None else (),
                      framework=source.manifest.framework if source.manifest is not None else "")


def checker(source: MadeFrom, timeout: float):
    """The framework's check of a recorded environment, as create ran it after installing: its Python, activated
    as `envkit run` does, judged for the machine it was made for."""

    def check(record):
        import os

        from envkit.backends.base import python_of
        from envkit.machines.profile import profile_from_dict
        from envkit.probe.check import check_against
        from envkit.probe.runner import ProbeOptions
        from envkit.system.activation import activated_environ

        prefix = Path(record.prefix)
        profile = profile_from_dict(record.machine, f"the record of {record.name}")
        framework = source.manifest.framework if source.manifest is not None else "auto"
        environ = activated_environ(prefix, record.kind, record.name, os.environ)
        [report] = check_against(python_of(prefix), ProbeOptions(framework=framework, timeout=timeout),
                                 [(profile, record.on_target)], environ, manifest_for=lambda _: source.manifest,
                                 tables=source.tables, expected=source.build,
                                 machine_args=[record.target_options()])
        return report

    return check


def refusal_hint(refused, record, source: MadeFrom, lines: Sequence[str], request) -> str:
    """The next step of `envkit add`'s refusal (:func:`next_step`), an older release of the package first."""
    import shlex

    older = _older_release(refused.clash, lines, request) if refused.clash is not None else None
    if older is not None:
        return f"The newest release that fits this build: `envkit add {shlex.quote(record.name)} {shlex.quote(older)}`."
    from envkit.machines.profile import profile_from_dict

    options = [*record.target_options(), *(["--manifests", record.manifests] if record.manifests else [])]
    return next_step(refused.clash, record.name, source, profile_from_dict(record.machine, record.name),
                     record.python, options, lines)


def next_step(clash, name: str, source: MadeFrom, profile, python: str, options: Sequence[str],
              lines: Sequence[str]) -> str:
    """The next step of a refusal, pasted as it is: the build that fits both (a new environment with the same
    packages, on the machines ``options`` name), or where to look when envkit knows of none."""
    import shlex

    manifest = source.manifest.name if source.manifest is not None else "MANIFEST"
    if clash is None:
        return (f"An older release of the package may fit; changing the build is a new environment (`envkit list "
                f"{manifest} --all` shows the builds).")
    build = _fitting_build(clash, source, profile, python)
    if build is not None:
        argv = ["envkit", "create", manifest, "--build", build, "--name", _new_name(name, clash.needed_by or
                                                                                   clash.project),
                *(["--python", python] if _publishes(source, build, python) else []), *options,
                "--with", ",".join(lines)]
        return f"A build that fits both, as a new environment: `{shlex.join(argv)}`."
    return (f"No build of {manifest} that envkit knows has {clash.requirement}: `envkit list {manifest} --all` shows "
            f"them; an older release of {clash.project} may need an older one.")


def _older_release(clash, lines: Sequence[str], request) -> Optional[str]:
    """``NAME==VERSION``: the newest release of the package the user pinned that the installer fits beside the
    build (a dry run with the pin left out), when it is one they asked for with a version."""
    import dataclasses
    import os

    from envkit.backends.held import normalized
    from envkit.backends.requested import project_of
    from envkit.backends.clash import Refused
    from envkit.create.add import dry_run
    from envkit.errors import EnvkitError

    asked = next((line for line in lines if normalized(project_of(line) or "") == normalized(clash.project)), None)
    if asked is None or normalized(asked) == normalized(clash.project):
        return None  # not asked for by the user, or asked for without a version: the installer tried every one
    try:
        would = dry_run(dataclasses.replace(request, lines=(clash.project,), names=(clash.project,)), os.environ)
    except (Refused, EnvkitError):
        return None
    for line in would.lines:
        found = [part for part in line.replace("+", " ").split() if "==" in part]
        for part in found:
            name, _, version = part.partition("==")
            if normalized(name) == normalized(clash.project):
                return f"{name}=={version}"
    return None


def _fitting_build(clash, source: MadeFrom, profile, python: str) -> Optional[str]:
    """The newest build of the manifest whose framework release meets the clashing requirement and that fits the
    machine (``profile``), with this Python when it publishes it."""
    if source.manifest is None:
        return None
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import Version

    from envkit.backends.held import normalized
    from envkit.pick.resolve import parse_python_request, resolve

    try:
        requirement = Requirement(clash.requirement)
    except InvalidRequirement:
        return None
    if normalized(requirement.name) != normalized(source.manifest.framework) or not str(requirement.specifier):
        return None
    asked = python if _is_xy(python) else None
    for request in (parse_python_request(asked, source.tables.python), parse_python_request(None,
                                                                                          source.tables.python)):
        resolution = resolve(source.manifest, profile, source.tables, request)
        for candidate in resolution.candidates:
            line = str(candidate.build.version)
            releases = [Version(line), *(Version(f"{line}.{patch}") for patch in range(0, 30))]
            if candidate.compatible and any(requirement.specifier.contains(v, prereleases=True) for v in releases):
                return candidate.build.id
    return None


def _publishes(source: MadeFrom, build_id: str, python: str) -> bool:
    from packaging.version import Version

    build = next((b for b in source.manifest.builds if b.id == build_id), None)
    return build is not None and _is_xy(python) and Version(python) in build.python


def _is_xy(text: str) -> bool:
    import re

    return bool(re.fullmatch(r"\d+\.\d+", text))


def _new_name(name: str, project: str) -> str:
    from envkit.state.records import name_for_machine

    return name_for_machine(name, project)
