"""Real filesystems for the storage tests: tmpfs mounts (small, few inodes), bind mounts and read-only ones.

Mounting needs root. Elsewhere the tests skip, saying so; under CI (CI=true, or ENVKIT_TEST_REQUIRE_SLURM=1 as
.ci/run sets it) they fail instead, so that a CI run never passes without them. Every mount is undone at teardown,
the innermost first, lazily if something still holds it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from support.slurm_cluster import slurm_required


class Mounts:
    def __init__(self) -> None:
        self.made: list[Path] = []

    def tmpfs(self, where: Path, size: str = "64m", inodes: int | None = None) -> Path:
        options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
        return self._mount(where, ["-t", "tmpfs", "-o", options, "tmpfs"])

    def bind(self, source: Path, where: Path, read_only: bool = False) -> Path:
        self._mount(where, ["--bind", str(source)])
        if read_only:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True, capture_output=True)
        return where

    def _mount(self, where: Path, args: list[str]) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", *args, str(where)], check=True, capture_output=True, text=True)
        self.made.append(where)
        return where

    def undo(self) -> None:
        for where in reversed(self.made):
            if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(where)], capture_output=True)
        self.made.clear()


def can_mount() -> str | None:
    """None when this process can mount, else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    reason = can_mount()
    if reason is not None:
        if slurm_required(os.environ):
            pytest.fail(f"{reason}; under CI the storage tests must run (run them as root)")
        pytest.skip(reason)
    made = Mounts()
    try:
        yield made
    finally:
        made.undo()
