"""SIGTERM and Ctrl-C to `envkit lock` while uv resolves (its index holds a wheel it must read): uv is stopped with
its whole process group, the lock's scratch directory is removed, no lock is written, and envkit exits 128 + N."""

from __future__ import annotations

import os
import signal
import time

import pytest

from conftest import CU126, Home
from support.processes import naming, reaped
from support.pypi_index import IndexServer


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_while_uv_resolves_stops_uv_and_leaves_nothing(home: Home, torch_wheels, signum):
    with IndexServer(core_metadata=False) as index:  # uv reads each wheel itself to resolve
        index.add_index("/whl/cu126", torch_wheels["cu126"])
        torch = next(w.name for w in torch_wheels["cu126"] if w.name.startswith("torch-"))
        index.delay_file(torch, 120)
        home.mirror_to(index)
        out = home.root / "t.lock.yml"
        with reaped(home.popen("lock", *CU126, "-o", str(out))) as process:
            deadline = time.monotonic() + 60
            while not any(path.endswith(torch) for path in index.requests) and time.monotonic() < deadline:
                time.sleep(0.05)
            running = naming(str(home.root / "tmp"), program="uv")  # its requirements are in envkit's scratch
            assert running, index.requests  # uv, waiting for the wheel
            process.send_signal(signum)
            _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, err
    assert "envkit: interrupted" in err and "Traceback" not in err
    for pid in running:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not out.exists() and home.leftovers() == []
