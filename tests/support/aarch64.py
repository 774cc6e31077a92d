"""A real aarch64 Python on this x86_64 machine, for the tests of environments made for aarch64 (issue 43): Debian's
arm64 python3.11 and the libraries it links, unpacked into a directory of the test session, run by qemu-user-static.

- qemu-user-static is a Debian package: installed with apt-get when missing (as root, like Slurm's packages:
  tests/support/slurm_cluster.py).
- The arm64 packages come with `apt-get download` through a package state of their own in the session's directory
  (the machine's apt sources, asked for arm64): the machine's dpkg and apt lists are never changed, and nothing
  arm64 is installed beside the amd64 python3. Each .deb is unpacked there with `dpkg-deb -x`.
- The kernel runs an aarch64 program through binfmt_misc: binfmt_misc is mounted when it is not, and a handler of
  this session is registered (qemu's own magic and mask for aarch64 ELF files) whose interpreter is a small script
  running qemu-aarch64-static with the unpacked root as its prefix (-L). So a venv's bin/python, a link to the
  unpacked interpreter, runs as any Python does, from uv, from envkit's check, from anything. The handler is removed
  (and binfmt_misc unmounted, when this mounted it) when the session ends.

Run these tests under the machine-wide lock (they mount and may apt-get install): docs/development.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from support.module_systems import _apt

PYTHON = "3.11"  # Debian 12's; its python3.11 is what the tests create with
# python3.11-minimal and the libraries it and its standard library load (apt-cache depends, bookworm)
PACKAGES = ("python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "libc6", "libgcc-s1", "zlib1g",
            "libexpat1", "libffi8", "libssl3", "libbz2-1.0", "liblzma5", "libsqlite3-0", "libuuid1", "libcrypt1",
            "libncursesw6", "libtinfo6", "libreadline8", "libnsl2", "libtirpc3", "libdb5.3")
QEMU = Path("/usr/bin/qemu-aarch64-static")
BINFMT = Path("/proc/sys/fs/binfmt_misc")
# qemu's binfmt entry for aarch64 (its scripts/qemu-binfmt-conf.sh): a 64-bit little-endian ELF of machine 183.
# Written as the kernel reads it, escapes and all: raw bytes would end the line at the first NUL.
_MAGIC = r"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
_MASK = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"


def required(environ) -> bool:
    """Whether a missing aarch64 Python fails the tests instead of skipping them (CI, as for Slurm)."""
    return environ.get("CI", "").lower() == "true" or environ.get("ENVKIT_TEST_REQUIRE_SLURM") == "1"


def _run(argv: list[str]) -> Optional[str]:
    """A program other than apt-get (support.module_systems._apt runs that): None when it worked, else why not."""
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return None if done.returncode == 0 else f"{' '.join(argv[:2])} failed: {done.stderr.strip()[-400:]}"


def install_qemu() -> Optional[str]:
    """apt-get install qemu-user-static (root only) when it is missing; None when it is there, else why not."""
    if QEMU.exists():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "qemu-user-static is not installed, and installing it needs root and apt-get"
    install = ("install", "-y", "-q", "--no-install-recommends", "qemu-user-static")
    problem = _apt(*install)
    if problem is not None:  # stale package lists: once more after an update
        problem = _apt("update", "-q") or _apt(*install)
    return problem or (None if QEMU.exists() else f"qemu-user-static installed no {QEMU}")


def unpack_python(directory: Path) -> tuple[Optional[Path], Optional[str]]:
    """Debian's arm64 python3.11 unpacked under ``directory``/root: (its interpreter, None), or (None, why not)."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return None, "no apt-get or dpkg-deb to fetch Debian's arm64 Python with"
    state = directory / "apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "status").touch()
    apt = ["-q", "-o", f"Dir::State::Lists={state / 'lists'}",
           "-o", f"Dir::State::status={state / 'status'}", "-o", f"Dir::Cache={state / 'cache'}",
           "-o", "APT::Architecture=arm64", "-o", "APT::Architectures::=arm64", "-o", "APT::Sandbox::User=root"]
    debs = directory / "debs"
    debs.mkdir(exist_ok=True)
    problem = _apt(*apt, "update") or _apt(*apt, "download", *PACKAGES, cwd=debs)
    if problem is not None:
        return None, problem
    root = directory / "root"
    for deb in sorted(debs.glob("*.deb")):
        problem = _run(["dpkg-deb", "-x", str(deb), str(root)])
        if problem is not None:
            return None, problem
    python = root / "usr" / "bin" / f"python{PYTHON}"
    return (python, None) if python.exists() else (None, f"the arm64 packages brought no {python}")


class Binfmt:
    """An aarch64 handler of binfmt_misc for this session: registered on entry, removed on exit."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name = root, name
        self.wrapper = root.parent / "qemu-aarch64"
        self.mounted = False

    def __enter__(self) -> Binfmt:
        if not (BINFMT / "register").exists():
            problem = _run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)])
            if problem is not None:
                raise OSError(problem)
            self.mounted = True
        self.wrapper.write_text(f'#!/bin/sh\nexec {QEMU} -L {self.root} "$@"\n')
        self.wrapper.chmod(0o755)
        try:
            (BINFMT / "register").write_text(f":{self.name}:M::{_MAGIC}:{_MASK}:{self.wrapper}:")
        except OSError:
            self._unmount()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            entry = BINFMT / self.name
            if entry.exists():
                entry.write_text("-1")
        finally:
            self._unmount()

    def _unmount(self) -> None:
        if self.mounted:
            _run(["umount", str(BINFMT)])
            self.mounted = False
