"""From what the user asked for to a Plan: the build, the name, the backend and where the environment goes.

Looks around the machine once (envkit.backends.tools); the decisions themselves are pure functions elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from envkit.backends.base import Backend, Context, install_limits
from envkit.backends.choose import backend_for, choose_backend
from envkit.backends.installers import installer_environ
from envkit.backends.plan import Plan, conda_part, cuda_for_solve, default_name, pip_parts
from envkit.backends.tools import Tools, find_conda, find_python, find_uv
from envkit.catalog.model import Manifest, Tables
from envkit.errors import BadInputError, EnvkitError, UnknownNameError
from envkit.machines.platforms import native_platform
from envkit.machines.profile import MachineProfile
from envkit.pick.cpu_fallback import gpu_unused
from envkit.pick.render import list_command
from envkit.pick.resolve import Candidate, Request, Resolution, resolve
from envkit.state.config import Config
from envkit.state.records import check_name
from envkit.state.userdirs import UserDirs

if TYPE_CHECKING:
    from packaging.version import Version

    from envkit.create.storage import StoragePlan


@dataclass(frozen=True)
class CreateRequest:
    build_id: Optional[str] = None
    name: Optional[str] = None
    backend: str = "auto"
    prefix: Optional[Path] = None
    jupyter: bool = False
    verify: bool = True
    target_args: str = ""  # the options that chose the machine, shell-quoted, for suggested commands
    # A venv's Python for the plan's version and platform: (the interpreter, None) or (None, why none will do);
    # None: the first one on this machine (a shared environment's must be one its users can run: envkit.shared.python)
    python_for: Optional[Callable[["Version", Optional[str]], tuple[Optional[Path], Optional[str]]]] = None
    additions: tuple[str, ...] = ()  # the user's own packages (--with, -r: envkit.backends.requested), held build


@dataclass(frozen=True)
class Prepared:
    plan: Plan
    backend: Backend
    context: Context
    storage: Optional["StoragePlan"] = None  # the cache, links, and room (envkit.create.storage)


class DoesNotFit(EnvkitError):
    """No build (or not the one asked for) runs on the machine."""


def pick_candidate(manifest: Manifest, profile: MachineProfile, tables: Tables, python: Request,
                   build_id: Optional[str], on_target: bool, target_args: str = "",
                   resolution: Optional[Resolution] = None) -> tuple[Candidate, Resolution]:
    """The build to install (asked for, or the pick) and the resolution it came from. ``target_args``: the options
    that chose the machine, for the commands the errors suggest; ``resolution``: ``profile``'s, when the caller
    has it already (a fleet's, envkit.commands.targets.build_for_target): it is not resolved again."""
    machine = "this machine" if on_target else f"the machine described ({profile.name or 'unnamed'})"
    if resolution is None:
        resolution = resolve(manifest, profile, tables, python)
    if build_id is None:
        if resolution.selected is None:
            raise DoesNotFit(f"no build of {manifest.name} fits {machine}",
                             hint=f"`{list_command(manifest.name, target_args)}` says why each one does not.")
        return resolution.selected, resolution
    for candidate in resolution.candidates:
        if candidate.build.id == build_id:
            if not candidate.compatible:
                raise DoesNotFit(f"{build_id} does not fit {machine}: {'; '.join(candidate.reasons)}",
                                 hint=f"`{list_command(manifest.name, target_args, show_all=False)}` shows the builds "
                                      "that do; to build for another machine, give its profile with --machine.")
            return candidate, resolution
    ids = ", ".join(c.build.id for c in resolution.candidates[:6])
    raise UnknownNameError(f"{manifest.name} has no build {build_id!r}",
                           hint=f"Builds look like {ids}, ...; `{list_command(manifest.name, target_args)}` lists "
                                "them all.")


def _no_secret_in_argv(requested: str, why: str, build, python, tables: Tables, config: Config) -> tuple[str, str]:
    """conda, mamba and micromamba take channels in their argv only, which every user's `ps` shows: where a mirror of
    the build's channels carries credentials, the embedded engine (no argv) makes it instead, or --backend conda is
    refused."""
    from envkit.text.redact import has_credentials, redact

    channels = conda_part(build, python, tables.python, config, (None, ""), with_pip=False).channels
    secret = next((channel for channel in channels if has_credentials(channel)), None)
    if secret is None:
        return "conda", why
    said = f"the conda channel mirror {redact(secret)} carries credentials, which conda's command line would show " \
           "to every user of the machine"
    if requested == "conda":
        raise BadInputError(f"--backend conda: {said}", hint="Use --backend rattler (or auto): envkit's embedded "
                            "conda engine keeps them out of any command line.")
    return "rattler", f"{why.split(':')[0]}, but {said}: envkit's embedded conda engine"


def prepare(request: CreateRequest, manifest: Manifest, tables: Tables, profile: MachineProfile, on_target: bool,
            python: Request, config: Config, dirs: UserDirs, environ: Mapping[str, str],
            resolution: Optional[Resolution] = None) -> Prepared:
    """The plan and what carries it out. ``resolution``: ``profile``'s, when the caller resolved it already."""
    candidate, resolution = pick_candidate(manifest, profile, tables, python, request.build_id, on_target,
                                           request.target_args, resolution)
    build = candidate.build
    assert candidate.python is not None  # a compatible candidate has its Python
    name = _name(request, default_name(manifest.name, build))
    uv = find_uv(environ)
    conda = find_conda(environ)
    wants_python = build.conda is None and request.backend in ("auto", "venv")
    system_python, refused = None, None
    if wants_python and request.python_for is not None:
        system_python, refused = request.python_for(candidate.python, profile.platform)
    elif wants_python:
        system_python = find_python(candidate.python, uv, environ, dirs, profile.platform)
    tools = Tools(conda=conda, uv=uv, python=system_python, python_refused=refused)
    backend_name, why = choose_backend(request.backend, build, candidate.python, tools)
    if backend_name == "conda":
        backend_name, why = _no_secret_in_argv(request.backend, why, build, candidate.python, tables, config)
    if backend_name == "conda" and request.prefix is None and name in ("base", "root"):
        raise BadInputError(f"{name!r} is the name of conda's own base environment", hint="Choose another --name.")
    prefix = usable_prefix(_location(request.prefix, backend_name, tools, config, dirs, name, environ), dirs, config)
    pips = pip_parts(build, tables.python, config, request.jupyter, request.additions, prefix)
    conda_install = None
    if backend_name != "venv":
        conda_install = conda_part(build, candidate.python, tables.python, config, cuda_for_solve(profile, environ),
                                   with_pip=bool(pips))
    # An environment for another platform made by a conda engine holds a Python that does not run here: it is checked
    # on its own machines, and no installer here can put pip packages into it. (A venv's Python was run here to be
    # chosen, under an emulator where it is foreign.)
    foreign = backend_name != "venv" and profile.platform != native_platform()
    if foreign and pips:
        _no_foreign_pip(build.id, profile.platform, candidate.python, request.target_args)
    plan = Plan(manifest=manifest.name, build=build, name=name, prefix=prefix, python=candidate.python,
                backend=backend_name, backend_reason=why, conda=conda_install, pip=pips, jupyter=request.jupyter,
                verify=request.verify and not foreign, profile=profile, on_target=on_target,
                in_conda_envs=backend_name == "conda" and request.prefix is None,
                gpu_unused=None if request.build_id else gpu_unused(resolution, profile),
                unchecked=f"it is for {profile.platform} machines and this one is not: check it on one of them "
                          f"(`envkit verify {name}` there)" if foreign and request.verify else "--no-verify",
                companions=manifest.companions, additions=request.additions)
    install_limits(environ)  # a bad ENVKIT_INSTALL_TIMEOUT is exit 2 here, before anything is made
    context, storage = storage_context(plan, tools, config, dirs, environ)
    return Prepared(plan=plan, backend=backend_for(backend_name, tools), context=context, storage=storage)


def _no_foreign_pip(build_id: str, platform: str, python, target_args: str) -> None:
    """BadInputError: an environment of pip packages for another platform needs a Python of that CPU here."""
    from envkit.machines.platforms import machine_of

    cpu = machine_of(platform)
    raise BadInputError(f"{build_id} is for {platform} machines and this one is not: its pip packages install only "
                        f"into a Python of that CPU that runs here, and no python{python} for {cpu} was found (on "
                        "PATH, or by uv)",
                        hint=f"Create it on one of those machines, or lock it for them here (`envkit lock ... "
                             f"{target_args or '--machine FILE'}`) and `envkit create --from-lock FILE` there.")


def storage_context(plan: Plan, tools: Tools, config: Config, dirs: UserDirs,
                    environ: Mapping[str, str]) -> tuple[Context, "StoragePlan"]:
    """The installers' context with the package cache where envkit.create.storage puts it (and copies only where a
    real hard link from it failed), and that storage plan."""
    from envkit.create.storage import plan_key, storage_plan

    storage = storage_plan(plan.prefix, plan_key(plan), config, dirs, environ)
    context = Context(tools=tools, environ=installer_environ(environ, dirs, storage.link_mode, storage.cache.root),
                      conda_cache=storage.cache.conda_packages, mirrors=tuple(m.target for m in config.mirrors))
    return context, storage


def _name(request: CreateRequest, default: str) -> str:
    return name_for(request.name, request.prefix, default)


def name_for(name: Optional[str], prefix: Optional[Path], default: str) -> str:
    """--name, else the last part of --prefix, else ``default``; said plainly when none of them can be used."""
    if name is not None:
        if not name.strip():
            raise BadInputError("--name is empty", hint=f"Give a name like {default}, or leave --name out for that one.")
        return check_name(name)
    if prefix is not None:
        where = Path(prefix).expanduser().absolute()
        if where.parent == where:
            raise BadInputError(f"--prefix {prefix}: the root directory cannot hold an environment",
                                hint=f"Give a new directory, e.g. --prefix ~/envs/{default}.")
        try:
            return check_name(where.name)
        except BadInputError:
            raise BadInputError(f"--prefix {prefix}: its last part {where.name!r} cannot name an environment",
                                hint="Add --name NAME (letters, digits, '.', '_', '-').") from None
    return default


def usable_prefix(prefix: Path, dirs: UserDirs, config: Config) -> Path:
    """``prefix``, unless an environment cannot go there (BadInputError, exit 2): see :func:`_outside_environments`
    and :func:`_not_envkits_own`. For `create` and `create --from-lock` alike."""
    _not_envkits_own(_outside_environments(prefix), dirs, config)
    _writable_parent(prefix, dirs, config)
    return prefix


def _writable_parent(prefix: Path, dirs: UserDirs, config: Config) -> None:
    """BadInputError (exit 2) when the directory the environment would go in cannot be written or made: which one,
    why (as the system says it) and where else the environment can go. Writes nothing (a dry run calls it too)."""
    import os

    parent = Path(os.path.normpath(prefix)).parent
    problem = unwritable(parent)
    if problem is None:
        return
    if parent == Path(os.path.normpath(config.envs_dir or dirs.envs)):
        config_file = config.path or dirs.config / "config.yaml"
        source = f"envs_dir in {config_file}" if config.envs_dir is not None else "the default"
        raise BadInputError(f"cannot create {prefix}: envkit's environments directory {parent} ({source}) {problem}",
                            hint=elsewhere_hint(config_file))
    raise BadInputError(f"cannot create {prefix}: the directory {parent} {problem}", hint=elsewhere_hint())


def elsewhere_hint(config_file: Optional[Path] = None) -> str:
    """Where else an environment can go: another --prefix, and (``config_file``: when envkit's environments directory
    was the one refused) another `envs_dir` in that config file."""
    said = "Give --prefix PATH (a new directory inside one you can write)"
    if config_file is None:
        return f"{said}."
    return f"{said}, or set `envs_dir: DIR` (a directory you can write) in envkit's config file {config_file}."


def unwritable(directory: Path) -> Optional[str]:
    """Why ``directory`` cannot be written, or made (with the missing directories above it), in the system's words;
    None when it can. Writes nothing: the nearest directory that exists is judged (a file in the way, permissions
    (which do not stop root), a read-only filesystem (which does))."""
    import errno
    import os
    import stat

    existing = directory
    while True:
        try:
            status = os.stat(existing)
            break
        except (FileNotFoundError, NotADirectoryError):
            if existing.parent == existing:
                return None
            existing = existing.parent
        except OSError as error:
            return f"cannot be reached: {existing}: {error.strerror or error}"
    verb = "cannot be written" if existing == directory else "cannot be made"
    if not stat.S_ISDIR(status.st_mode):
        kind = "a file" if stat.S_ISREG(status.st_mode) else "something else"
        return f"{verb}: {existing} is {kind}, not a directory ({os.strerror(errno.ENOTDIR)})"
    if os.access(existing, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{verb}: {existing}: {os.strerror(errno.EROFS if read_only else errno.EACCES)}"


def _outside_environments(prefix: Path) -> Path:
    """``prefix``, unless it lies inside an environment envkit made: `envkit remove` of that one would delete this
    one with it, or is a path the system refuses (a name too long): BadInputError, exit 2."""
    import errno
    import os

    from envkit.state.ownership import owner

    try:
        os.lstat(prefix)
    except OSError as error:
        if error.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise BadInputError(f"--prefix {prefix}: {error.strerror or error}",
                                hint="Give a shorter path (each part up to 255 bytes)."
                                if error.errno == errno.ENAMETOOLONG else "Give a directory you can use.") from None
    for parent in Path(os.path.normpath(prefix)).parents:  # (outer/../new is not inside outer)
        holder = owner(parent)
        if holder is not None:
            raise BadInputError(f"{prefix} is inside the environment {holder} ({parent}): removing that one would "
                                "delete this one too", hint="Give a directory outside it.")
    return prefix


def _not_envkits_own(prefix: Path, dirs: UserDirs, config: Config) -> None:
    """BadInputError (exit 2) for a prefix that is envkit's own data directory, its environments directory or a
    directory above them (an environment there would hold envkit's records: removing it deletes them all), or that
    lies inside the data directory other than in an environments directory."""
    import os

    where = Path(os.path.normpath(prefix))
    data = Path(os.path.normpath(dirs.data))
    envs = [Path(os.path.normpath(d)) for d in (dirs.envs, config.envs_dir) if d is not None]
    inside_envs = any(where.is_relative_to(root) and where != root for root in envs)
    clash = next((root for root in (data, *envs) if root == where or root.is_relative_to(where)), None)
    if clash is None and where.is_relative_to(data) and not inside_envs:
        clash = data
    if clash is not None:
        what = "envkit's data directory" if clash == data else "envkit's environments directory"
        relation = "is" if clash == where else "is above" if clash.is_relative_to(where) else "is inside"
        raise BadInputError(f"--prefix {prefix} {relation} {what} ({clash}): an environment there would hold "
                            "envkit's records, or sit among them",
                            hint="Give a directory of its own, e.g. --prefix "
                                 f"{(config.envs_dir or dirs.envs) / 'NAME'}.")


def _location(prefix: Optional[Path], backend: str, tools: Tools, config: Config, dirs: UserDirs, name: str,
              environ: Mapping[str, str]) -> Path:
    if prefix is not None:
        return Path(prefix).expanduser().absolute()
    if backend == "conda" and tools.conda is not None:
        from envkit.backends.conda import envs_dir

        return envs_dir(tools.conda, environ) / name
    return (config.envs_dir or dirs.envs) / name
