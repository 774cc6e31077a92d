"""The platforms envkit makes environments for, named as conda names them (its subdirs): ``linux-64`` (x86_64)
and ``linux-aarch64`` (aarch64: Grace, DGX Spark, Jetson). Pure: the names, the CPU each means (``uname -m``, a
wheel tag's architecture, ``platform_machine`` in a marker) and the wheel tags a CPython accepts there.

A machine profile without ``platform`` is ``linux-64`` (every profile and site file written before envkit knew
platforms), and so is a build without ``platforms``. The list is code, not a table in envs/: each platform needs
envkit's installers, locks and checks to know it (uv's ``--python-platform``, conda-lock's platform, wheel tags).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

LINUX_64 = "linux-64"
LINUX_AARCH64 = "linux-aarch64"
DEFAULT_PLATFORM = LINUX_64


class Platform(NamedTuple):
    name: str  # conda's subdir: linux-64
    machine: str  # the CPU as uname -m, wheel tags and markers name it: x86_64

    @property
    def words(self) -> str:
        """For a sentence: "linux-aarch64 (aarch64)"."""
        return f"{self.name} ({self.machine})"


PLATFORMS = {LINUX_64: Platform(LINUX_64, "x86_64"), LINUX_AARCH64: Platform(LINUX_AARCH64, "aarch64")}
# What uname -m (os.uname().machine) says on each: Linux names arm64 aarch64, some tools arm64.
_MACHINES = {"x86_64": LINUX_64, "amd64": LINUX_64, "aarch64": LINUX_AARCH64, "arm64": LINUX_AARCH64}
# The manylinux glibc floor envkit resolves wheels for (RHEL 8, Ubuntu 20.04 and newer): the oldest current CUDA
# wheels (PyTorch, JAX, TensorFlow) are built for, on both platforms.
MANYLINUX = (2, 28)


def supported_text() -> str:
    return " and ".join(p.words for p in PLATFORMS.values())


def platform_problem(value: Any) -> Optional[str]:
    """Why ``value`` cannot be a profile's or a build's platform, or None: one of PLATFORMS."""
    if isinstance(value, str) and value in PLATFORMS:
        return None
    shown = repr(value) if not isinstance(value, str) else f"{value!r}"
    if isinstance(value, str) and not value.startswith("linux-"):
        return (f"{shown} is not a platform envkit makes environments for: envkit makes Linux environments, for "
                f"{supported_text()}")
    return f"{shown} is not a platform envkit makes environments for; it knows {supported_text()}"


def machine_of(platform: str) -> str:
    """The CPU of a platform (``x86_64``, ``aarch64``)."""
    return PLATFORMS[platform].machine


def platform_of_machine(machine: str) -> Optional[str]:
    """The platform of a CPU as uname -m names it, or None for one envkit makes no environments for."""
    return _MACHINES.get(machine.strip().lower())


def native_platform() -> Optional[str]:
    """This machine's platform, from its CPU (``uname -m``); None for a CPU envkit makes nothing for."""
    import os

    return platform_of_machine(os.uname().machine)


def uv_platform(platform: str) -> str:
    """uv's --python-platform for a platform: x86_64-manylinux_2_28, aarch64-manylinux_2_28."""
    return f"{machine_of(platform)}-manylinux_{MANYLINUX[0]}_{MANYLINUX[1]}"


def wheel_platform_tags(platform: str) -> list[str]:
    """The platform parts of the wheel tags a Linux CPython on ``platform`` with glibc MANYLINUX accepts, best
    first: manylinux_2_28_aarch64 down to manylinux_2_5, the legacy aliases, then linux_aarch64."""
    machine = machine_of(platform)
    tags = [f"manylinux_{MANYLINUX[0]}_{minor}_{machine}" for minor in range(MANYLINUX[1], 4, -1)]
    return tags + [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}",
                   f"linux_{machine}"]


def wheel_tag_platform(tag_platform: str) -> Optional[str]:
    """The platform a wheel tag's platform part installs on (``manylinux_2_17_aarch64`` -> linux-aarch64), None for
    ``any`` (every platform) or one of no Linux platform envkit knows (``macosx_12_0_arm64``)."""
    for platform in PLATFORMS.values():
        if tag_platform.startswith(("manylinux", "linux_")) and tag_platform.endswith(f"_{platform.machine}"):
            return platform.name
    return None
