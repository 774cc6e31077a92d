"""Running other programs (installers, conda, the environment's Python): argv lists, never a shell.

Every child has a time limit, and what it prints is read in chunks into bounded buffers that keep the tail (the
last words are the ones that explain a failure): a program that prints without end, or one 300 MiB line, costs
envkit a few MiB at most. When the program itself has exited, what it started is ended with it (its whole process
group), so a worker that still holds its output pipe cannot keep envkit waiting.

Every child runs in its own session, so a Ctrl-C at the terminal reaches envkit alone; envkit then stops the child's
whole process group (installers start workers) before it cleans up. A SIGKILL gives envkit no such chance: whoever
watches (``watching``, create's journal) learns each child's process group as it starts, so that the next run can
stop what is left of it (``stop_leftovers``) before it touches what the children were writing to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Sequence

from envkit.system.signals import raise_lost_signal, stop_in_thread

GRACE = 2.0  # seconds between SIGTERM and SIGKILL
_AFTER_KILL = 5.0  # seconds to wait for the pipes to close after SIGKILL
LINGER = 2.0  # seconds the pipes may stay open (held by what the program started) after the program has exited
MAX_OUTPUT = 8 << 20  # bytes of each output stream kept by run_captured (the last ones)
MAX_LINE = 16 << 10  # bytes of one output line kept by run_streamed (the last ones)
_CHUNK = 64 << 10


@dataclass(frozen=True)
class Finished:
    returncode: Optional[int]  # None: cut off at its time limit, or silent too long (its process group stopped)
    tail: tuple[str, ...]  # the last lines the program printed (stdout and stderr together)
    elapsed: float
    silent: bool = False  # cut off because it printed nothing for its ``silence`` seconds


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
    # Every process's stat, read plainly (twice as fast as through pathlib): a login node has thousands, and every
    # installer step ends with this.
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            descriptor = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                stat = os.read(descriptor, 4096)
            finally:
                os.close(descriptor)
            fields = stat.rpartition(b")")[2].split()
            if fields[0] != b"Z" and int(fields[2]) == pgid and int(fields[19]) >= since:  # (a zombie is done)
                out.append(int(name))
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


class _Tail:
    """The last ``limit`` bytes of a stream."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[:len(self.data) - self.limit]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


class _Lines:
    """A stream cut into lines for ``on_line``, each kept to its last MAX_LINE bytes; the last ``keep`` lines kept."""

    def __init__(self, on_line: Optional[Callable[[str], None]], keep: int) -> None:
        self.on_line = on_line
        self.tail: deque[str] = deque(maxlen=keep)
        self.pending = bytearray()
        self.cut = False

    def add(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._grow(chunk[start:])
                return
            self._grow(chunk[start:end])
            self._emit()
            start = end + 1

    def close(self) -> None:
        if self.pending or self.cut:
            self._emit()

    def _grow(self, piece: bytes) -> None:
        self.pending += piece
        if len(self.pending) > MAX_LINE:
            del self.pending[:len(self.pending) - MAX_LINE]
            self.cut = True

    def _emit(self) -> None:
        line = self.pending.decode("utf-8", "replace").rstrip("\r")
        if "\r" in line:  # a terminal's line (envkit.system.transfers.TerminalOutput): what it shows in the end
            line, self.cut = line.rpartition("\r")[2], False
        if self.cut:
            line = "[...] " + line  # only the end of a line longer than MAX_LINE bytes
        self.pending, self.cut = bytearray(), False
        self.tail.append(line)
        if self.on_line is not None:
            self.on_line(line)


Sinks = Mapping[int, Callable[[bytes], Optional[bool]]]  # a pipe's file descriptor -> where its bytes go (False: nothing new)


def _exited(process: subprocess.Popen) -> bool:
    """Whether the child has exited, without reaping it: its pid, so its process group id, stays taken (a later
    killpg cannot reach an unrelated group that reuses the number)."""
    if process.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_exited(process: subprocess.Popen, deadline: float) -> bool:
    """Whether the child exited by ``deadline``, looking again after 1 ms, 2, 4, ... and then every 20 ms: a child
    that closed its output is most often exiting that instant, and a first wait of 20 ms made each of create's
    installer steps 20 ms longer."""
    pause = 0.001
    while not _exited(process):
        now = time.monotonic()
        if now >= deadline:
            return False
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, 0.02)
    return True


def _killpg(process: subprocess.Popen, sig: int) -> None:
    if process.returncode is None:  # not reaped: the group id is still this child's
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)


def _end_group(process: subprocess.Popen) -> None:
    """SIGKILL what is left of the (exited, not yet reaped) child's process group, and wait until it is gone."""
    since = start_time(process.pid)
    _killpg(process, signal.SIGKILL)
    if since is not None:
        deadline = time.monotonic() + _AFTER_KILL
        while _group_members(process.pid, since) and time.monotonic() < deadline:
            time.sleep(0.01)


