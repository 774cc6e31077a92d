"""SIGTERM, SIGHUP and SIGQUIT end envkit as Ctrl-C does: the handler raises :class:`Interrupted` wherever envkit
is, and what envkit was doing cleans up on its way out (create undoes its run, `envkit jupyter` cancels its job).

An exception raised in a signal handler is lost when the signal lands while Python runs a finalizer (a
``__del__``, such as ``subprocess.Popen``'s, or a weakref callback): Python prints "Exception ignored in ..." and
goes on, and envkit would go on waiting as if nothing had happened. While :func:`interrupting_signals` is in force,
such a lost Interrupted is kept (and so is the KeyboardInterrupt of a Ctrl-C, which Python's own handler raises), and
:func:`raise_lost_signal`, which envkit's waiting loops call each time round, raises it again. Only a lost one is
raised there: one that went its way is never raised twice.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Iterator, Optional

from envkit.errors import Interrupted

ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_lost: list[int] = []  # the signal numbers whose Interrupted a finalizer swallowed (at most the first is raised)


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def _keeping_lost(previous):  # type: ignore[no-untyped-def]
    def hook(unraisable) -> None:  # type: ignore[no-untyped-def]
        if isinstance(unraisable.exc_value, KeyboardInterrupt):  # Interrupted, or Ctrl-C's own (SIGINT)
            _lost.append(getattr(unraisable.exc_value, "signum", signal.SIGINT))
        previous(unraisable)  # Python's own report still goes to stderr

    return hook


@contextlib.contextmanager
def interrupting_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGHUP and SIGQUIT raise Interrupted (exit 128 + N). Outside the main thread the
    signals are left as they are (Python lets only the main thread set handlers)."""
    try:
        previous = {sig: signal.signal(sig, _interrupt) for sig in ENDING}
    except ValueError:  # not the main thread
        yield
        return
    hook = sys.unraisablehook
    sys.unraisablehook = _keeping_lost(hook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _lost.clear()


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
