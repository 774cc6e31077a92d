"""Run a call that may hang (a ctypes call into the NVIDIA driver) with a time limit."""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


class ProbeTimeout(Exception):
    """The call did not finish within its time limit; it may still be running in its daemon thread."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds


def call_with_timeout(function: Callable[[], T], seconds: float) -> T:
    """Return ``function()``, or re-raise what it raised; raise ProbeTimeout if it takes longer than ``seconds``.

    A hung call into a C library cannot be interrupted, so it runs in a daemon thread that is abandoned on
    timeout: the caller goes on, and the process can still exit.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the caller, who decides what it means
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="envkit-probe", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise ProbeTimeout(seconds)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
