"""SIGTERM and Ctrl-C to `envkit lock` while uv resolves (its index holds a wheel it must read): uv is stopped with
its whole process group, the lock's scratch directory is removed, no lock is written, and envkit exits 128 + N."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from conftest import CU126, Home
from support.pypi_index import IndexServer


def _uv_processes(marker: str) -> list[int]:
    """uv processes whose command line names ``marker`` (the lock's scratch directory is under the test's TMPDIR)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"uv") and any(marker.encode() in part for part in argv):
                out.append(int(entry.name))
    return out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_while_uv_resolves_stops_uv_and_leaves_nothing(home: Home, torch_wheels, signum):
    with IndexServer(core_metadata=False) as index:  # uv reads each wheel itself to resolve
        index.add_index("/whl/cu126", torch_wheels["cu126"])
        torch = next(w.name for w in torch_wheels["cu126"] if w.name.startswith("torch-"))
        index.delay_file(torch, 120)
        home.mirror_to(index)
        out = home.root / "t.lock.yml"
        process = home.popen("lock", *CU126, "-o", str(out))
        try:
            deadline = time.monotonic() + 60
            while not any(path.endswith(torch) for path in index.requests) and time.monotonic() < deadline:
                time.sleep(0.05)
            running = _uv_processes(str(home.root / "tmp"))
            assert running, index.requests  # uv, waiting for the wheel
            process.send_signal(signum)
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 128 + signum, err
    assert "envkit: interrupted" in err and "Traceback" not in err
    for pid in running:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not out.exists() and home.leftovers() == []
