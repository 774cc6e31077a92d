"""Whether hard links work from one directory to another, found by making one: never judged from ``st_dev``.

A bind mount of one filesystem shows both sides with the same ``st_dev`` and still refuses a link between them
(EXDEV); an NFS export can refuse links that its ``st_dev`` does not predict. So the probe makes a small file in the
first directory, links it into the second, and removes both: what the filesystem does is the answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple, Optional

_PROBE = ".envkit-link-probe-"


class LinkProbe(NamedTuple):
    """The answer: ``works`` True (a link was made), False (the system refused it: ``reason``), or None (no probe
    could be made: ``reason`` says why, e.g. a directory that cannot be written)."""

    works: Optional[bool]
    source: Path  # the directory the probe file was made in
    target: Path  # the directory it was linked into
    reason: str = ""


def nearest_existing(path: Path) -> Path:
    """``path``, or the nearest directory above it that exists (what a directory about to be made will sit on)."""
    candidate = Path(os.path.abspath(path))
    while not candidate.is_dir() and candidate.parent != candidate:
        candidate = candidate.parent
    return candidate


def probe_links(source: Path, target: Path) -> LinkProbe:
    """Make a file in ``source`` (or the nearest directory above it that exists), hard-link it into ``target`` (the
    same), and remove both. Nothing is left behind, whatever the answer."""
    here, there = nearest_existing(source), nearest_existing(target)
    name = f"{_PROBE}{os.getpid()}-{os.urandom(4).hex()}"
    original, link = here / name, there / f"{name}.link"
    try:
        fd = os.open(original, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        return LinkProbe(None, here, there, f"no probe file can be made in {here}: {error.strerror or error}")
    os.close(fd)
    try:
        os.link(original, link)
    except OSError as error:
        return LinkProbe(False, here, there, f"{error.strerror or error}")
    else:
        os.unlink(link)
        return LinkProbe(True, here, there)
    finally:
        os.unlink(original)
