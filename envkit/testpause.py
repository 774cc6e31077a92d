"""Test-only: hold envkit at a named point of a run so that a test can SIGKILL it exactly there.

With ENVKIT_TEST_PAUSE_AT=POINT and ENVKIT_TEST_PAUSE_FILE=PATH set, reaching ``pause_at(POINT)`` writes PATH and
sleeps. Without them (always, outside envkit's own tests) it does nothing.
"""

from __future__ import annotations

import os
import time


def pause_at(point: str) -> None:
    if os.environ.get("ENVKIT_TEST_PAUSE_AT") == point and os.environ.get("ENVKIT_TEST_PAUSE_FILE"):
        with open(os.environ["ENVKIT_TEST_PAUSE_FILE"], "w", encoding="utf-8") as marker:
            marker.write(f"{os.getpid()}\n")
        time.sleep(600)
