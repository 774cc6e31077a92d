"""Test-only: hold envkit at a named point of a run so that a test can SIGKILL it exactly there, or let it go on;
and make a named write fail as a full or read-only disk would, at exactly that write.

With ENVKIT_TEST_PAUSE_AT=POINT and ENVKIT_TEST_PAUSE_FILE=PATH set, reaching ``pause_at(POINT)`` writes PATH and
waits until the test kills the process or deletes PATH (then it goes on). With ENVKIT_TEST_FAULT_AT=POINT:ERRNO
(``journal:ENOSPC``; several separated by commas), reaching ``fault_at(POINT, path)`` raises the OSError that errno
names, for ``path``, as the system call at that point would. Without them (always, outside envkit's own tests) both
do nothing.
"""

from __future__ import annotations

import os
import time


def pause_at(point: str) -> None:
    if os.environ.get("ENVKIT_TEST_PAUSE_AT") == point and os.environ.get("ENVKIT_TEST_PAUSE_FILE"):
        marker = os.environ["ENVKIT_TEST_PAUSE_FILE"]
        with open(marker, "w", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        deadline = time.monotonic() + 600
        while os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.02)


def fault_at(point: str, path: object) -> None:
    faults = os.environ.get("ENVKIT_TEST_FAULT_AT")
    if not faults:
        return
    import errno

    for fault in faults.split(","):
        where, _, name = fault.partition(":")
        if where == point:
            number = getattr(errno, name, errno.EIO)
            raise OSError(number, os.strerror(number), str(path))
