"""A real tmpfs for the tests of filesystem faults (root only): a size or an inode count to run out of, and a
remount read-only. Where the tests do not run as root they are skipped with the reason; under CI (CI=true or
ENVKIT_TEST_REQUIRE_ROOT=1) a skip is a failure instead. Every mount is undone when the block ends."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator, Mapping, Optional


def root_required(environ: Mapping[str, str]) -> bool:
    return environ.get("CI", "").lower() == "true" or environ.get("ENVKIT_TEST_REQUIRE_ROOT") == "1"


def unavailable() -> Optional[str]:
    """Why no tmpfs can be mounted here; None when one can."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "64m", inodes: Optional[int] = None) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0755" + (f",nr_inodes={inodes}" if inodes else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "envkit-test", str(path)], check=True, timeout=30,
                   capture_output=True)
    try:
        yield path
    finally:
        done = subprocess.run(["umount", str(path)], timeout=30, capture_output=True)
        if done.returncode != 0:  # something still open there: detach it now, freed when closed
            subprocess.run(["umount", "-l", str(path)], timeout=30, capture_output=True)


def read_only(path: Path, on: bool = True) -> None:
    subprocess.run(["mount", "-o", f"remount,{'ro' if on else 'rw'}", str(path)], check=True, timeout=30,
                   capture_output=True)


def fill_inodes(directory: Path, leave: int = 0) -> int:
    """Make empty files in ``directory`` until only ``leave`` inodes are free; how many it made."""
    made = 0
    while os.statvfs(directory).f_ffree > leave:
        (directory / f".filler-{made}").touch()
        made += 1
    return made
