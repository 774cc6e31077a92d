"""The pip steps of every backend: uv (envkit's dependency) or pip, isolated from the user's installer config.

Isolated means: the user's pip.conf, uv.toml and PIP_*/UV_* variables never reach the installer, so a package comes
from the plan's index and nowhere else (a find-links directory or an extra index in pip.conf would otherwise win
silently). Each step names exactly one index: a build's packages come from its own index (the PyTorch CUDA index),
so a same-named package with a higher version elsewhere can never be picked.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, NamedTuple, Optional
from urllib.parse import urlsplit

from packaging.version import Version

from envkit.backends.plan import PipPart
from envkit.state.userdirs import UserDirs
from envkit.system.launch import python_module
from envkit.text.redact import has_credentials, host_of

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet

UV_MIN_PYTHON = Version("3.8")  # uv cannot install into older environments: pip does it there
_DROPPED_PREFIXES = ("PIP_", "UV_")
# How the installers reach the network (certificates, timeouts, retries): kept, or a campus proxy that intercepts
# TLS breaks every install. None of them chooses where packages come from. PIP_PROXY is not among them: pip sends
# every request through it and then ignores HTTP_PROXY and NO_PROXY (its session stops trusting the environment),
# so a mirror's plain http would go through the user's proxy and past envkit's guard (envkit.system.egress). It becomes
# the https proxy instead (``_https_proxy``), where the user has none.
_TRANSPORT = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_RETRIES",
              "UV_NATIVE_TLS", "UV_HTTP_TIMEOUT", "UV_HTTP_RETRIES", "UV_CONCURRENT_DOWNLOADS")
_HTTPS_PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_DROPPED = ("VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE",
            "PYTHONSTARTUP")


def installer_environ(environ: Mapping[str, str], dirs: Optional[UserDirs],
                      link_mode: Optional[str] = None, packages: Optional[Path] = None) -> dict[str, str]:
    """``environ`` without anything that tells pip or uv where packages come from or points at another
    environment, plus envkit's own settings: no config files, no user site, no Python downloads, and everything
    they write (caches, uv's credentials store) under envkit's directories (``dirs``), never ~/.cache/uv or
    ~/.local/share/uv. ``packages``: where the package caches go (envkit.storage.cache; default: ``dirs.cache``);
    ``link_mode``: UV_LINK_MODE, "copy" where a real link from that cache into the environment failed."""
    out = {k: v for k, v in environ.items()
           if (k in _TRANSPORT or not k.startswith(_DROPPED_PREFIXES)) and k not in _DROPPED}
    out.update(_https_proxy(environ))
    out.update({
        "PYTHONNOUSERSITE": "1",  # pip in a conda prefix would take packages in ~/.local as installed
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "PIP_CONFIG_FILE": os.devnull,  # pip reads no config file at all
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    })
    if dirs is not None:
        cache = dirs.cache if packages is None else packages
        out.update({
            "UV_CACHE_DIR": str(cache / "uv"),
            "UV_PYTHON_CACHE_DIR": str(cache / "uv-python"),
            "UV_CREDENTIALS_DIR": str(dirs.data / "uv-credentials"),  # else $XDG_DATA_HOME/uv/credentials
            "PIP_CACHE_DIR": str(cache / "pip"),
        })
    if link_mode is not None:
        out["UV_LINK_MODE"] = link_mode
    return out


def _https_proxy(environ: Mapping[str, str]) -> dict[str, str]:
    """The user's PIP_PROXY as the installers' https proxy (``HTTPS_PROXY``), where they have no https proxy of
    their own: https keeps going through it, for uv and pip alike, while plain http goes by envkit's guard and to
    loopback and the mirrors direct (docs/security.md)."""
    proxy = environ.get("PIP_PROXY", "").strip()
    if not proxy or any(environ.get(name) for name in _HTTPS_PROXIES):
        return {}
    return {"HTTPS_PROXY": proxy, "https_proxy": proxy}


def uses_uv(uv: Optional[Path], python: Version) -> bool:
    return uv is not None and python >= UV_MIN_PYTHON


def pip_command(step: PipPart, python: Path, uv: Optional[Path], version: Version, dry_run: bool = False) -> list[str]:
    """The install command of one pip step into the environment whose interpreter is ``python`` (``dry_run``: what
    it would install, installing nothing). An index or find-links URL with credentials in it (a mirror's
    ``http://user:password@...``) is left out: everyone's ``ps`` shows an argv; ``pip_environ`` gives it to the
    installer instead."""
    links = ["--find-links", step.find_links] if step.find_links and not has_credentials(step.find_links) else []
    if has_credentials(step.index_url):
        index: list[str] = []
    else:
        index = ["--index-url", step.index_url]
    if step.requirements is not None:  # exactly these files, each checked against its hash; nothing resolved
        # From the step's index when it has one, else only from the local directory of the files (a lock's, which
        # envkit fetched and hash-checked itself: envkit.lockfile.fetch.LockedFiles).
        source = [*index, *links] if "://" in step.index_url else ["--no-index", *links]
        pinned = ["--require-hashes", "--no-deps", *source, "-r", str(step.requirements)]
        if uses_uv(uv, version):
            return [str(uv), "pip", "install", "--python", str(python), *pinned]
        return python_module(python, "pip", "install", *pinned, *_trusted(step.index_url, step.find_links),
                             "--progress-bar", "off")
    held = [arg for path in step.constraints for arg in ("-c", str(path))]
    wanted = ["-r", str(step.wanted)] if step.wanted is not None else list(step.packages)
    dry = ["--dry-run"] if dry_run else []
    if uses_uv(uv, version):
        return [str(uv), "pip", "install", "--python", str(python), *index, *links, *held, *dry, *wanted]
    return python_module(python, "pip", "install", *index, *links, *_trusted(step.index_url, step.find_links),
                         "--progress-bar", "off", *held, *dry, *wanted)


def pip_environ(step: PipPart, uv: Optional[Path], version: Version) -> dict[str, str]:
    """What ``pip_command`` left out of the argv, for the installer's environment (readable by this user only):
    the index and find-links URLs that carry credentials, as uv (``UV_INDEX_URL``, ``UV_FIND_LINKS``) or pip
    (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``) reads them."""
    prefix = "UV_" if uses_uv(uv, version) else "PIP_"
    out = {}
    if "://" in step.index_url and has_credentials(step.index_url):
        out[f"{prefix}INDEX_URL"] = step.index_url
    if step.find_links and has_credentials(step.find_links):
        out[f"{prefix}FIND_LINKS"] = step.find_links
    return out


def _trusted(*urls: Optional[str]) -> list[str]:
    """pip ignores a plain-http index or find-links page unless told to trust its host; envkit only gets here with
    an http URL the user configured as a mirror (or loopback), so it tells pip (each host once, never with the
    URL's credentials)."""
    hosts = [host_of(url) for url in urls if url and urlsplit(url).scheme == "http" and host_of(url)]
    return [arg for host in dict.fromkeys(hosts) for arg in ("--trusted-host", host)]


def wrong_builds(prefix: Path, step: PipPart) -> list[str]:
    """The step's packages installed in ``prefix`` without the local version its build asks for ("torch 2.13.1,
    not +cu126"), read from their .dist-info; empty when the step names no local version. A package pinned to one
    version (``torch==1.8.1+cu111``, ``torchaudio==0.8.1``) is what its pin says: the installer took nothing else."""
    if step.local is None:
        return []
    installed = _installed(prefix)
    python = _python_of(prefix)
    out = []
    for text in step.packages:
        requirement = requirement_parts(text)
        if any(spec.operator in ("==", "===") and "*" not in spec.version for spec in requirement.specifier):
            continue
        if requirement.marker is not None and (python is None or not requirement.marker.evaluate(
                {"python_version": python, "python_full_version": f"{python}.0"})):
            continue  # left out for this Python by its marker (torchaudio on 3.15), or the Python is not known
        name = normalized_name(requirement.name)
        version = installed.get(name)
        local = "" if name in step.plain else step.local  # (torchvision's aarch64 wheels on a CUDA index: plain)
        wanted = f"+{local}" if local else "a plain version"
        if version is None:
            out.append(f"{name} is not installed")
        elif (version.local or "") != local:
            out.append(f"{name} {version}, not {wanted}")
    return out


class RequirementParts(NamedTuple):
    name: str
    specifier: "SpecifierSet"
    marker: Optional["Marker"]


# A name and version specifiers, nothing else: how the manifests write most packages ("torch==2.13.*").
_PLAIN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*((?:===|[=!<>~]=|[<>])[^;@\[\]()]*)?")


def requirement_parts(text: str) -> RequirementParts:
    """A PEP 508 requirement's name, specifiers and marker, as packaging's Requirement reads them. A plain one (a
    name and version specifiers) is read by packaging.specifiers alone: packaging.requirements compiles its marker
    grammar when imported, ~10 ms of every create; anything else (a marker, extras, a URL), and anything the plain
    reading refuses, goes through Requirement, which says what is wrong with it."""
    plain = _PLAIN.fullmatch(text.strip())
    if plain is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            return RequirementParts(plain[1], SpecifierSet(plain[2] or ""), None)
        except InvalidSpecifier:
            pass
    from packaging.requirements import Requirement

    requirement = Requirement(text)
    return RequirementParts(requirement.name, requirement.specifier, requirement.marker)


def normalized_name(name: str) -> str:
    """A project name as PEP 503 normalizes it (packaging.utils.canonicalize_name, whose module imports
    packaging.tags and logging: 4 ms of every create)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _python_of(prefix: Path) -> Optional[str]:
    """The X.Y of the environment's Python, from its lib/pythonX.Y/site-packages, or None."""
    import re

    found = [m[1] for p in prefix.glob("lib/python*/site-packages") if (m := re.fullmatch(r"python(3\.[0-9]+)",
                                                                                          p.parent.name))]
    return found[0] if len(found) == 1 else None


def _installed(prefix: Path) -> dict[str, Version]:
    from packaging.version import InvalidVersion

    out = {}
    for metadata in prefix.glob("lib/python*/site-packages/*.dist-info/METADATA"):
        fields = {}
        for line in metadata.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line:
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip().lower(), value.strip())
        try:
            out[normalized_name(fields["name"])] = Version(fields["version"])
        except (KeyError, InvalidVersion):
            continue
    return out
