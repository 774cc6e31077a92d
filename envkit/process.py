"""Running other programs (installers, conda, the environment's Python): argv lists, never a shell.

Every child runs in its own session, so a Ctrl-C at the terminal reaches envkit alone; envkit then stops the child's
whole process group (installers start workers) before it cleans up. A SIGKILL gives envkit no such chance: whoever
watches (``watching``, create's journal) learns each child's process group as it starts, so that the next run can
stop what is left of it (``stop_leftovers``) before it touches what the children were writing to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Sequence

GRACE = 2.0  # seconds between SIGTERM and SIGKILL
_AFTER_KILL = 5.0  # seconds to wait for the pipes to close after SIGKILL


@dataclass(frozen=True)
class Finished:
    returncode: int
    tail: tuple[str, ...]  # the last lines the program printed (stdout and stderr together)
    elapsed: float


@dataclass(frozen=True)
class Captured:
    returncode: Optional[int]  # None: cut off at its time limit (its whole process group was stopped)
    stdout: str
    stderr: str
    elapsed: float


_watchers: list[Callable[[int], None]] = []  # told the process group of each child as it starts


@contextlib.contextmanager
def watching(callback: Callable[[int], None]) -> Iterator[None]:
    """Call ``callback(pgid)`` for every child started (by this module) inside the block."""
    _watchers.append(callback)
    try:
        yield
    finally:
        _watchers.remove(callback)


def _started(process: subprocess.Popen) -> None:
    for callback in list(_watchers):
        callback(process.pid)  # its own session: the process group id is its pid


def start_time(pid: int) -> Optional[int]:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22); None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        return int(stat.rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _group_members(pgid: int, since: int) -> list[int]:
    """The processes of group ``pgid`` started at or after ``since``: the group envkit recorded, not a later one
    that reuses the number."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(encoding="utf-8", errors="replace").rpartition(")")[2].split()
            if fields[0] != "Z" and int(fields[2]) == pgid and int(fields[19]) >= since:  # (a zombie is done)
                out.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def stop_leftovers(pgid: int, since: int, wait: float = 10.0) -> bool:
    """SIGKILL what is left of a process group a dead envkit started (``since``: its leader's start time) and wait
    until it is gone; False if something of it was still there after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        members = _group_members(pgid, since)
        if not members:
            return True
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def stop_group(process: subprocess.Popen, grace: float = GRACE) -> tuple[bytes, bytes]:
    """Stop a child's whole process group (it may have started workers): SIGTERM, then after ``grace`` seconds
    SIGKILL (at once when ``grace`` is 0). Returns what was left in its pipes."""
    steps = ((signal.SIGTERM, grace), (signal.SIGKILL, _AFTER_KILL)) if grace > 0 else ((signal.SIGKILL, _AFTER_KILL),)
    out: Optional[tuple[bytes, bytes]] = None
    for sig, wait in steps:
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            out = process.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue  # after SIGKILL too: stuck in the kernel (a hung driver), nothing more can be done
    try:  # the leader is gone; stragglers of its group that ignored SIGTERM
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return out if out is not None and out[0] is not None else (b"", b"")


def run_captured(argv: Sequence[str], env: Mapping[str, str], timeout: float, grace: float = GRACE,
                 input_text: Optional[str] = None) -> Captured:
    """Run ``argv`` to completion or ``timeout`` seconds, capturing its output. OSError when it cannot start.
    ``input_text`` is written to its stdin (else it reads nothing).

    Past the time limit, or on any exception while waiting (Ctrl-C), its whole process group is stopped."""
    started = time.monotonic()
    stdin = subprocess.DEVNULL if input_text is None else subprocess.PIPE
    process = subprocess.Popen(list(argv), env=dict(env), stdin=stdin, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        _started(process)
        data = None if input_text is None else input_text.encode("utf-8")
        stdout, stderr = process.communicate(input=data, timeout=timeout)
        returncode: Optional[int] = process.returncode
    except subprocess.TimeoutExpired:
        stdout, stderr = stop_group(process, grace)
        returncode = None
    except BaseException:
        stop_group(process, grace)
        raise
    return Captured(returncode, _text(stdout), _text(stderr), time.monotonic() - started)


def query(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Optional[str]:
    """The output of a short query (``conda info --json``, ``uv python find``); None if it failed in any way."""
    try:
        done = run_captured(argv, env, timeout)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _text(data: Optional[bytes]) -> str:
    return (data or b"").decode("utf-8", "replace")


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
        _started(process)
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
