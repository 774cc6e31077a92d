"""Running other programs (installers, conda, the environment's Python): argv lists, never a shell.

Every child runs in its own session, so a Ctrl-C at the terminal reaches envkit alone; envkit then stops the child's
whole process group (installers start workers) before it cleans up. Nothing a child started outlives envkit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

GRACE = 2.0  # seconds between SIGTERM and SIGKILL


@dataclass(frozen=True)
class Finished:
    returncode: int
    tail: tuple[str, ...]  # the last lines the program printed (stdout and stderr together)
    elapsed: float


def stop_group(process: subprocess.Popen) -> None:
    """Terminate a child's whole process group, then kill what is left of it after GRACE seconds."""
    for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # the leader is gone; stragglers of its group that ignored SIGTERM
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_streamed(
    argv: Sequence[str],
    env: Mapping[str, str],
    on_line: Optional[Callable[[str], None]] = None,
    cwd: Optional[Path] = None,
    tail_lines: int = 25,
) -> Finished:
    """Run ``argv`` to completion, handing each output line to ``on_line`` and keeping the last ``tail_lines``.

    A missing program is a Finished with returncode 127 and the reason as its tail. An exception while it runs
    (KeyboardInterrupt above all) stops the child's process group first, then propagates.
    """
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=tail_lines)
    try:
        process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    except OSError as error:
        return Finished(127, (f"{argv[0]}: {error.strerror or error}",), 0.0)
    try:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            tail.append(line)
            if on_line is not None:
                on_line(line)
        returncode = process.wait()
    except BaseException:
        stop_group(process)
        raise
    finally:
        if process.stdout is not None:
            process.stdout.close()
    return Finished(returncode, tuple(tail), time.monotonic() - started)


def run_captured(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Optional[str]:
    """The stdout of a short query (``conda info --json``, ``uv python find``), or None if it failed or timed out."""
    try:
        process = subprocess.Popen(
            list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError:
        return None
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(process)
        return None
    except BaseException:
        stop_group(process)
        raise
    return out.decode("utf-8", "replace") if process.returncode == 0 else None
