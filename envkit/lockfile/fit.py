"""Whether a lock's target fits the machine it is installed for: the platform, the virtual packages its conda
packages need (``__cuda`` from the driver, ``__cuda_arch``, ``__glibc``, ...), and, when the lock names an envkit
build that the manifests still have, that build's own rules (driver, every GPU's architecture, Python)."""

from __future__ import annotations

from typing import Mapping, Optional

from envkit.errors import EnvkitError
from envkit.lockfile.format import LockFileError, lock_file_name
from envkit.lockfile.model import PLATFORM, LockFile


class LockDoesNotFit(EnvkitError):
    """The lock was made for a machine unlike this one (exit 1, with the reasons)."""


def check_platform(lock: LockFile, origin: str, platform: str = PLATFORM) -> None:
    """LockFileError (exit 2) unless ``lock`` has packages for ``platform``, the target's: a lock installs where it
    was made for (an aarch64 lock on an x86_64 machine, or the reverse, is refused with the platforms it names)."""
    if platform in lock.platforms and lock.for_platform(platform):
        return
    from envkit.machines.platforms import PLATFORMS, supported_text

    hint = (f"Lock for {platform} (`envkit lock` for these machines, or `conda-lock -p {platform}`), or install this "
            "lock on a machine of its own platform.")
    if platform not in lock.platforms:
        said = ", ".join(lock.platforms) or "no platform"
        known = any(name in PLATFORMS for name in lock.platforms)
        why = (f"a lock installs on the platform it was made for, and the machines judged are {platform}" if known
               else f"envkit makes environments for {supported_text()}")
        raise LockFileError(f"{origin} locks {said}, not {platform}: {why}", hint=hint)
    found = sorted({package.platform for package in lock.packages if not package.optional})
    if not found:  # every package in conda-lock's optional categories, which are not installed
        raise LockFileError(f"{origin} locks only optional packages (conda-lock's optional categories): nothing to "
                            "install", hint=hint)
    raise LockFileError(f"{origin} names {platform} in its platforms, but its packages are for {', '.join(found)}: "
                        f"nothing to install on {platform}", hint=hint)


THEY = "they"  # several identical machines of a fleet, named before their reasons


def virtual_reasons(lock: LockFile, virtual: Mapping[str, tuple[str, str]], judged: str = "the target",
                    platform: str = PLATFORM) -> list[str]:
    """Why the target's virtual packages (name -> (version, build)) do not satisfy the locked conda packages;
    ``judged``: the machine(s) they are of, for the reasons."""
    has = "have" if judged == THEY else "has"
    from rattler import BuildString, MatchSpec, PackageRecord
    from rattler.exceptions import InvalidMatchSpecError

    reasons = []
    for package in lock.conda(platform):
        for name, spec in package.dependencies:
            if not name.startswith("__"):
                continue
            have = virtual.get(name)
            if have is None:
                reasons.append(f"{package.name} {package.version} needs {name} {spec}".rstrip()
                               + f", but {judged} {has} no {name}"
                               + (" (no NVIDIA driver)" if name == "__cuda" else ""))
                continue
            if not spec:
                continue
            try:
                match = MatchSpec(f"{name} {spec}")
            except InvalidMatchSpecError:
                reasons.append(f"{package.name} needs {name} {spec!r}, which is not a valid conda spec")
                continue
            record = PackageRecord(name=name, version=have[0], build=BuildString(have[1]), build_number=0,
                                   subdir=package.platform)
            if not match.matches(record):
                reasons.append(f"{package.name} {package.version} needs {name} {spec}, but {judged} {has} "
                               f"{name}={have[0]}")
    return reasons


def remake_command(manifest: str, machine: str, target_args: str) -> str:
    """The `envkit lock` command that makes a lock of ``manifest`` for the machines ``target_args`` name (this one
    without them), into a file of its own named after ``machine`` (the first of them), as a fleet's group locks are:
    never over the lock that did not fit."""
    import shlex

    from envkit.state.records import name_for_machine

    output = shlex.quote(lock_file_name(name_for_machine(manifest, machine)))
    return f"envkit lock {shlex.quote(manifest)} -o {output}" + (f" {target_args}" if target_args else "")


def raise_unless_fits(reasons: list[str], machine: str, build: Optional[str], remake: str = "",
                      made_for: str = "") -> None:
    """``remake``: the `envkit lock` command that makes a lock for ``machine`` (empty when the lock names no
    manifest); ``made_for``: what the lock was made for, in words (its envkit.target: "profile NAME", "partition P",
    "exported from ENV", "this machine": the one it was locked on)."""
    if reasons:
        what = f"the lock of {build}" if build else "the lock"
        make = f"`{remake}`" if remake else "`envkit lock MANIFEST`, or conda-lock"
        # The lock's target in the words it keeps: "this machine" is the one it was made on, not this one
        here = "this machine"
        where = f"the machine it was locked on{made_for[len(here):]}" if made_for.startswith(here) else made_for
        raise LockDoesNotFit(f"{what} does not fit {machine}: {'; '.join(reasons)}",
                             hint=f"Make a lock for it ({make}), or install this one where it fits"
                                  + (f" ({where})" if where else "") + ": there, or from here with its --machine or "
                                  "--partition.")