def _pump(process: subprocess.Popen, sinks: Sinks, deadline: float, silence: Optional[float] = None,
          feed: Optional[bytes] = None, signals: bool = False) -> str:
    """Move the child's output into ``sinks`` (and ``feed`` into its stdin) until its pipes close ("closed"), the
    ``deadline`` passes ("deadline"), it prints nothing for ``silence`` seconds ("silence"), or it has exited and
    what it started still holds the pipes LINGER seconds later ("held"). With ``signals``, a SIGTERM whose
    Interrupted a finalizer swallowed (envkit.system.signals) is raised here (not while stopping a child)."""
    selector = selectors.DefaultSelector()
    reading = 0
    try:
        for fd, sink in sinks.items():
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ, sink)
            reading += 1
        data = memoryview(feed or b"")
        if process.stdin is not None and not process.stdin.closed:
            if data:
                os.set_blocking(process.stdin.fileno(), False)
                selector.register(process.stdin.fileno(), selectors.EVENT_WRITE, None)
            else:
                process.stdin.close()
        heard = time.monotonic()
        exited_at: Optional[float] = None
        while reading:
            if signals:
                raise_lost_signal()
                stop_in_thread()  # a thread of a command a signal stopped: its child stops too
            now = time.monotonic()
            if exited_at is None and _exited(process):
                exited_at = now
            if exited_at is not None and now >= exited_at + LINGER:
                return "held"
            if now >= deadline:
                return "deadline"
            if silence is not None and now >= heard + silence:
                return "silence"
            for key, _ in selector.select(timeout=min(0.2, deadline - now)):
                if key.data is None:  # its stdin
                    try:
                        data = data[os.write(key.fd, data[:_CHUNK]):]
                    except BlockingIOError:
                        continue
                    except OSError:  # it stopped reading (closed its stdin, or exited)
                        data = memoryview(b"")
                    if not data:
                        selector.unregister(key.fd)
                        process.stdin.close()  # type: ignore[union-attr]
                    continue
                try:
                    chunk = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError as error:  # a pseudo-terminal's other side closed (EIO): its end, as a pipe's
                    if error.errno != errno.EIO:
                        raise
                    chunk = b""
                if not chunk:
                    selector.unregister(key.fd)
                    reading -= 1
                    continue
                if key.data(chunk) is not False:  # (a terminal's spinner going round alone is no sign of life)
                    heard = now
        return "closed"
    finally:
        selector.close()


def _stop(process: subprocess.Popen, sinks: Sinks, grace: float) -> None:
    """Stop the child's whole process group: SIGTERM, then after ``grace`` seconds SIGKILL (at once when ``grace``
    is 0), reading its output (bounded) meanwhile; then reap it."""
    steps = ((signal.SIGTERM, grace), (signal.SIGKILL, _AFTER_KILL)) if grace > 0 else ((signal.SIGKILL, _AFTER_KILL),)
    for sig, wait in steps:
        _killpg(process, sig)
        deadline = time.monotonic() + wait
        _pump(process, sinks, deadline)
        if _wait_exited(process, deadline):
            break  # (after SIGKILL too, it may not have: stuck in the kernel, a hung driver; nothing more to do)
    if _exited(process):
        _end_group(process)  # the leader is gone; stragglers of its group that ignored SIGTERM
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_AFTER_KILL)


def _supervise(process: subprocess.Popen, sinks: Sinks, timeout: Optional[float], grace: float,
               silence: Optional[float] = None, feed: Optional[bytes] = None,
               announced: bool = False) -> tuple[Optional[int], str]:
    """Run the child to its end, within ``timeout`` seconds: (its exit status, how it ended). The status is None when
    it was stopped ("deadline", "silence"). What it started is ended with it in every case. ``announced``: the
    watchers were told of it when it started (start_captured)."""
    deadline = time.monotonic() + timeout if timeout is not None else float("inf")
    try:
        if not announced:
            _started(process)
        ended = _pump(process, sinks, deadline, silence, feed, signals=True)
        if ended == "closed" and not _wait_exited(process, deadline):
            ended = "deadline"  # it closed its output but kept running
        if ended in ("deadline", "silence"):
            _stop(process, sinks, grace)
            return None, ended
        _end_group(process)  # it has exited: what it started (holding its pipes or not) goes with it
        return process.wait(), ended
    except BaseException:  # Ctrl-C above all: its process group first, then up
        _stop(process, sinks, grace)
        raise
    finally:
        _close_pipes(process)


def _close_pipes(process: subprocess.Popen) -> None:
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


