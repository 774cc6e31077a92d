"""Debian's squashfs-tools, squashfuse and fuse3 (its setuid fusermount3), for the tests of images (envkit pack,
envkit run FILE): installed with apt-get when missing, as root, as the Slurm tests install Slurm; as another user
the tests skip, and under CI (CI=true, ENVKIT_TEST_REQUIRE_SLURM=1) a skip is a failure. And what is mounted with
squashfuse now, to prove that nothing is left."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.slurm_cluster import install_debian_packages, missing_programs, slurm_required

DEBIAN_PACKAGES = ("squashfs-tools", "squashfuse", "fuse3")
PROGRAMS = ("mksquashfs", "unsquashfs", "squashfuse_ll", "fusermount3")


def ensure_installed() -> None:
    """Install the packages where a program is missing; skip (fail under CI) where they cannot be."""
    if not missing_programs(PROGRAMS):
        return
    why = install_debian_packages(DEBIAN_PACKAGES, PROGRAMS, "squashfs-tools, squashfuse or fuse3")
    if why is not None:
        if slurm_required(os.environ):
            pytest.fail(f"the image tests must run here (CI): {why}", pytrace=False)
        pytest.skip(why)
    if not Path("/dev/fuse").exists():
        pytest.skip("no /dev/fuse on this machine: FUSE is not in its kernel")


def squashfuse_mounts() -> list[str]:
    """The mount points of every squashfuse (or squashfuse_ll) mount on this machine (whoever made it)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
        return [line.split(" ")[4] for line in info if " - fuse.squashfuse" in line]
