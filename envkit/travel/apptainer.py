"""Apptainer, for sites that prefer it (envkit never installs it): a definition file that builds a SIF from an image
(the environment unpacked at its path on a base system, the fit as labels), and the `apptainer exec` line that runs
a command with the GPUs (--nv) and the image bound at its path. Pure."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Optional, Sequence

from envkit.travel.image import FIT_IN_IMAGE

# /etc/os-release's ID -> the Docker Hub image of that system, for the definition's base (the packing machine's
# system: a venv's Python is the system's, at the path pyvenv.cfg names)
_BASES = {"debian": "debian", "ubuntu": "ubuntu", "rocky": "rockylinux", "almalinux": "almalinux",
          "fedora": "fedora", "centos": "centos", "opensuse-leap": "opensuse/leap"}


def base_of(os_release: str) -> Optional[str]:
    """The docker:// base image of the system /etc/os-release describes (``debian:12``), None for one not known."""
    facts = {}
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        facts[key.strip()] = value.strip().strip('"')
    name, version = _BASES.get(facts.get("ID", "")), facts.get("VERSION_ID")
    return f"{name}:{version}" if name and version else None


def labels(fit: dict[str, Any]) -> list[tuple[str, str]]:
    """The fit as SIF labels: what `apptainer inspect` shows."""
    made_for = fit.get("made_for") or {}
    machines = made_for.get("machines") or [made_for.get("machine", {}).get("name") or "the machine it was made on"]
    checked = fit.get("checked") or {}
    return [("envkit.manifest", fit["manifest"]), ("envkit.build", fit["build"]), ("envkit.python", fit["python"]),
            ("envkit.prefix", fit["prefix"]), ("envkit.platform", fit["platform"]),
            ("envkit.made-for", ", ".join(str(m) for m in machines)),
            ("envkit.checked", "never" if not checked else f"{'PASS' if checked.get('ok') else 'FAIL'} "
                                                           f"{checked.get('time', '')}".strip()),
            ("envkit.fit-digest", fit["digest"]), ("envkit.packed", fit["packed"]), ("envkit.version", fit["envkit"])]


def definition(fit: dict[str, Any], image: Path, base: str, kind: str) -> str:
    """An Apptainer definition file that builds a SIF holding the environment of ``image`` (absolute) at its path,
    on ``base`` (a docker:// image), its fit as labels and inside it (PREFIX/.envkit/image.json)."""
    prefix = fit["prefix"]
    active = f"export VIRTUAL_ENV={shlex.quote(prefix)}" if kind == "venv" else \
        f"export CONDA_PREFIX={shlex.quote(prefix)}"
    rows = "\n".join(f"    {key} {json.dumps(value)}" for key, value in labels(fit))
    return f"""\
# Made by `envkit pack` for {image.name}: `apptainer build {shlex.quote(image.stem + '.sif')} THIS_FILE`, where
# squashfs-tools is installed (the image is unpacked on the build host). Then: apptainer exec --nv SIF python ...
# The fit envkit recorded is in the labels (apptainer inspect SIF) and at {prefix}/{FIT_IN_IMAGE}.
Bootstrap: docker
From: {base}

%setup
    mkdir -p "${{APPTAINER_ROOTFS}}"{shlex.quote(prefix)}
    unsquashfs -f -d "${{APPTAINER_ROOTFS}}"{shlex.quote(prefix)} {shlex.quote(str(image))}

%environment
    export PATH={shlex.quote(prefix)}/bin:"$PATH"
    {active}

%labels
{rows}

%runscript
    exec "$@"

%help
    The envkit environment {fit['manifest']} ({fit['build']}) at {prefix}. Run: apptainer exec --nv SIF python
"""


def sif_beside(image: Path) -> Path:
    return image.with_name(image.name.rsplit(".", 1)[0] + ".sif")


def exec_argv(apptainer: str, image: Path, prefix: str, container: Path, argv: Sequence[str]) -> list[str]:
    """``apptainer exec --nv`` of ``argv`` in ``container``, the image bound read-only at its path (paths absolute,
    so that none can be read as an option)."""
    bind = f"{image}:{prefix}:image-src=/,ro"
    return [apptainer, "exec", "--nv", "--bind", bind, str(container), *argv]