class Pending:
    """A child started now (start_captured) and waited for later (``finish``), so that a short check runs beside a
    longer step. Nothing reads its output before ``finish``: what it prints beyond a pipe's buffer (64 KiB) waits
    until then. Its time limit counts from its start; once it has ended, what it printed is read in full however
    long the step beside it took (a 3 GB download far past the check's limit)."""

    def __init__(self, process: subprocess.Popen, feed: Optional[bytes], max_output: int) -> None:
        self.process, self.feed, self.started = process, feed, time.monotonic()
        self.out, self.err = _Tail(max_output), _Tail(max_output)

    def finish(self, timeout: float, grace: float = GRACE) -> Captured:
        """Wait for it to end, within ``timeout`` seconds of its start (past them its whole process group is
        stopped, returncode None), reading its output; on any exception while waiting (Ctrl-C) it is stopped too."""
        process = self.process
        assert process.stdout is not None and process.stderr is not None
        left = timeout - (time.monotonic() - self.started)
        if _exited(process):  # ended meanwhile: its output is waiting in the pipes, to be read, not cut off
            left = max(left, LINGER)
        left = max(left, 0.0)
        returncode, _ = _supervise(process, {process.stdout.fileno(): self.out.add,
                                             process.stderr.fileno(): self.err.add}, left, grace, feed=self.feed,
                                   announced=True)
        return Captured(returncode, self.out.text(), self.err.text(), time.monotonic() - self.started)

    def stop(self) -> None:
        """Stop it (its whole process group, at once) without a result: the step it ran beside failed."""
        if self.process.returncode is None:
            try:
                _stop(self.process, {}, grace=0)
            finally:
                _close_pipes(self.process)


def start_captured(argv: Sequence[str], env: Mapping[str, str], input_text: Optional[str] = None,
                   max_output: int = MAX_OUTPUT) -> Pending:
    """Start ``argv`` in its own session, its outputs piped, the watchers told; OSError when it cannot start.
    Nothing starts in a thread of a command a signal stopped (envkit.system.signals.stop_in_thread)."""
    stop_in_thread()
    stdin = subprocess.DEVNULL if input_text is None else subprocess.PIPE
    process = subprocess.Popen(list(argv), env=dict(env), stdin=stdin, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    pending = Pending(process, None if input_text is None else input_text.encode("utf-8"), max_output)
    try:
        _started(process)
    except BaseException:  # a watcher that cannot write it down (create's journal): not left running unrecorded
        pending.stop()
        raise
    return pending


def run_captured(argv: Sequence[str], env: Mapping[str, str], timeout: float, grace: float = GRACE,
                 input_text: Optional[str] = None, max_output: int = MAX_OUTPUT) -> Captured:
    """Run ``argv`` to completion or ``timeout`` seconds, capturing the last ``max_output`` bytes of each of its
    outputs. OSError when it cannot start. ``input_text`` is written to its stdin (else it reads nothing).

    Past the time limit, or on any exception while waiting (Ctrl-C), its whole process group is stopped."""
    return start_captured(argv, env, input_text, max_output).finish(timeout, grace)


def query(argv: Sequence[str], env: Mapping[str, str], timeout: float) -> Optional[str]:
    """The output of a short query (``conda info --json``, ``uv python find``); None if it failed in any way."""
    try:
        done = run_captured(argv, env, timeout)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def run_streamed(
    argv: Sequence[str],
    env: Mapping[str, str],
    on_line: Optional[Callable[[str], None]] = None,
    cwd: Optional[Path] = None,
    tail_lines: int = 25,
    timeout: Optional[float] = None,
    silence: Optional[float] = None,
    terminal: bool = False,
) -> Finished:
    """Run ``argv`` to completion, handing each output line to ``on_line`` and keeping the last ``tail_lines``.

    It is stopped (returncode None) past ``timeout`` seconds, or after ``silence`` seconds without a byte of output
    (``silent``). A missing program is a Finished with returncode 127 and the reason as its tail. An exception while
    it runs (KeyboardInterrupt above all) stops the child's process group first, then propagates. With
    ``terminal``, its stderr is a pseudo-terminal, on which uv draws its download bars: read by
    envkit.system.transfers.TerminalOutput (the bars to the progress display, the text, cleaned, to ``on_line``).
    """
    from envkit.system.transfers import TerminalOutput
    from envkit.text.terminal import pseudo_terminal

    stop_in_thread()
    started = time.monotonic()
    lines = _Lines(on_line, tail_lines)
    master, slave = pseudo_terminal() if terminal else (None, None)
    try:
        process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if slave is None else slave, start_new_session=True,
        )
    except OSError as error:
        return Finished(127, (f"{argv[0]}: {error.strerror or error}",), 0.0)
    finally:
        if slave is not None:
            os.close(slave)  # the child's only: the terminal ends (EIO) when the child and what it started are gone
    assert process.stdout is not None
    sinks = {process.stdout.fileno(): lines.add}
    if master is not None:
        sinks[master] = TerminalOutput(lines.add).add
    try:
        returncode, ended = _supervise(process, sinks, timeout, GRACE, silence)
    finally:
        lines.close()
        if master is not None:
            os.close(master)
    return Finished(returncode, tuple(lines.tail), time.monotonic() - started, silent=ended == "silence")
