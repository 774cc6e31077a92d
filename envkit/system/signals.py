"""SIGTERM, SIGHUP and SIGQUIT end envkit as Ctrl-C does: the handler raises :class:`Interrupted` wherever envkit
is, and what envkit was doing cleans up on its way out (create undoes its run, `envkit jupyter` cancels its job).

An exception raised in a signal handler is lost when the signal lands while Python runs a finalizer (a
``__del__``, such as ``subprocess.Popen``'s, or a weakref callback): Python prints "Exception ignored in ..." and
goes on, and envkit would go on waiting as if nothing had happened. While :func:`interrupting_signals` is in force,
such a lost Interrupted is kept (and so is the KeyboardInterrupt of a Ctrl-C), and
:func:`raise_lost_signal`, which envkit's waiting loops call each time round, raises it again. Only a lost one is
raised there: one that went its way is never raised twice.

A signal reaches the main thread only. Threads that run children or downloads for a command (the survey's
partitions and nodes, manifests check's resolutions, a lock's downloads) learn of it from :func:`stop_in_thread`,
which envkit's waiting loops also call: once the main thread was told to stop, every other thread stops what it
waits on too, and starts nothing new, except inside :func:`cleaning_up` (cancelling its job, removing its files).
So a command ends as a whole, its jobs cancelled and its children stopped, whichever thread started them.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from typing import Iterator, Optional

from envkit.errors import Interrupted

ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_lost: list[int] = []  # the signal numbers whose Interrupted a finalizer swallowed (at most the first is raised)
_asked: list[int] = []  # the signal that asked this run to stop (the first), for the other threads
_thread = threading.local()  # .cleaning: this thread is cleaning up after the stop (its children may run)
_depth = [0]  # interrupting_signals blocks in force (a command's, and create's or jupyter's inside it)


def _interrupt(signum: int, frame: object) -> None:
    _asked.append(signum)
    raise Interrupted(signum)


def _interrupt_ctrl_c(signum: int, frame: object) -> None:
    """Ctrl-C: Python's own KeyboardInterrupt, the other threads told as for the other signals."""
    _asked.append(signum)
    raise KeyboardInterrupt


def _keeping_lost(previous):  # type: ignore[no-untyped-def]
    def hook(unraisable) -> None:  # type: ignore[no-untyped-def]
        if isinstance(unraisable.exc_value, KeyboardInterrupt):  # Interrupted, or Ctrl-C's own (SIGINT)
            _lost.append(getattr(unraisable.exc_value, "signum", signal.SIGINT))
        previous(unraisable)  # Python's own report still goes to stderr

    return hook


@contextlib.contextmanager
def interrupting_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGHUP and SIGQUIT raise Interrupted (exit 128 + N), and Ctrl-C KeyboardInterrupt
    as it always does; the other threads learn of either (:func:`stop_in_thread`). A signal that is ignored (nohup)
    stays ignored. Outside the main thread the signals are left as they are (Python lets only the main thread set
    handlers)."""
    try:
        # A signal ignored when envkit started stays ignored: `nohup envkit ...` (SIGHUP), a job a shell started in
        # the background (SIGINT, SIGQUIT).
        handlers = {**{sig: _interrupt for sig in ENDING}, signal.SIGINT: _interrupt_ctrl_c}
        previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()
                    if signal.getsignal(sig) is not signal.SIG_IGN}
    except ValueError:  # not the main thread
        yield
        return
    hook = sys.unraisablehook
    sys.unraisablehook = _keeping_lost(hook)
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if not _depth[0]:  # what the outermost block was told ends with it
            _lost.clear()
            _asked.clear()


def lost_signal() -> Optional[int]:
    """The signal whose Interrupted a finalizer swallowed, if one did."""
    return _lost[0] if _lost else None


def raise_lost_signal() -> None:
    """Raise (once) the Interrupted, or Ctrl-C's KeyboardInterrupt, a finalizer swallowed; nothing when none was."""
    if _lost:
        signum = _lost[0]
        _lost.clear()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(signum)


def stop_asked() -> Optional[int]:
    """The signal that asked this run to stop, if one did (while :func:`interrupting_signals` is in force)."""
    return _asked[0] if _asked else None


def stop_in_thread() -> None:
    """In a thread other than the main one, once a signal asked the run to stop: raise it there too (Interrupted,
    or KeyboardInterrupt for Ctrl-C), so that the thread stops its child and starts no other. Nothing in the main
    thread (the handler raised it there), nor in a thread that is :func:`cleaning_up`."""
    if not _asked or threading.current_thread() is threading.main_thread() or getattr(_thread, "cleaning", False):
        return
    if _asked[0] == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(_asked[0])


@contextlib.contextmanager
def cleaning_up() -> Iterator[None]:
    """The block cleans up after a stop (scancel of its job, a child stopped): :func:`stop_in_thread` lets it run."""
    before = getattr(_thread, "cleaning", False)
    _thread.cleaning = True
    try:
        yield
    finally:
        _thread.cleaning = before
