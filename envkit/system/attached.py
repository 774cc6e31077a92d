"""The two kinds of child that envkit.system.process does not start, for running from an image (envkit.travel):

- ``run_attached``: the user's command, attached to envkit's terminal and process group (its stdin, its output,
  Ctrl-C reaches it directly), waited for while envkit holds what it runs from (a mounted image). SIGTERM, SIGHUP and
  SIGQUIT sent to envkit are passed on to it; envkit goes on waiting, so that what it holds is let go only once
  the command has ended (a cancelled Slurm job signals every process of the job: the command ends, then envkit
  unmounts).
- ``start_tied``: a helper that lives as long as envkit does (squashfuse serving the image): in its own session, so
  that a Ctrl-C at the terminal does not stop it under the command, and told SIGTERM by the kernel when envkit dies,
  however it dies (a SIGKILL too: prctl's PR_SET_PDEATHSIG).

Both take argv lists, never a shell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence

_PASSED_ON = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_PR_SET_PDEATHSIG = 1


def run_attached(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``argv`` in envkit's process group with its stdio, to its end; its exit status as a shell reports it
    (128 + N for a signal N). OSError when it cannot start."""
    previous = {sig: signal.getsignal(sig) for sig in (*_PASSED_ON, signal.SIGINT)}
    process: Optional[subprocess.Popen] = None

    def pass_on(signum: int, frame: object) -> None:
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signum)

    try:
        for sig in _PASSED_ON:
            signal.signal(sig, pass_on)
        # Ctrl-C reaches the command from the terminal (the same process group): envkit waits for it to end.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        ignored = previous[signal.SIGINT] is signal.SIG_IGN  # (a background job's): the command's ignores it too
        process = subprocess.Popen(list(argv), env=dict(env),
                                   preexec_fn=None if ignored else _default_sigint)
        while True:
            try:
                code = process.wait()
                break
            except InterruptedError:  # (PEP 475 retries; kept for clarity)
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_tied(argv: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen:
    """Start ``argv`` in its own session, its output into ``log``, to be told SIGTERM when envkit dies. OSError
    when it cannot start."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def tie() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # envkit died before the tie was made
            os.kill(os.getpid(), signal.SIGTERM)

    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=tie)


def end_tied(process: subprocess.Popen, wait: float) -> None:
    """Wait up to ``wait`` seconds for a tied child to end by itself, then SIGTERM it, then SIGKILL it."""
    for sig, grace in ((None, wait), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
        deadline = time.monotonic() + grace
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process.returncode is not None:
            return
