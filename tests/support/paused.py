"""Waiting for an envkit run held by the test-only hook ENVKIT_TEST_PAUSE_AT (envkit/state/testpause.py): the run writes
the marker file when it reaches the point, and goes on when the test deletes it (or is killed there)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def wait_until_paused(process: subprocess.Popen, marker: Path, point: str, timeout: float = 180) -> None:
    """Return once ``process`` is held at ``point`` (``marker`` exists); fail the test if it ended before, or never
    got there within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert process.poll() is None, f"envkit ended before {point}: {process.communicate()}"
        assert time.monotonic() < deadline, f"envkit never reached {point}"
        time.sleep(0.02)
